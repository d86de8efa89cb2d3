// kiln-cc as a compile launcher against the real tools: Debian's sccache 0.4 and ccache 4.7
// with gcc. Every test has its own sccache port, cache folders and session folder, and stops
// any sccache server on its port when it ends.
#include <algorithm>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

// kiln-cc is built next to kiln.
const fs::path k_kiln_cc = fs::path(KILN_BINARY).parent_path() / "kiln-cc";

struct Ran {
  std::string out;
  std::string err;
  int exit_code = -1;  // when it exited
  int term_signal = 0; // when a signal killed it
};

struct RunSpec {
  std::vector<std::string> argv; // argv[0] an absolute path
  std::vector<std::string> env;  // the whole environment
  fs::path cwd;
  bool remove_cwd = false; // delete cwd after entering it, as CMake's TryCompile does
};

Ran execute(const RunSpec& spec) {
  int out_pipe[2];
  int err_pipe[2];
  EXPECT_EQ(::pipe2(out_pipe, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(err_pipe, O_CLOEXEC), 0);
  std::vector<char*> argv;
  for (const auto& a : spec.argv) {
    argv.push_back(const_cast<char*>(a.c_str()));
  }
  argv.push_back(nullptr);
  std::vector<char*> env;
  for (const auto& e : spec.env) {
    env.push_back(const_cast<char*>(e.c_str()));
  }
  env.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, STDIN_FILENO);
    if (::chdir(spec.cwd.c_str()) != 0 || (spec.remove_cwd && ::rmdir(spec.cwd.c_str()) != 0)) {
      ::_exit(121);
    }
    ::execve(argv[0], argv.data(), env.data());
    ::_exit(122);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  Ran result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  char buffer[65536];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    if (::poll(fds, 2, -1) < 0) {
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0 && fds[i].revents != 0) {
        ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
        if (n > 0) {
          (i == 0 ? result.out : result.err).append(buffer, static_cast<size_t>(n));
        } else {
          ::close(fds[i].fd);
          fds[i].fd = -1;
        }
      }
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  } else {
    result.exit_code = WEXITSTATUS(status);
  }
  return result;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& text, bool executable = false) {
  std::ofstream(path, std::ios::binary) << text;
  if (executable) {
    fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  }
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

bool port_accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool accepts = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return accepts;
}

// The compiler as the build sees it: logs every invocation, then runs gcc. Marker files make
// it misbehave: kill the sccache server that runs it (once), die of SIGKILL, exit 254, or
// hang.
const char* k_compiler_script = R"(#!/bin/sh
dir='@DIR@'
echo "$*" >> "$dir/compiler.log"
read -r parent < /proc/$PPID/comm
if [ -e "$dir/kill-server" ] && [ "$parent" = sccache ]; then
  rm -f "$dir/kill-server"
  kill -9 "$PPID"
fi
case " $* " in
  *" -E "*) ;;
  *" -c "*)
    if [ -e "$dir/die" ]; then echo "about to die" >&2; kill -9 $$; fi
    if [ -e "$dir/exit-254" ]; then echo "gcc: failing on purpose" >&2; exit 254; fi
    if [ -e "$dir/slow" ]; then echo $$ > "$dir/started"; exec /bin/sleep 60; fi ;;
esac
exec /usr/bin/gcc "$@"
)";

class KilnCc : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(k_kiln_cc)) << k_kiln_cc;
    std::string pattern = (fs::temp_directory_path() / "kiln-cc-test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    m_dir = pattern;
    m_port = free_port();
    for (const char* sub : {"bin", "session", "src", "out", "tools"}) {
      fs::create_directories(m_dir / sub);
    }
    std::string script = k_compiler_script;
    script.replace(script.find("@DIR@"), 5, m_dir.string());
    write_file(m_dir / "bin" / "gcc", script, true);
    // sccache as kiln-cc finds it on PATH: logs that it ran, then is the real one.
    fs::create_directories(m_dir / "sccache-bin");
    write_file(m_dir / "sccache-bin" / "sccache",
               "#!/bin/sh\necho \"$*\" >> '" + (m_dir / "sccache.log").string() +
                   "'\nexec /usr/bin/sccache \"$@\"\n",
               true);
    // gcc needs `as` from PATH; the tests that take /usr/bin off PATH get it from tools/.
    fs::create_symlink("/usr/bin/as", m_dir / "tools" / "as");
    write_file(m_dir / "src" / "x.c", "int add(int a, int b) { return a + b; }\n");
    write_file(m_dir / "src" / "err.c", "int f(void) { return undeclared_thing; }\n");
    set_path(m_dir / "bin", standard_path());
  }

  /// sccache (through its logging shim), ccache and the rest of the system.
  std::string standard_path() const { return (m_dir / "sccache-bin").string() + ":/usr/bin:/bin"; }

  void TearDown() override {
    // Whatever a test did to it, no server outlives the test on its port.
    execute({{"/usr/bin/sccache", "--stop-server"}, m_env, m_dir});
    std::error_code ec;
    fs::remove_all(m_dir, ec);
  }

  /// PATH is the compiler's folder, then `rest`.
  void set_path(const fs::path& first, const std::string& rest) {
    m_env = {"PATH=" + first.string() + ":" + rest,
             "HOME=" + m_dir.string(),
             "LC_ALL=C",
             "SCCACHE_DIR=" + (m_dir / "sccache").string(),
             "SCCACHE_SERVER_PORT=" + std::to_string(m_port),
             "SCCACHE_IDLE_TIMEOUT=120",
             "CCACHE_DIR=" + (m_dir / "ccache").string(),
             "KILN_CC_SESSION=" + (m_dir / "session").string()};
  }

  /// A PATH folder holding only the given tools (gcc's `as` always).
  std::string tools_path(const std::vector<std::string>& tools) {
    for (const auto& tool : tools) {
      fs::create_symlink("/usr/bin/" + tool, m_dir / "tools" / tool);
    }
    return (m_dir / "tools").string();
  }

  void start_server() {
    Ran started = execute({{"/usr/bin/sccache", "--start-server"}, m_env, m_dir});
    ASSERT_EQ(started.exit_code, 0) << started.out << started.err;
  }

  nlohmann::json sccache_stats() {
    Ran stats =
        execute({{"/usr/bin/sccache", "--show-stats", "--stats-format", "json"}, m_env, m_dir});
    EXPECT_EQ(stats.exit_code, 0) << stats.err;
    return nlohmann::json::parse(stats.out)["stats"];
  }

  long ccache_stat(const std::string& name) {
    Ran stats = execute({{"/usr/bin/ccache", "--print-stats"}, m_env, m_dir});
    std::istringstream lines(stats.out);
    std::string key;
    long value = 0;
    while (lines >> key >> value) {
      if (key == name) {
        return value;
      }
    }
    return -1;
  }

  /// `kiln-cc args...` from src/, with `extra` added to the environment.
  Ran kiln_cc(const std::vector<std::string>& args, const std::vector<std::string>& extra = {},
              bool remove_cwd = false, const fs::path& cwd = {}) {
    std::vector<std::string> argv = {k_kiln_cc.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return execute({argv, with_env(extra), cwd.empty() ? m_dir / "src" : cwd, remove_cwd});
  }

  /// The compiler itself, the way the build would run it without kiln-cc.
  Ran compiler(const std::vector<std::string>& args, bool remove_cwd = false,
               const fs::path& cwd = {}) {
    std::vector<std::string> argv = {(m_dir / "bin" / "gcc").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return execute({argv, m_env, cwd.empty() ? m_dir / "src" : cwd, remove_cwd});
  }

  /// How often the compiler compiled: invocations with -c and without -E (the caches also run
  /// it to preprocess and to identify it).
  int compiles() {
    std::istringstream log(read_file(m_dir / "compiler.log"));
    int count = 0;
    for (std::string line; std::getline(log, line);) {
      std::istringstream words(line);
      std::vector<std::string> args{std::istream_iterator<std::string>(words), {}};
      bool c = std::find(args.begin(), args.end(), "-c") != args.end();
      bool e = std::find(args.begin(), args.end(), "-E") != args.end();
      count += c && !e ? 1 : 0;
    }
    return count;
  }

  /// The test's environment with `extra` entries replacing those of the same name.
  std::vector<std::string> with_env(const std::vector<std::string>& extra) {
    std::vector<std::string> env;
    for (const auto& entry : m_env) {
      std::string name = entry.substr(0, entry.find('=') + 1);
      if (std::none_of(extra.begin(), extra.end(),
                       [&](const std::string& e) { return e.starts_with(name); })) {
        env.push_back(entry);
      }
    }
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  void reset_compiler_log() { fs::remove(m_dir / "compiler.log"); }
  void mark(const std::string& name) { write_file(m_dir / name, ""); }
  std::string launches() { return read_file(m_dir / "session" / "launches"); }
  /// How often kiln-cc ran sccache.
  long sccache_runs() {
    std::string log = read_file(m_dir / "sccache.log");
    return std::count(log.begin(), log.end(), '\n');
  }
  fs::path out(const std::string& name) { return m_dir / "out" / name; }

  fs::path m_dir;
  int m_port = 0;
  std::vector<std::string> m_env;
};

// ---- sccache -----------------------------------------------------------------------------------

TEST_F(KilnCc, SccacheMissThenHit) {
  start_server();
  for (int i = 0; i < 2; ++i) {
    Ran r = kiln_cc({"gcc", "-c", "x.c", "-o", out("x.o")});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "");
  }
  EXPECT_TRUE(fs::exists(out("x.o")));
  nlohmann::json stats = sccache_stats();
  EXPECT_EQ(stats["compile_requests"], 2);
  EXPECT_EQ(stats["cache_misses"]["counts"]["C/C++"], 1);
  EXPECT_EQ(stats["cache_hits"]["counts"]["C/C++"], 1);
  EXPECT_EQ(compiles(), 1) << "the hit ran no compiler";
  EXPECT_EQ(sccache_runs(), 2);
  EXPECT_EQ(launches(), "sccache ok\nsccache ok\n");
}

TEST_F(KilnCc, SccacheCompileErrorPassesThroughUntouchedAndIsNotRerun) {
  Ran direct = compiler({"-c", "err.c", "-o", out("err.o")});
  ASSERT_EQ(direct.exit_code, 1);
  ASSERT_NE(direct.err.find("undeclared_thing"), std::string::npos);
  start_server();
  reset_compiler_log();
  Ran r = kiln_cc({"gcc", "-c", "err.c", "-o", out("err.o")});
  EXPECT_EQ(r.exit_code, direct.exit_code);
  EXPECT_EQ(r.out, direct.out);
  EXPECT_EQ(r.err, direct.err);
  EXPECT_EQ(compiles(), 1);
  EXPECT_EQ(launches(), "sccache failed\n");
  EXPECT_EQ(sccache_stats()["compile_fails"], 1);
}

TEST_F(KilnCc, CompilerExitingWithSccachesOwnCodeIsStillTheCompilers) {
  // 254 is also what sccache exits with for its fatal errors: the text decides, not the code.
  start_server();
  mark("exit-254");
  Ran r = kiln_cc({"gcc", "-c", "x.c", "-o", out("x.o")});
  EXPECT_EQ(r.exit_code, 254);
  EXPECT_EQ(r.err, "gcc: failing on purpose\n");
  EXPECT_EQ(compiles(), 1);
  EXPECT_EQ(launches(), "sccache failed\n");
}

TEST_F(KilnCc, WarningFloodPassesThroughUntouchedOnMissAndHit) {
  // About 600 kB of warnings, ten times what kiln-cc holds back: it streams them.
  std::string source;
  for (int i = 0; i < 1500; ++i) {
    source += "int f" + std::to_string(i) + "(void) { int unused_a, unused_b; return 0; }\n";
  }
  write_file(m_dir / "src" / "flood.c", source);
  std::vector<std::string> args = {"-Wall", "-c", "flood.c", "-o", out("flood.o")};
  Ran direct = compiler(args);
  ASSERT_EQ(direct.exit_code, 0);
  ASSERT_GT(direct.err.size(), 500000u);
  start_server();
  std::vector<std::string> launched = {"gcc"};
  launched.insert(launched.end(), args.begin(), args.end());
  for (const char* pass : {"miss", "hit"}) {
    Ran r = kiln_cc(launched);
    EXPECT_EQ(r.exit_code, 0) << pass;
    EXPECT_EQ(r.out, direct.out) << pass;
    EXPECT_TRUE(r.err == direct.err)
        << pass << ": " << r.err.size() << " bytes against " << direct.err.size();
  }
  EXPECT_EQ(sccache_stats()["cache_hits"]["counts"]["C/C++"], 1);
}

TEST_F(KilnCc, ServerKilledBeforeTheCompileStartsMeansADirectCompile) {
  start_server();
  // The server dies while it identifies the compiler, the first thing it runs.
  mark("kill-server");
  Ran r = kiln_cc({"gcc", "-c", "x.c", "-o", out("x.o")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "") << "sccache's own error is dropped";
  EXPECT_TRUE(fs::exists(out("x.o")));
  EXPECT_FALSE(fs::exists(m_dir / "kill-server")) << "the server was killed";
  EXPECT_EQ(compiles(), 1);
  EXPECT_EQ(launches(), "sccache bypass\n");
  EXPECT_FALSE(port_accepts(m_port)) << "nothing restarted a server";
}

TEST_F(KilnCc, ServerKilledDuringTheCompileIsNotCompiledTwice) {
  Ran direct = compiler({"-c", "err.c", "-o", out("err.o")});
  start_server();
  Ran first = kiln_cc({"gcc", "-c", "x.c", "-o", out("x.o")});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // Now the server knows the compiler and dies preprocessing: sccache compiles it itself.
  mark("kill-server");
  reset_compiler_log();
  Ran r = kiln_cc({"gcc", "-c", "err.c", "-o", out("err.o")});
  EXPECT_FALSE(fs::exists(m_dir / "kill-server")) << "the server was killed";
  EXPECT_EQ(r.exit_code, direct.exit_code);
  EXPECT_EQ(r.out, direct.out);
  EXPECT_EQ(r.err, direct.err) << "only sccache's warning is dropped";
  EXPECT_EQ(compiles(), 1);
  EXPECT_EQ(launches(), "sccache ok\nsccache bypass\n");
}

TEST_F(KilnCc, DeletedWorkingDirectoryMeansADirectCompile) {
  fs::path scratch = m_dir / "TryCompile-1234";
  std::vector<std::string> args = {"-c", (m_dir / "src" / "x.c").string(), "-o", out("x.o")};
  fs::create_directories(scratch);
  Ran direct = compiler(args, true, scratch);
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  fs::remove(out("x.o"));
  start_server();
  reset_compiler_log();
  fs::create_directories(scratch);
  args.insert(args.begin(), "gcc");
  Ran r = kiln_cc(args, {}, true, scratch);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, direct.out);
  EXPECT_EQ(r.err, direct.err) << "what the compiler says there (its shell complains)";
  EXPECT_TRUE(fs::exists(out("x.o")));
  EXPECT_EQ(compiles(), 1);
  EXPECT_EQ(launches(), "sccache bypass\n");
  EXPECT_EQ(sccache_runs(), 0) << "never handed to sccache";
}

TEST_F(KilnCc, ServerFatalErrorMeansADirectCompile) {
  // The compile's working directory exists only in its own mount namespace, so the server
  // cannot spawn the preprocessor there: "sccache: encountered fatal error", exit 254.
  if (execute({{"/usr/bin/unshare", "-m", "/bin/true"}, m_env, m_dir}).exit_code != 0) {
    GTEST_SKIP() << "no mount namespaces here (needs root)";
  }
  start_server();
  fs::create_directories(m_dir / "private");
  std::string script = "mount -t tmpfs tmpfs '" + (m_dir / "private").string() + "' && cd '" +
                       (m_dir / "private").string() + "' && mkdir w && cd w && cp '" +
                       (m_dir / "src" / "x.c").string() + "' . && exec '" + k_kiln_cc.string() +
                       "' gcc -c x.c -o '" + out("x.o").string() + "'";
  Ran r = execute({{"/usr/bin/unshare", "-m", "/bin/sh", "-c", script}, m_env, m_dir});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(fs::exists(out("x.o")));
  EXPECT_EQ(compiles(), 1);
  EXPECT_EQ(launches(), "sccache bypass\n");
  EXPECT_EQ(sccache_stats()["cache_errors"]["counts"]["C/C++"], 1);
}

// ---- ccache and the bare compiler
// ----------------------------------------------------------------

TEST_F(KilnCc, NoSccacheServerMeansCcache) {
  for (int i = 0; i < 2; ++i) {
    Ran r = kiln_cc({"gcc", "-c", "x.c", "-o", out("x.o")});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
  }
  EXPECT_EQ(ccache_stat("cache_miss"), 1);
  EXPECT_EQ(ccache_stat("direct_cache_hit"), 1);
  EXPECT_EQ(launches(), "ccache ok\nccache ok\n");
  EXPECT_FALSE(port_accepts(m_port)) << "kiln-cc starts no sccache server";
}

TEST_F(KilnCc, NoSccacheOnPathMeansCcache) {
  set_path(m_dir / "bin", tools_path({"ccache"}));
  start_server(); // by its full path: a server that answers, but PATH has no sccache
  for (int i = 0; i < 2; ++i) {
    Ran r = kiln_cc({"gcc", "-c", "x.c", "-o", out("x.o")});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_EQ(ccache_stat("cache_miss"), 1);
  EXPECT_EQ(ccache_stat("direct_cache_hit"), 1);
  EXPECT_EQ(sccache_stats()["compile_requests"], 0);
  EXPECT_EQ(launches(), "ccache ok\nccache ok\n");

  Ran direct = compiler({"-c", "err.c", "-o", out("err.o")});
  Ran r = kiln_cc({"gcc", "-c", "err.c", "-o", out("err.o")});
  EXPECT_EQ(r.exit_code, direct.exit_code);
  EXPECT_EQ(r.out, direct.out);
  EXPECT_EQ(r.err, direct.err);
}

TEST_F(KilnCc, NeitherMeansTheBareCompiler) {
  set_path(m_dir / "bin", tools_path({}));
  Ran ok = kiln_cc({"gcc", "-c", "x.c", "-o", out("x.o")});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(fs::exists(out("x.o")));
  Ran direct = compiler({"-c", "err.c", "-o", out("err.o")});
  reset_compiler_log();
  Ran r = kiln_cc({"gcc", "-c", "err.c", "-o", out("err.o")});
  EXPECT_EQ(r.exit_code, direct.exit_code);
  EXPECT_EQ(r.out, direct.out);
  EXPECT_EQ(r.err, direct.err);
  EXPECT_EQ(compiles(), 1);
  EXPECT_EQ(launches(), "direct ok\ndirect failed\n");
  // Without a session kiln-cc becomes the compiler: nothing to log, same result.
  Ran unlogged = kiln_cc({"gcc", "-c", "err.c", "-o", out("err.o")}, {"KILN_CC_SESSION="});
  EXPECT_EQ(unlogged.exit_code, direct.exit_code);
  EXPECT_EQ(unlogged.err, direct.err);
  EXPECT_EQ(launches(), "direct ok\ndirect failed\n");
}

TEST_F(KilnCc, CompilerThatCannotStartExits127LikeAShell) {
  set_path(m_dir / "bin", tools_path({}));
  Ran r = kiln_cc({"no-such-compiler", "-c", "x.c"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.err, "kiln-cc: cannot run no-such-compiler: No such file or directory\n");
}

// ---- what it says, and signals
// ---------------------------------------------------------------------

TEST_F(KilnCc, VerboseSaysWhichWayOnce) {
  auto said = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> env = {"KILN_CC_VERBOSE=1"};
    env.insert(env.end(), extra.begin(), extra.end());
    return kiln_cc({"gcc", "-c", "x.c", "-o", out("x.o")}, env).err;
  };
  std::string port = std::to_string(m_port);
  EXPECT_EQ(said({}), "kiln-cc: compiling through ccache (no sccache server answers at "
                      "127.0.0.1:" +
                          port + ")\n");
  start_server();
  EXPECT_EQ(said({}),
            "kiln-cc: compiling through sccache (its server answers at 127.0.0.1:" + port + ")\n");
  set_path(m_dir / "bin", tools_path({}));
  EXPECT_EQ(said({}), "kiln-cc: compiling directly (no sccache on PATH, no ccache on PATH)\n");
  // Asked for nothing, it says nothing.
  EXPECT_EQ(kiln_cc({"gcc", "-c", "x.c", "-o", out("x.o")}).err, "");
}

TEST_F(KilnCc, VerboseNamesTheBypassOnce) {
  start_server();
  fs::path scratch = m_dir / "TryCompile-5678";
  fs::create_directories(scratch);
  Ran r = kiln_cc({"gcc", "-c", (m_dir / "src" / "x.c").string(), "-o", out("x.o")},
                  {"KILN_CC_VERBOSE=1"}, true, scratch);
  EXPECT_TRUE(r.err.starts_with(
      "kiln-cc: compiling through sccache (its server answers at 127.0.0.1:" +
      std::to_string(m_port) +
      ")\nkiln-cc: sccache bypass (working directory gone): compiling directly\n"))
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 3)
      << "two lines of kiln-cc's, one of the compiler's shell: " << r.err;
}

TEST_F(KilnCc, CompilerKilledBySignalKillsKilnCcWithTheSameSignal) {
  mark("die");
  auto expect_killed = [&](const char* route, const std::vector<std::string>& extra = {}) {
    Ran r = kiln_cc({"gcc", "-c", "x.c", "-o", out("x.o")}, extra);
    EXPECT_EQ(r.term_signal, SIGKILL) << route << ": exit " << r.exit_code;
    EXPECT_EQ(r.out, "") << route << ": sccache's note is dropped";
    EXPECT_EQ(r.err, "about to die\n") << route;
  };
  set_path(m_dir / "bin", tools_path({}));
  expect_killed("direct, session");
  expect_killed("direct, exec", {"KILN_CC_SESSION="});
  set_path(m_dir / "bin", standard_path());
  start_server();
  expect_killed("sccache");
  EXPECT_EQ(launches(), "direct failed\nsccache failed\n");
}

TEST_F(KilnCc, StopSignalSentToKilnCcAloneReachesTheCompiler) {
  // A build tool or `timeout` may signal kiln-cc's pid only, not its process group.
  set_path(m_dir / "bin", tools_path({}));
  mark("slow");
  std::vector<std::string> env = with_env({});
  std::vector<char*> envp;
  for (auto& e : env) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);
  std::string kiln_cc = k_kiln_cc.string();
  std::vector<char*> argv = {kiln_cc.data(), const_cast<char*>("gcc"), const_cast<char*>("-c"),
                             const_cast<char*>("x.c"), nullptr};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0); // a group of its own, so the test's signal reaches kiln-cc alone
    if (::chdir((m_dir / "src").c_str()) == 0) {
      ::execve(argv[0], argv.data(), envp.data());
    }
    ::_exit(122);
  }
  for (int i = 0; i < 1000 && !fs::exists(m_dir / "started"); ++i) {
    ::usleep(10000);
  }
  ASSERT_TRUE(fs::exists(m_dir / "started")) << "the compiler never started";
  int compiler = std::stoi(read_file(m_dir / "started"));
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    gone = ::kill(compiler, 0) != 0;
    ::usleep(10000);
  }
  EXPECT_TRUE(gone) << "the compiler still runs";
  if (!gone) {
    ::kill(compiler, SIGKILL);
  }
  EXPECT_EQ(launches(), "direct failed\n");
}

TEST_F(KilnCc, ServerUnixSocketIsProbedWhereTheClientConnects) {
  // sccache >= 0.9 listens on SCCACHE_SERVER_UDS instead of the port ("\x00name": abstract).
  // Debian's 0.4 has no such socket, so a stand-in sccache that runs the compiler takes its
  // place; what matters is where kiln-cc looks.
  fs::create_directories(m_dir / "uds-bin");
  write_file(m_dir / "uds-bin" / "sccache", "#!/bin/sh\nexec \"$@\"\n", true);
  set_path(m_dir / "bin", (m_dir / "uds-bin").string() + ":" + tools_path({}));
  auto listen_on = [](const std::string& name, bool abstract) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path + (abstract ? 1 : 0), name.data(), name.size());
    socklen_t length = offsetof(sockaddr_un, sun_path) + name.size() + 1;
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0) << name;
    EXPECT_EQ(::listen(fd, 8), 0);
    return fd;
  };
  std::string path = (m_dir / "sccache.sock").string();
  std::string abstract = "kiln-cc-test-" + std::to_string(m_port);
  auto said = [&](const std::string& uds) {
    Ran r = kiln_cc({"gcc", "-c", "x.c", "-o", out("x.o")},
                    {"KILN_CC_VERBOSE=1", "SCCACHE_SERVER_UDS=" + uds});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.err;
  };
  EXPECT_EQ(said(path), "kiln-cc: compiling directly (no sccache server answers at unix:" + path +
                            ", no ccache on PATH)\n");
  int on_path = listen_on(path, false);
  int on_name = listen_on(abstract, true);
  EXPECT_EQ(said(path),
            "kiln-cc: compiling through sccache (its server answers at unix:" + path + ")\n");
  EXPECT_EQ(said("\\x00" + abstract),
            "kiln-cc: compiling through sccache (its server answers at unix:@" + abstract + ")\n");
  ::close(on_path);
  ::close(on_name);
  EXPECT_EQ(said("\\x00" + abstract), "kiln-cc: compiling directly (no sccache server answers "
                                      "at unix:@" +
                                          abstract + ", no ccache on PATH)\n");
}

// ---- kiln-cc itself ---------------------------------------------------------------------------

TEST_F(KilnCc, HelpAndVersionAreKilnCcsOwnNotTheCachesHelp) {
  // With no sccache server answering, a compiler named --help went to ccache, which printed its
  // own help.
  Ran help = kiln_cc({"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_EQ(help.out.rfind("usage: kiln-cc <compiler> [args...]\n", 0), 0u) << help.out;
  EXPECT_NE(help.out.find("kiln-cc session run"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("ccache [options]"), std::string::npos) << "ccache's help:\n" << help.out;
  EXPECT_EQ(help.err, "");
  EXPECT_EQ(kiln_cc({"-h"}).out, help.out);
  Ran version = kiln_cc({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("kiln-cc ", 0), 0u) << version.out;
  EXPECT_EQ(std::count(version.out.begin(), version.out.end(), '\n'), 1) << version.out;
  EXPECT_EQ(launches(), "") << "neither is a compile";
}

TEST(KilnCcBinary, IsStrippedForImages) {
  // It is copied into every records folder and mounted into build images: symbols and debug
  // information are dead weight there (14 MB of a 15 MB binary before it was stripped).
  Ran sections = execute({{"/usr/bin/readelf", "-S", "-W", k_kiln_cc.string()}, {}, "/"});
  ASSERT_EQ(sections.exit_code, 0) << sections.err;
  EXPECT_EQ(sections.out.find(" .symtab "), std::string::npos) << sections.out;
  EXPECT_EQ(sections.out.find(" .debug_"), std::string::npos) << sections.out;
}

} // namespace
} // namespace kiln::testing
