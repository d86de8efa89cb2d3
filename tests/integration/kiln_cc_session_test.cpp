// `kiln-cc session` as a build step's shell runs it: eval "$(kiln-cc session start)", the
// compiles, then drain, stats and stop; or all of it in `kiln-cc session run -- CMD`. Levels and
// the drain run against the fake sccache of tests/fixtures/fake-sccache, which prints the current
// upstream stats schema; the server address, the stats, stop, run and the session's lifetime
// run against Debian's real sccache 0.4 (and ccache) too, the lifetime and the fallback warning
// also inside a real buildah build. Every listener is on loopback; whatever a test leaves running
// in its step's name is killed when it ends.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compilecache/stats_line.h"
#include "kiln_harness.h"
#include "occurrences.h"
#include "util/loopback.h"
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

/// The processes on this host whose environment holds `entry` ("NAME=value"), as "pid
/// program" strings; `program` (a file name) narrows them to that program. Read from /proc:
/// a daemonised sccache has left every process group and session the test knows of.
std::vector<std::string> processes_carrying(const std::string& entry,
                                            const std::string& program = "") {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& proc : fs::directory_iterator("/proc", ec)) {
    std::string pid = proc.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::ifstream in(proc.path() / "environ", std::ios::binary);
    std::string environment((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (("\0" + environment).find("\0" + entry + '\0') == std::string::npos) {
      continue;
    }
    std::string exe = fs::read_symlink(proc.path() / "exe", ec).filename().string();
    if (program.empty() || exe == program) {
      found.push_back(pid + " " + exe);
    }
  }
  return found;
}

/// What still carries `entry` once up to a minute has passed: a generous bound, polled, so a
/// slow host passes and only a process that never ends fails.
std::vector<std::string> left_after_waiting(const std::string& entry,
                                            const std::string& program = "") {
  const auto deadline = Clock::now() + 60s;
  std::vector<std::string> left = processes_carrying(entry, program);
  while (!left.empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
    left = processes_carrying(entry, program);
  }
  return left;
}

/// Wait (bounded) until `path` exists.
bool appears(const fs::path& path) {
  const auto deadline = Clock::now() + 60s;
  while (!fs::exists(path) && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  return fs::exists(path);
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
    // Whatever a test left running in this step's name (its TMPDIR is unique) goes with it.
    for (const std::string& left : processes_carrying(tmpdir_entry())) {
      ::kill(std::stoi(left), SIGKILL);
    }
    fs::remove_all(m_dir);
  }
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;

  fs::path dir() const { return m_dir; }
  fs::path tmpdir() const { return m_dir / "it's tmp"; }
  fs::path state() const { return m_dir / "state"; }
  /// The environment entry every process of this step carries, and nothing else does.
  std::string tmpdir_entry() const { return "TMPDIR=" + tmpdir().string(); }

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
    auto start = Clock::now();
    std::string merged;
    ProcessExit exit = run_process({{"sh", "-c", whole_script(script, env)}, {}, {}},
                                   [&](std::string_view c) { merged += c; });
    Ran ran;
    ran.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    ran.exit_code = exit.status_code();
    ran.out = read_text(m_dir / "out.txt");
    ran.err = read_text(m_dir / "err.txt") + merged;
    return ran;
  }

  /// `script` as run() runs it, started in a process group of its own and not waited for, as
  /// a build step's shell that a test then interrupts or kills. Returns its pid (= its group).
  pid_t spawn(const std::string& script, const std::string& env = "") const {
    std::string whole = whole_script(script, env);
    std::vector<char*> argv = {const_cast<char*>("sh"), const_cast<char*>("-c"), whole.data(),
                               nullptr};
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    pid_t pid = -1;
    EXPECT_EQ(::posix_spawnp(&pid, "sh", nullptr, &attr, argv.data(), environ), 0);
    posix_spawnattr_destroy(&attr);
    return pid;
  }

  /// What a spawned script printed, once it has ended.
  Ran output() const { return {0, read_text(m_dir / "out.txt"), read_text(m_dir / "err.txt")}; }

  std::string whole_script(const std::string& script, const std::string& env) const {
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
    return prologue + "{\n" + script + "\n} >" + quoted(out.string()) + " 2>" +
           quoted(err.string()) + "\n";
  }

private:
  fs::path m_dir;
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
                         "export CCACHE_STATSLOG=" +
                         quoted((session / "ccache-stats.log").string()) +
                         "\n"
                         "export SCCACHE_MULTILEVEL_CHAIN=disk,webdav\n"
                         "unset SCCACHE_BUCKET\n"
                         "unset SCCACHE_ENDPOINT\n"
                         "export SCCACHE_IDLE_TIMEOUT=120\n"
                         "export SCCACHE_SERVER_UDS=" +
                         quoted((session / "sccache-0.sock").string()) + "\n");
  EXPECT_EQ(occurrences(ran.err, "WARN"), 1u) << ran.err;
  EXPECT_NE(ran.err.find("kiln-cc: WARN: sccache level s3 is unreachable: SCCACHE_ENDPOINT=" +
                         s3_url + " (TCP 127.0.0.1:" + std::to_string(s3.port()) + " refused)"),
            std::string::npos)
      << ran.err;

  auto starts = step.fake_calls("--start-server");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_NE(starts[0].find("uds=" + (session / "sccache-0.sock").string() +
                           " port= chain=disk,webdav idle=120 "),
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
  EXPECT_EQ(occurrences(ran.err, "WARN"), 1u) << ran.err;
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

/// Start a session in the shell that runs the rest of `script`, printing the exports first.
std::string in_session(const std::string& script) {
  return "exports=$($K session start)\nprintf '%s\\n' \"$exports\"\neval \"$exports\"\n" + script;
}

TEST(KilnCcSessionRealSccache, ServesTheStepOnAPrivatePortAndReportsItsNumbers) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  Step step(false);
  Ran ran = step.run("cd " + quoted(step.dir().string()) + "\n" + k_hello +
                     in_session("sccache cc -c hello.c -o hello.o\n"
                                "sccache cc -c hello.c -o hello.o\n"
                                "echo 'sccache bypass' >>\"$KILN_CC_SESSION/launches\"\n"
                                "$K session stats\n"
                                "$K session stop\n"
                                "$K session stats\n"));
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  int port = exported_port(ran.out);
  EXPECT_NE(port, 4226) << "the fixed default port is shared by every step on the host";
  EXPECT_NE(ran.err.find("kiln-cc: sccache 0.4.0-pre.6 serves this step on "
                         "SCCACHE_SERVER_PORT=" +
                         std::to_string(port)),
            std::string::npos)
      << ran.err;
  std::vector<std::string> stats;
  for (const std::string& line : lines_of(ran.out)) {
    if (line.starts_with(cc::k_stats_prefix)) {
      stats.push_back(line);
    }
  }
  ASSERT_EQ(stats.size(), 2u) << ran.out;
  std::string expected =
      "[kiln-cc:stats] {\"compile_requests\":2,\"hits\":1,\"misses\":1,\"errors\":0,"
      "\"bypasses\":1,\"sccache\":\"up\",\"served\":{\"sccache\":0,\"ccache\":0,\"direct\":1},"
      "\"ccache_hits\":0,\"ccache_misses\":0}";
  EXPECT_EQ(stats[0], expected);
  EXPECT_EQ(stats[1], expected) << "after stop, the numbers stop recorded";
  EXPECT_NE(ran.err.find("kiln-cc: sccache stats for this step (sccache 0.4.0-pre.6):\n"
                         "  cache errors                0\n"),
            std::string::npos)
      << ran.err;
  EXPECT_NE(ran.err.find("  compile requests            2\n"), std::string::npos) << ran.err;
  EXPECT_FALSE(loopback_accepts(port)) << "stop leaves no server behind";
  EXPECT_EQ(left_after_waiting(step.tmpdir_entry()), std::vector<std::string>{});
}

TEST(KilnCcSessionRealSccache, ConcurrentStepsNeverShareAServer) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  // Both sessions are up before either compiles: a shares the host with b's server.
  auto step_script = [](const Step& self, const Step& other, const std::string& work) {
    return "cd " + quoted(self.dir().string()) + "\n" + k_hello +
           in_session("touch started\nwhile [ ! -e " + quoted((other.dir() / "started").string()) +
                      " ]; do sleep 0.05; done\n" + work + "$K session stats\n$K session stop\n");
  };
  auto last_stats = [](const std::string& out) {
    auto lines = lines_of(out);
    return cc::parse_stats_line(lines.empty() ? "" : lines.back()).value_or(cc::CompileStats{});
  };
  // On a loaded CI host a's compile once went uncounted after a 10 s wait (sccache's client
  // gives up starting a server after 10 s): that says nothing about sharing, so such a round is
  // shown and run again, once. A fault of kiln's fails both.
  for (int round = 1;; ++round) {
    Step a(false);
    Step b(false);
    pid_t shell_a = a.spawn(step_script(a, b, "sccache cc -c hello.c -o hello.o\n"));
    pid_t shell_b = b.spawn(step_script(b, a, ""));
    int status_a = 0;
    int status_b = 0;
    ::waitpid(shell_a, &status_a, 0);
    ::waitpid(shell_b, &status_b, 0);
    Ran compiled = a.output();
    Ran idle = b.output();
    ASSERT_EQ(status_a, 0) << compiled.err;
    ASSERT_EQ(status_b, 0) << idle.err;
    EXPECT_NE(exported_port(compiled.out), exported_port(idle.out));
    EXPECT_EQ(last_stats(idle.out).compile_requests, 0) << "b's server never saw a's compile\n"
                                                        << idle.out << idle.err;
    if (last_stats(compiled.out).compile_requests != 1 && round == 1) {
      std::cout << "a's server did not count a's compile; once more. a printed:\n"
                << compiled.out << compiled.err;
      continue;
    }
    EXPECT_EQ(last_stats(compiled.out).compile_requests, 1) << compiled.out << compiled.err;
    break;
  }
}

TEST(KilnCcSessionRealSccache, ALevelItWasBuiltWithoutIsDroppedAndTheServerStarts) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  // Debian builds sccache without S3: the server refuses "cache type is not enabled", naming
  // no level, so the slowest remote level goes.
  Step step(false);
  Port s3(true);
  Ran ran = step.run("cd " + quoted(step.dir().string()) + "\n" + k_hello +
                         in_session("$K cc -c hello.c -o hello.o\n$K session stats\n"
                                    "$K session stop\n"),
                     "SCCACHE_BUCKET=kiln\nSCCACHE_ENDPOINT=" + s3.url());
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  int port = exported_port(ran.out);
  EXPECT_NE(ran.err.find("WARN: sccache would not start with level s3 (sccache: Starting the "
                         "server... | sccache: error: Server startup failed: cache type is not "
                         "enabled (exit 2)); dropped it"),
            std::string::npos)
      << ran.err;
  EXPECT_NE(ran.out.find("unset SCCACHE_BUCKET\nunset SCCACHE_ENDPOINT\n"), std::string::npos)
      << ran.out;
  auto lines = lines_of(ran.out);
  auto stats = cc::parse_stats_line(lines.empty() ? "" : lines.back());
  ASSERT_TRUE(stats) << ran.out;
  EXPECT_EQ(stats->compile_requests, 1) << "the server started without the level, and served";
  EXPECT_FALSE(loopback_accepts(port));
}

// ---- the session ends with its step, whatever happens (real sccache 0.4) -------------------

constexpr const char* k_broken = "printf 'int main(void) { return }\\n' >broken.c\n";

TEST(KilnCcSessionLifetime, AFailedCompileLeavesNoServerBehind) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  Step step(false);
  // The pattern a build step used: the stop after `&&` never runs once the compile fails.
  Ran ran = step.run("cd " + quoted(step.dir().string()) + "\n" + k_broken +
                     "eval \"$($K session start)\" && $K cc -c broken.c -o broken.o && "
                     "$K session stop");
  EXPECT_NE(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.err.find(" serves this step on "), std::string::npos) << ran.err;
  EXPECT_EQ(left_after_waiting(step.tmpdir_entry()), std::vector<std::string>{})
      << "still running after the step's shell exited";
}

/// A step's shell that started a session and then blocks, started in a group of its own; a
/// server of the session answers once this returns.
pid_t spawn_blocked_step(const Step& step) {
  pid_t shell = step.spawn("eval \"$($K session start)\"\n"
                           "touch " +
                           quoted((step.dir() / "started").string()) + "\nsleep 600\n");
  EXPECT_TRUE(appears(step.dir() / "started")) << step.output().err;
  EXPECT_EQ(processes_carrying(step.tmpdir_entry(), "sccache").size(), 1u) << step.output().err;
  return shell;
}

TEST(KilnCcSessionLifetime, CtrlCOfTheStepsShellLeavesNoServerBehind) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  Step step(false);
  pid_t shell = spawn_blocked_step(step);
  ::kill(-shell, SIGINT); // as a terminal's Ctrl-C: the whole foreground group
  int status = 0;
  ::waitpid(shell, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  EXPECT_EQ(left_after_waiting(step.tmpdir_entry()), std::vector<std::string>{});
}

TEST(KilnCcSessionLifetime, SigkillOfTheStepsShellLeavesNoServerBehind) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  Step step(false);
  pid_t shell = spawn_blocked_step(step);
  ::kill(-shell, SIGKILL);
  ::waitpid(shell, nullptr, 0);
  EXPECT_EQ(left_after_waiting(step.tmpdir_entry()), std::vector<std::string>{});
}

TEST(KilnCcSessionLifetime, AStartInASubshellBelongsToTheShellAroundIt) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  Step step(false);
  // `; :` keeps the subshell of $(...) from exec'ing kiln-cc: its parent is a subshell that
  // ends right after, while the session belongs to the shell that goes on compiling.
  Ran ran = step.run("cd " + quoted(step.dir().string()) + "\n" + k_hello +
                     "eval \"$($K session start; :)\"\n"
                     "sleep 1\n"
                     "$K cc -c hello.c -o hello.o\n"
                     "$K session stats\n$K session stop\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  auto stats = cc::parse_stats_line(ran.out);
  ASSERT_TRUE(stats) << ran.out;
  EXPECT_EQ(stats->sccache, cc::SccacheServer::up) << ran.out << ran.err;
  EXPECT_EQ(stats->via_sccache, 1) << ran.out;
}

TEST(KilnCcSessionLifetime, TheWatchdogKeepsAnIdleServerAliveWhileTheShellLives) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  Step step(false);
  // A link that takes longer than the idle timeout, then one more compile.
  Ran ran = step.run("cd " + quoted(step.dir().string()) + "\n" + k_hello +
                         "eval \"$($K session start)\"\n"
                         "sleep 9\n"
                         "$K cc -c hello.c -o hello.o\n"
                         "$K session stats\n$K session stop\n",
                     "SCCACHE_IDLE_TIMEOUT=4\n");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  auto stats = cc::parse_stats_line(ran.out);
  ASSERT_TRUE(stats) << ran.out;
  EXPECT_EQ(stats->sccache, cc::SccacheServer::up) << ran.out << ran.err;
  EXPECT_EQ(stats->via_sccache, 1) << ran.out;
}

TEST(KilnCcSessionLifetime, AServerWhoseWatchdogIsKilledStillIdlesOut) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  Step step(false);
  pid_t shell = step.spawn("eval \"$($K session start)\"\ntouch " +
                               quoted((step.dir() / "started").string()) + "\nsleep 600\n",
                           "SCCACHE_IDLE_TIMEOUT=2\n");
  ASSERT_TRUE(appears(step.dir() / "started")) << step.output().err;
  // `session start` may still be on its way out when the shell goes on: wait for the watchdog
  // to be the one kiln-cc left.
  auto watchdogs = processes_carrying(step.tmpdir_entry(), "kiln-cc");
  for (auto deadline = Clock::now() + 10s; watchdogs.size() != 1 && Clock::now() < deadline;
       watchdogs = processes_carrying(step.tmpdir_entry(), "kiln-cc")) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(watchdogs.size(), 1u);
  ::kill(std::stoi(watchdogs[0]), SIGKILL);
  EXPECT_EQ(left_after_waiting(step.tmpdir_entry(), "sccache"), std::vector<std::string>{})
      << "the step's shell still runs, and nothing keeps the server alive";
  ::kill(-shell, SIGKILL);
  ::waitpid(shell, nullptr, 0);
}

// ---- session run -----------------------------------------------------------------------------

TEST(KilnCcSessionRun, RunsTheCommandInTheSessionAndPassesItsFailureThrough) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  Step step(false);
  Ran ran = step.run("cd " + quoted(step.dir().string()) + "\n" + k_hello + k_broken +
                     "$K session run -- sh -c '\n"
                     "  echo \"session=${KILN_CC_SESSION:+set} port=${SCCACHE_SERVER_PORT:+set}\"\n"
                     "  $0 cc -c hello.c -o hello.o && $0 cc -c broken.c -o broken.o' $K\n"
                     "echo \"exit $?\"");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  auto lines = lines_of(ran.out);
  ASSERT_EQ(lines.size(), 3u) << ran.out << ran.err;
  EXPECT_EQ(lines[0], "session=set port=set");
  auto stats = cc::parse_stats_line(lines[1]);
  ASSERT_TRUE(stats.has_value()) << lines[1];
  EXPECT_EQ(stats->compile_requests, 2);
  EXPECT_EQ(stats->misses, 1);
  EXPECT_EQ(stats->errors, 0) << "a compile error is the compiler's, not the cache's";
  EXPECT_EQ(stats->via_sccache, 2);
  EXPECT_EQ(lines[2], "exit 1") << "the compiler's exit code";
  EXPECT_NE(ran.err.find("kiln-cc: sccache stats for this step"), std::string::npos) << ran.err;
  EXPECT_EQ(left_after_waiting(step.tmpdir_entry()), std::vector<std::string>{});
  EXPECT_TRUE(fs::is_empty(step.tmpdir())) << "the session folder goes with the command";
}

TEST(KilnCcSessionRun, ACommandKilledBySignalKillsRunWithTheSameSignal) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  Step step(false);
  Ran ran = step.run("$K session run -- sh -c 'kill -TERM $$'\n"
                     "echo \"status $?\"");
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  auto lines = lines_of(ran.out);
  ASSERT_EQ(lines.size(), 2u) << ran.out << ran.err;
  EXPECT_TRUE(cc::parse_stats_line(lines[0]).has_value()) << lines[0];
  EXPECT_EQ(lines[1], "status " + std::to_string(128 + SIGTERM));
  EXPECT_EQ(left_after_waiting(step.tmpdir_entry()), std::vector<std::string>{});
}

TEST(KilnCcSessionRun, SigtermToRunReachesTheCommandAndTheSessionStillEnds) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  Step step(false);
  std::string started = quoted((step.dir() / "started").string());
  // `exec` makes run the group leader the test signals, alone: a build tool's `timeout` or a
  // supervisor signals one process, not its group.
  pid_t run = step.spawn("exec $K session run -- sh -c '\n"
                         "  trap \"echo command got TERM; exit 3\" TERM\n"
                         "  touch " +
                         started + "; sleep 600 & wait'\n");
  ASSERT_TRUE(appears(step.dir() / "started")) << step.output().err;
  ::kill(run, SIGTERM);
  int status = 0;
  ::waitpid(run, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 3) << step.output().err;
  Ran ran = step.output();
  auto lines = lines_of(ran.out);
  ASSERT_EQ(lines.size(), 2u) << ran.out << ran.err;
  EXPECT_EQ(lines[0], "command got TERM");
  EXPECT_TRUE(cc::parse_stats_line(lines[1]).has_value()) << lines[1];
  EXPECT_NE(ran.err.find("not waiting for uploads"), std::string::npos) << ran.err;
  ::kill(-run, SIGKILL); // the command's `sleep`
  EXPECT_EQ(left_after_waiting(step.tmpdir_entry()), std::vector<std::string>{});
}

TEST(KilnCcSessionRun, SigkillOfRunItselfLeavesNoServerBehind) {
  if (!fs::exists("/usr/bin/sccache")) {
    GTEST_SKIP() << "no sccache installed";
  }
  Step step(false);
  pid_t run = step.spawn("exec $K session run -- sh -c 'touch " +
                         quoted((step.dir() / "started").string()) + "; sleep 600'\n");
  ASSERT_TRUE(appears(step.dir() / "started")) << step.output().err;
  ASSERT_EQ(processes_carrying(step.tmpdir_entry(), "sccache").size(), 1u);
  ::kill(run, SIGKILL);
  ::waitpid(run, nullptr, 0);
  EXPECT_EQ(left_after_waiting(step.tmpdir_entry(), "sccache"), std::vector<std::string>{});
  ::kill(-run, SIGKILL);
}

TEST(KilnCcSessionRun, MisuseExitsTwo) {
  Step step;
  for (const char* args : {"run", "run --", "run make", "run --timeout-s x -- true"}) {
    Ran ran = step.run(std::string("$K session ") + args);
    EXPECT_EQ(ran.exit_code, 2) << args << ": " << ran.err;
    EXPECT_EQ(lines_of(ran.err).size(), 1u) << ran.err;
  }
}

// ---- a dead compile cache is reported -----------------------------------------------------

TEST(KilnCcSessionRealSccache, AServerLostMidStepIsReportedWithTheLevelThatServed) {
  if (!fs::exists("/usr/bin/sccache") || !fs::exists("/usr/bin/ccache")) {
    GTEST_SKIP() << "no sccache or ccache installed";
  }
  Step step(false);
  std::string go = quoted((step.dir() / "go").string());
  pid_t shell = step.spawn("cd " + quoted(step.dir().string()) + "\n" + k_hello +
                               "eval \"$($K session start)\"\n"
                               "$K cc -c hello.c -o first.o\n"
                               "touch compiled\n"
                               "while [ ! -e " +
                               go +
                               " ]; do sleep 0.05; done\n"
                               "$K cc -c hello.c -o second.o\n"
                               "$K cc -c hello.c -o third.o\n"
                               "$K session stats\n"
                               "$K session stop\n"
                               "$K session stats\n",
                           "CCACHE_DIR=" + (step.dir() / "ccache").string() + "\n");
  ASSERT_TRUE(appears(step.dir() / "compiled")) << step.output().err;
  auto servers = processes_carrying(step.tmpdir_entry(), "sccache");
  ASSERT_EQ(servers.size(), 1u);
  ::kill(std::stoi(servers[0]), SIGKILL);
  EXPECT_EQ(left_after_waiting(step.tmpdir_entry(), "sccache"), std::vector<std::string>{});
  step.write(step.dir() / "go", "");
  int status = 0;
  ::waitpid(shell, &status, 0);
  Ran ran = step.output();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ran.err;
  auto lines = lines_of(ran.out);
  ASSERT_EQ(lines.size(), 2u) << ran.out << ran.err;
  EXPECT_EQ(lines[0], lines[1]) << "stop records what stats saw";
  // The line as kiln reads it: which level served, and ccache's own hits and misses.
  ASSERT_EQ(lines[0].rfind(cc::k_stats_prefix, 0), 0u) << lines[0];
  auto stats = nlohmann::json::parse(lines[0].substr(cc::k_stats_prefix.size()));
  EXPECT_EQ(stats["sccache"], "lost") << lines[0];
  EXPECT_EQ(stats["served"], (nlohmann::json{{"sccache", 1}, {"ccache", 2}, {"direct", 0}}))
      << lines[0];
  EXPECT_EQ(stats["ccache_misses"], 1) << lines[0];
  EXPECT_EQ(stats["ccache_hits"], 1) << lines[0];
  EXPECT_EQ(stats["compile_requests"], 2) << "sccache's counters died with it; ccache's 2 count";
  EXPECT_EQ(stats["hits"], 1) << lines[0];
  EXPECT_EQ(stats["misses"], 1) << lines[0];
  EXPECT_NE(ran.err.find("WARN: the sccache server of this step is gone"), std::string::npos)
      << ran.err;
  EXPECT_EQ(left_after_waiting(step.tmpdir_entry()), std::vector<std::string>{});
}

// ---- in a real build: buildah, chroot isolation, kiln reading the stats line ------------------

/// A chain whose `compile` stage runs `script` in a RUN with kiln-cc mounted and the host's
/// toolchain (gcc, sccache, ccache) bind-mounted at /usr. Every process of the step carries
/// KILN_CC_TEST=<nonce> in its environment.
void write_build_chain(const ChainDir& dir, const std::string& script) {
  dir.write("base.Dockerfile", std::string(k_base_dockerfile) +
                                   "RUN ln -s usr/lib /lib && ln -s usr/lib64 /lib64 && "
                                   "mkdir -p /src /tmp\n");
  dir.write("compile.Dockerfile",
            "FROM base\n"
            "RUN --mount=type=bind,source=usr,target=/usr \\\n"
            "    --mount=type=bind,from=kiln-tools,source=kiln-cc,target=/kiln/kiln-cc \\\n"
            "    export PATH=/kiln:/usr/bin:/bin SCCACHE_DIR=/tmp/sccache CCACHE_DIR=/tmp/ccache "
            "KILN_CC_TEST=" +
                dir.nonce() +
                " && \\\n"
                "    printf 'int f(void) { return " +
                dir.nonce() + "; }\\n' > /src/f.c && \\\n    " + script + "\n");
  dir.write("chain.toml", "[chain]\nname = \"cc" + dir.nonce() +
                              "\"\n[defaults]\ncooldown_s = 0\nattempts = 1\n"
                              "[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n"
                              "[[stage]]\nname = \"compile\"\ndockerfile = \"compile.Dockerfile\"\n"
                              "context = \"/\"\nneeds = [\"base\"]\n");
}

TEST(KilnCcInABuild, AFailedCompileLeavesNoServerOnTheHost) {
  ChainDir dir;
  // The pattern the docs showed: under chroot isolation the RUN's processes are the host's, and
  // the server the failed step never stopped ran on with parent 1.
  write_build_chain(dir, "eval \"$(kiln-cc session start)\" && \\\n"
                         "    printf 'int main(void) { return }\\n' > /src/broken.c && \\\n"
                         "    kiln-cc gcc -c /src/broken.c -o /src/broken.o && \\\n"
                         "    kiln-cc session stop");
  KilnResult result = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(dir.read("records/latest/stages/compile.attempt-1.log").find(" serves this step on "),
            std::string::npos)
      << "no server was started";
  EXPECT_EQ(left_after_waiting("KILN_CC_TEST=" + dir.nonce()), std::vector<std::string>{});
}

TEST(KilnCcInABuild, ASccacheServerLostMidStepIsWarnedOfAndRecorded) {
  ChainDir dir;
  write_build_chain(dir,
                    "kiln-cc session run -- sh -c '\\\n"
                    "      kiln-cc gcc -c /src/f.c -o /src/f.o && sccache --stop-server && \\\n"
                    "      kiln-cc gcc -c /src/f.c -o /src/g.o && \\\n"
                    "      kiln-cc gcc -c /src/f.c -o /src/h.o'");
  KilnResult result = dir.kiln({"run", "chain.toml"});
  ASSERT_EQ(result.exit_code, 0) << result.output
                                 << dir.read("records/latest/stages/compile.attempt-1.log");
  const std::string warning = "the compile cache fell back: the sccache server was lost mid-step "
                              "in 1 of 1 step(s), its counters with it; of 3 compile(s) kiln-cc "
                              "launched, 1 went to sccache, 2 to ccache (1 hit(s), 1 miss(es)), 0 "
                              "ran uncached";
  EXPECT_NE(result.output.find("kiln: warning: stage compile: " + warning), std::string::npos)
      << result.output;
  EXPECT_NE(
      dir.read("records/latest/driver.log").find("stage compile: attempt 1/1 warning: " + warning),
      std::string::npos)
      << dir.read("records/latest/driver.log");
  nlohmann::json compile = dir.latest_manifest()["stages"][1]["attempts"][0]["compile"];
  ASSERT_TRUE(compile.is_object()) << dir.latest_manifest().dump(2);
  EXPECT_EQ(compile["served"], (nlohmann::json{{"sccache", 1}, {"ccache", 2}, {"direct", 0}}));
  EXPECT_EQ(compile["ccache_hits"], 1);
  EXPECT_EQ(compile["ccache_misses"], 1);
  EXPECT_EQ(compile["sccache_lost_steps"], 1);
  EXPECT_EQ(left_after_waiting("KILN_CC_TEST=" + dir.nonce()), std::vector<std::string>{});
}

} // namespace
} // namespace kiln::testing
