// `kiln-cc session` as a build step's shell runs it: eval "$(kiln-cc session start)", the
// compiles, then drain, stats and stop. Levels and the drain run against the fake sccache of
// tests/fixtures/fake-sccache, which prints the current upstream stats schema; the server
// address, the stats and stop run against Debian's real sccache 0.4 too. Every listener is on
// loopback, and every test stops the servers it started.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compilecache/stats_line.h"
#include "util/process.h"
#include "util/strings.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// kiln-cc is built next to kiln.
const fs::path k_kiln_cc = fs::path(KILN_BINARY).parent_path() / "kiln-cc";
const fs::path k_fake_sccache = fs::path(KILN_TEST_FIXTURES) / "fake-sccache" / "sccache";

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
  }
  return lines;
}

/// As kiln-cc quotes a value in what it prints for eval.
std::string quoted(const std::string& value) {
  return shell_quote(value);
}

struct Ran {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::chrono::milliseconds took{0};
};

/// A loopback socket that listens (and never accepts), or one bound but not listening: a
/// port that refuses.
class Port {
public:
  explicit Port(bool listening) : m_fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    EXPECT_EQ(::bind(m_fd, reinterpret_cast<sockaddr*>(&address), length), 0);
    if (listening) {
      EXPECT_EQ(::listen(m_fd, 16), 0);
    }
    ::getsockname(m_fd, reinterpret_cast<sockaddr*>(&address), &length);
    m_port = ntohs(address.sin_port);
  }
  ~Port() { ::close(m_fd); }
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;
  int port() const { return m_port; }
  std::string url(const std::string& scheme = "http") const {
    return scheme + "://127.0.0.1:" + std::to_string(m_port);
  }

private:
  int m_fd;
  int m_port = 0;
};

bool accepts_connections(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

/// One build step's world: a scratch folder with a TMPDIR (its name has a quote in it, which
/// the printed exports must survive), sccache caches, and the fake's state.
class Step {
public:
  explicit Step(bool fake = true) {
    m_dir =
        fs::temp_directory_path() / ("kiln-cc-session-test-" + std::to_string(::getpid()) + "-" +
                                     std::to_string(Clock::now().time_since_epoch().count()));
    fs::create_directories(tmpdir());
    fs::create_directories(state() / "stats");
    fs::create_directories(m_dir / "bin");
    if (fake) {
      fs::create_symlink(k_fake_sccache, m_dir / "bin" / "sccache");
    }
  }
  ~Step() {
    for (const std::string& stop : m_cleanups) {
      run(stop);
    }
    fs::remove_all(m_dir);
  }
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;

  fs::path dir() const { return m_dir; }
  fs::path tmpdir() const { return m_dir / "it's tmp"; }
  fs::path state() const { return m_dir / "state"; }

  void write(const fs::path& path, const std::string& content) const {
    std::ofstream(path) << content;
  }
  /// What the fake's n-th --show-stats prints.
  void stats(int n, const std::string& snapshot) const {
    write(state() / "stats" / std::to_string(n), snapshot);
  }
  std::vector<std::string> fake_calls(const std::string& verb) const {
    std::vector<std::string> calls;
    for (const std::string& line : lines_of(read_text(state() / "calls"))) {
      if (line.starts_with(verb + " |")) {
        calls.push_back(line);
      }
    }
    return calls;
  }

  /// Run `script` in sh with the step's environment: no SCCACHE_* variable from outside, the
  /// fake (if any) first on PATH, and `env` (NAME=value lines, exported) on top.
  Ran run(const std::string& script, const std::string& env = "") const {
    std::string prologue = "for v in $(env | sed -n 's/^\\(SCCACHE_[A-Z0-9_]*\\)=.*/\\1/p'); do "
                           "unset \"$v\"; done\n"
                           "unset KILN_CC_SESSION\n"
                           "export PATH=" +
                           quoted((m_dir / "bin").string()) +
                           ":\"$PATH\"\n"
                           "export TMPDIR=" +
                           quoted(tmpdir().string()) + " HOME=" + quoted(m_dir.string()) +
                           " FAKE_SCCACHE_STATE=" + quoted(state().string()) +
                           " SCCACHE_DIR=" + quoted((m_dir / "cache").string()) +
                           "\n"
                           "K=" +
                           quoted(k_kiln_cc.string()) + "\n";
    for (const std::string& line : lines_of(env)) {
      auto eq = line.find('=');
      prologue += "export " + line.substr(0, eq) + "=" + quoted(line.substr(eq + 1)) + "\n";
    }
    fs::path out = m_dir / "out.txt";
    fs::path err = m_dir / "err.txt";
    std::string whole = prologue + "{\n" + script + "\n} >" + quoted(out.string()) + " 2>" +
                        quoted(err.string()) + "\n";
    auto start = Clock::now();
    std::string merged;
    ProcessExit exit =
        run_process({{"sh", "-c", whole}, {}, {}}, [&](std::string_view c) { merged += c; });
    Ran ran;
    ran.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    ran.exit_code = exit.status_code();
    ran.out = read_text(out);
    ran.err = read_text(err) + merged;
    return ran;
  }

  /// Stop whatever sccache server answers on this port when the test ends.
  void stop_at_end(const std::string& address_assignment) {
    m_cleanups.push_back("export " + address_assignment + "; sccache --stop-server");
  }

private:
  fs::path m_dir;
  std::vector<std::string> m_cleanups;
};

/// The session folder a start printed.
fs::path session_of(const std::string& exports) {
  std::smatch match;
  static const std::regex k_line("export KILN_CC_SESSION=([^\\n]*)\\n");
  std::string text = exports;
  if (!std::regex_search(text, match, k_line)) {
    ADD_FAILURE() << "no KILN_CC_SESSION in:\n" << exports;
    return {};
  }
  std::string path = match[1];
  if (path.starts_with("'") && path.ends_with("'")) {
    path = path.substr(1, path.size() - 2);
  }
  for (auto pos = path.find("'\\''"); pos != std::string::npos; pos = path.find("'\\''")) {
    path.replace(pos, 4, "'");
  }
  return path;
}

cc::CompileStats stats_line(const std::string& out) {
  auto lines = lines_of(out);
  EXPECT_EQ(lines.size(), 1u) << out;
  auto stats = cc::parse_stats_line(lines.empty() ? "" : lines.back());
  EXPECT_TRUE(stats.has_value()) << out;
  return stats.value_or(cc::CompileStats{});
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

// ---- against the fake: levels, the drain ---------------------------------------------------

TEST(KilnCcSession, StartDropsAnUnreachableLevelAndServesTheStepOnAPrivateSocket) {
  ASSERT_TRUE(fs::exists(k_kiln_cc)) << "build the kiln-cc target: " << k_kiln_cc;
  Step step;
  Port webdav(true);
  Port s3(false);
  std::string s3_url = s3.url() + "/bucket";
  Ran ran = step.run("$K session start", "SCCACHE_MULTILEVEL_CHAIN=disk,webdav,s3\n"
                                         "SCCACHE_WEBDAV_ENDPOINT=" +
                                             webdav.url() +
                                             "\n"
                                             "SCCACHE_BUCKET=kiln\n"
                                             "SCCACHE_ENDPOINT=" +
                                             s3_url + "\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  fs::path session = session_of(ran.out);
  EXPECT_EQ(session.parent_path(), step.tmpdir());
  EXPECT_EQ(ran.out, "export KILN_CC_SESSION=" + quoted(session.string()) +
                         "\n"
                         "export SCCACHE_MULTILEVEL_CHAIN=disk,webdav\n"
                         "unset SCCACHE_BUCKET\n"
                         "unset SCCACHE_ENDPOINT\n"
                         "export SCCACHE_IDLE_TIMEOUT=0\n"
                         "export SCCACHE_SERVER_UDS=" +
                         quoted((session / "sccache-0.sock").string()) + "\n");
  EXPECT_EQ(count(ran.err, "WARN"), 1u) << ran.err;
  EXPECT_NE(ran.err.find("kiln-cc: WARN: sccache level s3 is unreachable: SCCACHE_ENDPOINT=" +
                         s3_url + " (TCP 127.0.0.1:" + std::to_string(s3.port()) + " refused)"),
            std::string::npos)
      << ran.err;

  auto starts = step.fake_calls("--start-server");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_NE(starts[0].find("uds=" + (session / "sccache-0.sock").string() +
                           " port= chain=disk,webdav idle=0 "),
            std::string::npos)
      << starts[0];
  EXPECT_EQ(starts[0].find("SCCACHE_BUCKET"), std::string::npos) << starts[0];
  EXPECT_TRUE(fs::exists(session / "launches"));
  EXPECT_TRUE(fs::exists(session / "baseline.json"));
  auto recorded = nlohmann::json::parse(read_text(session / "session.json"));
  EXPECT_EQ(recorded["address"]["name"], "SCCACHE_SERVER_UDS");
  EXPECT_EQ(recorded["levels"].size(), 2u);
}

TEST(KilnCcSession, TheExportsWorkInTheShellThatEvaluatesThem) {
  Step step;
  Port s3(false);
  Ran ran = step.run("eval \"$($K session start)\"\n"
                     "echo \"session=$KILN_CC_SESSION\"\n"
                     "echo \"chain=$SCCACHE_MULTILEVEL_CHAIN bucket=${SCCACHE_BUCKET-unset}\"\n"
                     "echo \"uds=$SCCACHE_SERVER_UDS\"\n"
                     "test -f \"$KILN_CC_SESSION/launches\" && echo launches",
                     "SCCACHE_MULTILEVEL_CHAIN=disk,s3\nSCCACHE_BUCKET=kiln\n"
                     "SCCACHE_ENDPOINT=" +
                         s3.url());
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  auto lines = lines_of(ran.out);
  ASSERT_EQ(lines.size(), 4u) << ran.out;
  EXPECT_EQ(lines[0].rfind("session=" + step.tmpdir().string() + "/kiln-cc.", 0), 0u) << ran.out;
  EXPECT_EQ(lines[1], "chain=disk bucket=unset");
  EXPECT_EQ(lines[2], "uds=" + lines[0].substr(8) + "/sccache-0.sock");
  EXPECT_EQ(lines[3], "launches");
}

TEST(KilnCcSession, ALevelTheServerRefusesIsDroppedAndTheServerStartedAgain) {
  Step step;
  Port webdav(true);
  step.write(step.state() / "refuse",
             "webdav Server startup failed: cache storage failed to write: Unexpected (temporary) "
             "at write, context: { service: webdav, path: .sccache_check } => send http request\n");
  Ran ran = step.run("$K session start", "SCCACHE_MULTILEVEL_CHAIN=disk,webdav\n"
                                         "SCCACHE_WEBDAV_ENDPOINT=" +
                                             webdav.url() + "\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(count(ran.err, "WARN"), 1u) << ran.err;
  EXPECT_NE(ran.err.find("WARN: sccache would not start with level webdav (sccache: Starting the "
                         "server... | sccache: error: Server startup failed"),
            std::string::npos)
      << ran.err;
  EXPECT_NE(ran.out.find("export SCCACHE_MULTILEVEL_CHAIN=disk\nunset SCCACHE_WEBDAV_ENDPOINT\n"),
            std::string::npos)
      << ran.out;
  auto starts = step.fake_calls("--start-server");
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_NE(starts[0].find("sccache-0.sock port= chain=disk,webdav "), std::string::npos);
  EXPECT_NE(starts[1].find("sccache-1.sock port= chain=disk "), std::string::npos)
      << "a fresh address: the refused server may still bind the first one";
  EXPECT_NE(ran.out.find("/sccache-1.sock'\n"), std::string::npos) << ran.out;
}

TEST(KilnCcSession, ARefusalThatNamesNoLevelDropsTheSlowestRemoteLevel) {
  Step step;
  Port webdav(true);
  Port s3(true);
  step.write(step.state() / "refuse", "s3 Timed out waiting for server startup\n");
  Ran ran = step.run("$K session start", "SCCACHE_MULTILEVEL_CHAIN=disk,webdav,s3\n"
                                         "SCCACHE_WEBDAV_ENDPOINT=" +
                                             webdav.url() +
                                             "\n"
                                             "SCCACHE_BUCKET=kiln\nSCCACHE_ENDPOINT=" +
                                             s3.url() + "\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.err.find("WARN: sccache would not start with level s3 ("), std::string::npos)
      << ran.err;
  EXPECT_NE(ran.out.find("export SCCACHE_MULTILEVEL_CHAIN=disk,webdav\n"), std::string::npos)
      << ran.out;
  EXPECT_EQ(step.fake_calls("--start-server").size(), 2u);
}

TEST(KilnCcSession, WhenNoLevelIsLeftToDropTheStepBuildsWithoutAServer) {
  Step step;
  Port webdav(true);
  step.write(step.state() / "refuse", "* Timed out waiting for server startup\n");
  Ran ran = step.run(
      "eval \"$($K session start)\"\n"
      "echo 'sccache bypass' >>\"$KILN_CC_SESSION/launches\"\n"
      "$K session stats\n$K session drain\n$K session stop",
      "SCCACHE_MULTILEVEL_CHAIN=disk,webdav\nSCCACHE_WEBDAV_ENDPOINT=" + webdav.url() + "\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.err.find("WARN: sccache would not start with level webdav"), std::string::npos)
      << ran.err;
  EXPECT_NE(ran.err.find("WARN: the sccache server did not start (sccache: Starting the "
                         "server... | sccache: error: Timed out waiting for server startup (exit "
                         "2)); the compiles of this step go to ccache or run uncached"),
            std::string::npos)
      << ran.err;
  EXPECT_EQ(step.fake_calls("--start-server").size(), 2u);
  cc::CompileStats s = stats_line(ran.out);
  EXPECT_EQ(s.compile_requests, 0);
  EXPECT_EQ(s.bypasses, 1);
  EXPECT_TRUE(step.fake_calls("--show-stats --stats-format json").empty()) << "no server to ask";
  EXPECT_NE(ran.err.find("drain: no sccache server is running"), std::string::npos) << ran.err;
  EXPECT_NE(ran.err.find("stop: no sccache server was started"), std::string::npos) << ran.err;
}

TEST(KilnCcSession, ProbeReportsEveryLevelAndHidesPasswords) {
  Step step;
  Port webdav(true);
  Port redis(false);
  Ran ran = step.run("$K session probe --budget-ms 1500",
                     "SCCACHE_MULTILEVEL_CHAIN=disk,webdav,redis,gcs\n"
                     "SCCACHE_WEBDAV_ENDPOINT=" +
                         webdav.url() +
                         "/cache/\n"
                         "SCCACHE_REDIS_ENDPOINT=redis://kiln:hunter2@127.0.0.1:" +
                         std::to_string(redis.port()) +
                         "/0\n"
                         "SCCACHE_GCS_BUCKET=b\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  auto lines = lines_of(ran.out);
  ASSERT_EQ(lines.size(), 4u) << ran.out;
  EXPECT_EQ(lines[0], "disk: local, not probed");
  EXPECT_EQ(lines[1].rfind("webdav: reachable: SCCACHE_WEBDAV_ENDPOINT=" + webdav.url() +
                               "/cache/ (TCP 127.0.0.1:" + std::to_string(webdav.port()) + " in ",
                           0),
            0u)
      << lines[1];
  EXPECT_EQ(lines[2], "redis: unreachable: SCCACHE_REDIS_ENDPOINT=redis://kiln:***@127.0.0.1:" +
                          std::to_string(redis.port()) +
                          "/0 (TCP 127.0.0.1:" + std::to_string(redis.port()) + " refused)");
  EXPECT_EQ(lines[3], "gcs: not probed: no endpoint variable");
  EXPECT_EQ(ran.err.find("hunter2"), std::string::npos);
  EXPECT_EQ(ran.out.find("hunter2"), std::string::npos);
}

TEST(KilnCcSession, AnEndpointThatIsNoUrlIsDropped) {
  Step step;
  Ran ran = step.run("$K session start --budget-ms 500",
                     "SCCACHE_WEBDAV_ENDPOINT=http://:5000/\nSCCACHE_MEMCACHED=tcp://[::1\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.err.find("WARN: sccache level memcached is unreachable: "
                         "SCCACHE_MEMCACHED=tcp://[::1 (not a URL with a host: tcp://[::1)"),
            std::string::npos)
      << ran.err;
  EXPECT_NE(ran.out.find("unset SCCACHE_MEMCACHED\n"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("unset SCCACHE_WEBDAV_ENDPOINT\n"), std::string::npos) << ran.out;
}

TEST(KilnCcSession, DrainWaitsUntilEverySlowerLevelHoldsWhatLevel0Wrote) {
  Step step;
  Port webdav(true);
  // What was there before the step (10 objects on both levels) is not the step's to wait for.
  step.stats(1, "compile_requests=10\nmisses=10\nlevels=\"disk:10:0 webdav:10:0\"\n");
  step.stats(2, "compile_requests=30\nmisses=30\nlevels=\"disk:30:0 webdav:15:0\"\n");
  step.stats(3, "compile_requests=30\nmisses=30\nlevels=\"disk:30:0 webdav:27:1\"\n");
  step.stats(4, "compile_requests=30\nmisses=30\nlevels=\"disk:30:0 webdav:29:1\"\n");
  Ran ran = step.run(
      "eval \"$($K session start)\"\n$K session drain",
      "SCCACHE_MULTILEVEL_CHAIN=disk,webdav\nSCCACHE_WEBDAV_ENDPOINT=" + webdav.url() + "\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.err.find("kiln-cc: drain: every upload done after 2 s (L1 (webdav): 19 written, "
                         "1 failed of 20)"),
            std::string::npos)
      << ran.err;
  EXPECT_EQ(step.fake_calls("--show-stats --stats-format json").size(), 4u)
      << "baseline, then three polls";
  for (const std::string& call : step.fake_calls("--show-stats --stats-format json")) {
    EXPECT_NE(call.find("uds=" + step.tmpdir().string()), std::string::npos) << call;
  }
}

TEST(KilnCcSession, DrainStopsWaitingWhenTheCountersStopMoving) {
  Step step;
  Port webdav(true);
  step.stats(1, "levels=\"disk:0:0 webdav:0:0\"\n");
  step.stats(2, "compile_requests=20\nmisses=20\nlevels=\"disk:20:0 webdav:5:0\"\n");
  Ran ran = step.run(
      "eval \"$($K session start)\"\n$K session drain --stable-polls 2",
      "SCCACHE_MULTILEVEL_CHAIN=disk,webdav\nSCCACHE_WEBDAV_ENDPOINT=" + webdav.url() + "\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.err.find("kiln-cc: WARN: drain: the counters stopped moving for 2 polls after 2 s: "
                         "15 uploads left (L1 (webdav): 5 written, 0 failed of 20); a later "
                         "build uploads them again"),
            std::string::npos)
      << ran.err;
}

TEST(KilnCcSession, DrainGivesUpAtTheTimeout) {
  Step step;
  Port webdav(true);
  step.stats(1, "levels=\"disk:0:0 webdav:0:0\"\n");
  step.stats(2, "levels=\"disk:20:0 webdav:1:0\"\n");
  step.stats(3, "levels=\"disk:20:0 webdav:2:0\"\n");
  step.stats(4, "levels=\"disk:20:0 webdav:3:0\"\n");
  step.stats(5, "levels=\"disk:20:0 webdav:4:0\"\n");
  Ran ran = step.run(
      "eval \"$($K session start)\"\n$K session drain --timeout-s 2",
      "SCCACHE_MULTILEVEL_CHAIN=disk,webdav\nSCCACHE_WEBDAV_ENDPOINT=" + webdav.url() + "\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.err.find("kiln-cc: WARN: drain: gave up after 2 s: 17 uploads left (L1 (webdav): "
                         "3 written, 0 failed of 20)"),
            std::string::npos)
      << ran.err;
  EXPECT_LT(ran.took, 6s);
}

TEST(KilnCcSession, DrainSkipsReadOnlyLevelsAndSingleLevelCaches) {
  Step step;
  Port webdav(true);
  step.stats(1, "levels=\"disk:0:0 webdav:0:0\"\n");
  step.stats(2, "levels=\"disk:20:0 webdav:0:0\"\n");
  Ran ran =
      step.run("eval \"$($K session start)\"\n$K session drain --timeout-s 5",
               "SCCACHE_MULTILEVEL_CHAIN=disk,webdav\nSCCACHE_WEBDAV_ENDPOINT=" + webdav.url() +
                   "\nSCCACHE_WEBDAV_RW_MODE=READ_ONLY\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.err.find("kiln-cc: drain: no slower cache level takes writes: nothing to drain"),
            std::string::npos)
      << ran.err;

  Step single;
  Ran alone = single.run("eval \"$($K session start)\"\n$K session drain");
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_NE(alone.err.find("kiln-cc: drain: no slower cache level: nothing to drain"),
            std::string::npos)
      << alone.err;
}

TEST(KilnCcSession, StatsAreTheStepsOwnAndCountBypasses) {
  Step step;
  step.stats(1, "compile_requests=100\nhits=60\nmisses=40\ncache_errors=1\n");
  step.stats(2, "compile_requests=130\nhits=80\nmisses=49\ncache_errors=2\nwrite_errors=1\n");
  Ran ran = step.run("eval \"$($K session start)\"\n"
                     "printf 'sccache ok\\nsccache bypass\\nccache ok\\nsccache bypass\\n"
                     "ccache failed\\ndirect ok\\n' >>\"$KILN_CC_SESSION/launches\"\n"
                     "$K session stats");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  cc::CompileStats s = stats_line(ran.out);
  EXPECT_EQ(s.compile_requests, 30 + 2) << "sccache's 30, and the 2 compiles ccache saw";
  EXPECT_EQ(s.hits, 20);
  EXPECT_EQ(s.misses, 9);
  EXPECT_EQ(s.errors, 2);
  EXPECT_EQ(s.bypasses, 2);
}

TEST(KilnCcSession, WithoutSccacheTheCompilesCcacheSawAreTheRequests) {
  Step step(false);
  Ran ran = step.run("eval \"$(PATH=/nonexistent $K session start)\"\n"
                     "printf 'ccache ok\\nccache ok\\nccache failed\\ndirect ok\\n' "
                     ">>\"$KILN_CC_SESSION/launches\"\n"
                     "$K session drain\n$K session stats\n$K session stop\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.err.find("WARN: no sccache on PATH: the compiles of this step go to ccache or "
                         "run uncached"),
            std::string::npos)
      << ran.err;
  cc::CompileStats s = stats_line(ran.out);
  EXPECT_EQ(s.compile_requests, 3);
  EXPECT_EQ(s.hits + s.misses + s.errors + s.bypasses, 0);
  EXPECT_NE(ran.err.find("drain: no sccache server is running in this session"), std::string::npos);
  EXPECT_NE(ran.err.find("stop: no sccache server was started in this session"), std::string::npos);
}

TEST(KilnCcSession, StopPrintsTheFinalStatsFailuresFirstAndWarnsOfUnfinishedUploads) {
  Step step;
  Port webdav(true);
  fs::path error_log = step.dir() / "sccache-error.log";
  step.write(error_log, "a failure of the previous step\n");
  step.stats(1, "levels=\"disk:0:0 webdav:0:0\"\n");
  step.stats(2,
             "compile_requests=20\nmisses=20\ncache_errors=3\nlevels=\"disk:20:0 webdav:12:2\"\n");
  Ran ran =
      step.run("eval \"$($K session start)\"\n"
               "test -s \"$SCCACHE_ERROR_LOG\" && echo 'the log was not truncated'\n"
               "printf 'a failure of this step\\n' >>\"$SCCACHE_ERROR_LOG\"\n"
               "$K session stop\n"
               "$K session stats",
               "SCCACHE_MULTILEVEL_CHAIN=disk,webdav\nSCCACHE_WEBDAV_ENDPOINT=" + webdav.url() +
                   "\nSCCACHE_ERROR_LOG=" + error_log.string() + "\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  cc::CompileStats s = stats_line(ran.out);
  EXPECT_EQ(s.compile_requests, 20) << "stats after stop reads what stop recorded";
  EXPECT_EQ(s.errors, 3);
  auto summary = ran.err.find("kiln-cc: sccache stats for this step (sccache 0.17.0):\n"
                              "  cache errors                3\n");
  EXPECT_NE(summary, std::string::npos) << ran.err;
  EXPECT_LT(ran.err.find("L1 (webdav) write failures  2"), ran.err.find("compile requests"))
      << ran.err;
  EXPECT_NE(ran.err.find("WARN: 6 uploads to slower levels are unfinished and die with the "
                         "server (L1 (webdav): 12 written, 2 failed of 20): run kiln-cc session "
                         "drain before stop"),
            std::string::npos)
      << ran.err;
  EXPECT_EQ(step.fake_calls("--stop-server").size(), 1u);
  EXPECT_NE(ran.err.find("lines of SCCACHE_ERROR_LOG=" + error_log.string() +
                         ":\n  a failure of this step\n"),
            std::string::npos)
      << ran.err;
  EXPECT_EQ(ran.err.find("previous step"), std::string::npos) << ran.err;
}

TEST(KilnCcSession, AnOldSccacheGetsAPrivatePortAndTheIgnoredChainIsNamed) {
  Step step;
  Ran ran = step.run("$K session start", "FAKE_SCCACHE_VERSION=0.9.0\n"
                                         "SCCACHE_MULTILEVEL_CHAIN=disk\n"
                                         "SCCACHE_SERVER_UDS=/tmp/every-step-shares-this.sock\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.err.find("WARN: SCCACHE_MULTILEVEL_CHAIN is set, but sccache 0.9.0 predates "
                         "multi-level caches (0.15.0) and ignores it"),
            std::string::npos)
      << ran.err;
  std::smatch match;
  std::regex port_line("unset SCCACHE_SERVER_UDS\nexport SCCACHE_SERVER_PORT=([0-9]+)\n");
  ASSERT_TRUE(std::regex_search(ran.out, match, port_line)) << ran.out;
  EXPECT_NE(match[1], "4226");
}

TEST(KilnCcSession, MisuseExitsTwoWithOneLine) {
  Step step;
  Ran ran = step.run("$K session frobnicate");
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_EQ(lines_of(ran.err).size(), 1u) << ran.err;
  EXPECT_EQ(ran.out, "");
  Ran no_session = step.run("$K session stats");
  EXPECT_EQ(no_session.exit_code, 2);
  EXPECT_NE(no_session.err.find("KILN_CC_SESSION is not set"), std::string::npos);
}

// ---- against Debian's sccache 0.4 --------------------------------------------------------

int exported_port(const std::string& exports) {
  std::smatch match;
  std::regex line("export SCCACHE_SERVER_PORT=([0-9]+)\n");
  if (!std::regex_search(exports, match, line)) {
    ADD_FAILURE() << "no SCCACHE_SERVER_PORT in:\n" << exports;
    return 0;
  }
  return std::stoi(match[1]);
}

constexpr const char* k_hello = "printf 'int main(void) { return 0; }\\n' >hello.c\n";

TEST(KilnCcSessionRealSccache, ServesTheStepOnAPrivatePortAndReportsItsNumbers) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  Step step(false);
  Ran start = step.run("cd " + quoted(step.dir().string()) + "\n$K session start");
  ASSERT_EQ(start.exit_code, 0) << start.err;
  int port = exported_port(start.out);
  step.stop_at_end("SCCACHE_SERVER_PORT=" + std::to_string(port));
  EXPECT_NE(port, 4226) << "the fixed default port is shared by every step on the host";
  EXPECT_LT(start.took, 10s) << "the server must not hold the exports' pipe open";
  EXPECT_TRUE(accepts_connections(port));
  EXPECT_NE(start.err.find("kiln-cc: sccache 0.4.0-pre.6 serves this step on "
                           "SCCACHE_SERVER_PORT=" +
                           std::to_string(port)),
            std::string::npos)
      << start.err;

  std::string session = start.out;
  Ran step_run = step.run(session + "cd " + quoted(step.dir().string()) + "\n" + k_hello +
                          "sccache cc -c hello.c -o hello.o\n"
                          "sccache cc -c hello.c -o hello.o\n"
                          "echo 'sccache bypass' >>\"$KILN_CC_SESSION/launches\"\n"
                          "$K session stats\n"
                          "$K session stop\n"
                          "$K session stats\n");
  ASSERT_EQ(step_run.exit_code, 0) << step_run.err;
  auto lines = lines_of(step_run.out);
  ASSERT_EQ(lines.size(), 2u) << step_run.out;
  std::string expected =
      "[kiln-cc:stats] {\"compile_requests\":2,\"hits\":1,\"misses\":1,\"errors\":0,"
      "\"bypasses\":1}";
  EXPECT_EQ(lines[0], expected);
  EXPECT_EQ(lines[1], expected) << "after stop, the numbers stop recorded";
  EXPECT_NE(step_run.err.find("kiln-cc: sccache stats for this step (sccache 0.4.0-pre.6):\n"
                              "  cache errors                0\n"),
            std::string::npos)
      << step_run.err;
  EXPECT_NE(step_run.err.find("  compile requests            2\n"), std::string::npos)
      << step_run.err;
  EXPECT_FALSE(accepts_connections(port)) << "stop leaves no server behind";
}

TEST(KilnCcSessionRealSccache, ConcurrentStepsNeverShareAServer) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  Step a(false);
  Step b(false);
  Ran start_a = a.run("$K session start");
  Ran start_b = b.run("$K session start");
  ASSERT_EQ(start_a.exit_code, 0) << start_a.err;
  ASSERT_EQ(start_b.exit_code, 0) << start_b.err;
  int port_a = exported_port(start_a.out);
  int port_b = exported_port(start_b.out);
  a.stop_at_end("SCCACHE_SERVER_PORT=" + std::to_string(port_a));
  b.stop_at_end("SCCACHE_SERVER_PORT=" + std::to_string(port_b));
  EXPECT_NE(port_a, port_b);
  Ran compiled = a.run(start_a.out + "cd " + quoted(a.dir().string()) + "\n" + k_hello +
                       "sccache cc -c hello.c -o hello.o\n$K session stats\n$K session stop");
  Ran idle = b.run(start_b.out + "$K session stats\n$K session stop");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  ASSERT_EQ(idle.exit_code, 0) << idle.err;
  EXPECT_EQ(stats_line(compiled.out).compile_requests, 1);
  EXPECT_EQ(stats_line(idle.out).compile_requests, 0) << "b's server never saw a's compile";
}

TEST(KilnCcSessionRealSccache, ALevelItWasBuiltWithoutIsDroppedAndTheServerStarts) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  // Debian builds sccache without S3: the server refuses "cache type is not enabled", naming
  // no level, so the slowest remote level goes.
  Step step(false);
  Port s3(true);
  Ran ran = step.run("$K session start", "SCCACHE_BUCKET=kiln\nSCCACHE_ENDPOINT=" + s3.url());
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  int port = exported_port(ran.out);
  step.stop_at_end("SCCACHE_SERVER_PORT=" + std::to_string(port));
  EXPECT_NE(ran.err.find("WARN: sccache would not start with level s3 (sccache: Starting the "
                         "server... | sccache: error: Server startup failed: cache type is not "
                         "enabled (exit 2)); dropped it"),
            std::string::npos)
      << ran.err;
  EXPECT_NE(ran.out.find("unset SCCACHE_BUCKET\nunset SCCACHE_ENDPOINT\n"), std::string::npos)
      << ran.out;
  EXPECT_TRUE(accepts_connections(port));
  Ran stop = step.run(ran.out + "$K session stop");
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_FALSE(accepts_connections(port));
}

} // namespace
} // namespace kiln::testing
