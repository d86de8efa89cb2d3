// util/cancel with real signals.
#include <chrono>
#include <csignal>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "util/cancel.h"

namespace kiln {
namespace {

TEST(Cancel, EachCancelEscalatesOneLevelAndTheFdStaysReadable) {
  CancelToken token;
  ASSERT_GE(token.fd(), 0);
  EXPECT_EQ(token.level(), CancelLevel::none);
  EXPECT_TRUE(token.sleep_for(std::chrono::milliseconds(1)));
  token.cancel();
  EXPECT_EQ(token.level(), CancelLevel::stop);
  EXPECT_FALSE(token.sleep_for(std::chrono::seconds(30)));
  pollfd fd{token.fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&fd, 1, 0), 1);
  token.cancel();
  EXPECT_EQ(token.level(), CancelLevel::kill);
  token.cancel();
  EXPECT_EQ(token.level(), CancelLevel::kill);
}

/// The checks of the interrupt token, in a child process: a signal cancels the process-wide
/// token for good, and the tests after this one in the same binary start processes.
int check_interrupt_token() {
  install_interrupt_handlers();
  CancelToken& token = interrupt_token();
  int failures = 0;
  auto check = [&](bool ok) { failures += ok ? 0 : 1; };
  check(interrupt_signal() == 0);
  check(interrupt_signal_name().empty());
  check(token.sleep_for(std::chrono::milliseconds(1)));
  check(std::raise(SIGTERM) == 0);
  check(interrupt_signal() == SIGTERM);
  check(interrupt_signal_name() == "SIGTERM");
  check(token.level() == CancelLevel::stop);
  check(!token.sleep_for(std::chrono::seconds(30)));
  pollfd fd{token.fd(), POLLIN, 0};
  check(::poll(&fd, 1, 0) == 1); // stays readable for the next poller too
  // A second signal escalates but does not overwrite which came first.
  check(std::raise(SIGINT) == 0);
  check(interrupt_signal() == SIGTERM);
  check(token.level() == CancelLevel::kill);
  return failures;
}

TEST(Cancel, SigtermCancelsTheInterruptTokenAndASecondSignalEscalates) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::_exit(check_interrupt_token());
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "failed checks in the child";
}

} // namespace
} // namespace kiln
