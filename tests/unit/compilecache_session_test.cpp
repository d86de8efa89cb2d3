// `kiln-cc session` as a function: its usage errors, which must be the only way a session verb
// fails a build. The verbs themselves run as the real binary in
// tests/integration/kiln_cc_session_test.cpp.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "compilecache/session.h"

namespace kiln::cc {
namespace {

struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// What `fd` receives while `body` runs; kiln-cc writes with stdio, so capture the descriptor.
template <typename Body> std::string capture_fd(int fd, Body&& body) {
  std::FILE* file = std::tmpfile();
  std::fflush(fd == 1 ? stdout : stderr);
  int saved = ::dup(fd);
  ::dup2(::fileno(file), fd);
  body();
  std::fflush(fd == 1 ? stdout : stderr);
  ::dup2(saved, fd);
  ::close(saved);
  std::string text;
  std::rewind(file);
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) {
    text += static_cast<char>(c);
  }
  std::fclose(file);
  return text;
}

Outcome session(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) {
    argv.push_back(arg.data());
  }
  Outcome outcome;
  outcome.err = capture_fd(2, [&] {
    outcome.out = capture_fd(
        1, [&] { outcome.exit_code = run_session(static_cast<int>(argv.size()), argv.data()); });
  });
  return outcome;
}

void expect_usage_error(const std::vector<std::string>& args, const std::string& message) {
  Outcome outcome = session(args);
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err.rfind("kiln-cc session: " + message, 0), 0u) << outcome.err;
  EXPECT_EQ(std::count(outcome.err.begin(), outcome.err.end(), '\n'), 1) << outcome.err;
}

TEST(Session, MisuseIsOneLineAndExitTwo) {
  expect_usage_error({}, "no verb given");
  expect_usage_error({"begin"}, "unknown verb 'begin'");
  expect_usage_error({"drain", "--budget-ms", "5"}, "'drain' has no option --budget-ms");
  expect_usage_error({"start", "--budget-ms"}, "--budget-ms needs a value");
  expect_usage_error({"start", "--budget-ms=2s"}, "--budget-ms takes a whole number, not '2s'");
  expect_usage_error({"probe", "--budget-ms", "0"}, "--budget-ms must be between 1 and 600000");
  expect_usage_error({"drain", "--stable-polls", "99999999999"},
                     "--stable-polls must be between 1 and 100000");
  expect_usage_error({"stats", "now"}, "'stats' takes no argument 'now'");
}

TEST(Session, VerbsThatNeedASessionSaySo) {
  const char* saved = std::getenv("KILN_CC_SESSION");
  std::string restore = saved != nullptr ? saved : "";
  ::unsetenv("KILN_CC_SESSION");
  expect_usage_error({"stats"}, "KILN_CC_SESSION is not set");
  expect_usage_error({"drain", "--timeout-s", "0"}, "KILN_CC_SESSION is not set");
  ::setenv("KILN_CC_SESSION", "/nonexistent/kiln-cc.test", 1);
  expect_usage_error({"stop"},
                     "KILN_CC_SESSION=/nonexistent/kiln-cc.test is not a kiln-cc session");
  if (saved != nullptr) {
    ::setenv("KILN_CC_SESSION", restore.c_str(), 1);
  } else {
    ::unsetenv("KILN_CC_SESSION");
  }
}

TEST(Session, HelpListsEveryVerb) {
  Outcome outcome = session({"--help"});
  EXPECT_EQ(outcome.exit_code, 0);
  for (const char* verb : {"probe", "start", "drain", "stats", "stop"}) {
    EXPECT_NE(outcome.out.find(std::string("  ") + verb + " "), std::string::npos) << verb;
  }
}

} // namespace
} // namespace kiln::cc
