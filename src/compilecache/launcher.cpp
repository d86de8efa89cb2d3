// kiln-cc <compiler> <args...>: a CMAKE_<LANG>_COMPILER_LAUNCHER / RUSTC_WRAPPER that compiles
// through sccache when its server answers, else through ccache, else runs the compiler as is;
// and that turns sccache's own failures into a direct compile instead of a failed build.
//
// Environment it reads (all optional):
//   PATH                 where sccache, ccache and the compiler are looked up
//   SCCACHE_SERVER_UDS   the sccache server's unix socket (sccache >= 0.9; "\x00name" is an
//                        abstract one), read the way the sccache client reads it
//   SCCACHE_SERVER_PORT  else the server's TCP port on 127.0.0.1, default 4226, likewise
//   KILN_CC_SESSION      a session folder (session_dir.h): one line per launch is appended to
//                        its `launches` file
//   KILN_CC_VERBOSE=1    say on stderr, once, which way this compile goes, and why it bypassed
//
// Exit codes pass through untouched. A compiler killed by a signal kills kiln-cc with the same
// signal (re-raised, core dumps off), whichever way it ran, so the build tool sees what it would
// have seen from the bare compiler; sccache's note about the signal is dropped. Through ccache
// the build tool sees what ccache makes of it (ccache 4.7 exits 255). kiln-cc's own failure to
// start the compiler exits 127 (not found) or 126, as a shell would.

#include "compilecache/launcher.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compilecache/child_process.h"
#include "compilecache/sccache_output.h"
#include "compilecache/server_address.h"
#include "compilecache/session_dir.h"
#include "util/fs.h"

extern char** environ;

namespace kiln::cc {

namespace {

// sccache's own failure messages are a few hundred bytes (the longest recorded is 316); past
// this much the output is the compiler's and streams through instead of sitting in memory.
constexpr std::size_t k_hold_limit = 64 * 1024;

int g_child_exit_pipe = -1; // written by the SIGCHLD handler, polled by the capture loop

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return; // the reader is gone (EPIPE with SIGPIPE ignored): nothing left to tell
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void say(std::string_view message) {
  std::string line = "kiln-cc: ";
  line.append(message);
  line.push_back('\n');
  write_all(STDERR_FILENO, line);
}

enum class Cache { sccache, ccache, direct };

const char* cache_name(Cache cache) {
  return cache == Cache::sccache ? "sccache" : cache == Cache::ccache ? "ccache" : "direct";
}

struct Route {
  Cache cache = Cache::direct;
  std::string tool; // sccache's or ccache's path
  std::string why;  // for KILN_CC_VERBOSE
};

Route resolve_route() {
  Route route;
  const char* path_env = std::getenv("PATH");
  std::string_view path = path_env != nullptr ? path_env : k_default_path;
  std::string sccache = find_on_path("sccache", path);
  if (!sccache.empty()) {
    ServerAddress address = sccache_server_address(std::getenv("SCCACHE_SERVER_UDS"),
                                                   std::getenv("SCCACHE_SERVER_PORT"));
    if (server_answers(address)) {
      return {Cache::sccache, sccache, "its server answers at " + address.text};
    }
    route.why = "no sccache server answers at " + address.text;
  } else {
    route.why = "no sccache on PATH";
  }
  std::string ccache = find_on_path("ccache", path);
  if (!ccache.empty()) {
    return {Cache::ccache, ccache, route.why};
  }
  route.why += ", no ccache on PATH";
  return route;
}

/// One line in the session's launch log, in one write(2) so parallel compiles never interleave.
/// Bookkeeping never fails a compile: a session folder that is gone only loses the line.
void log_launch(Cache cache, std::string_view outcome, bool verbose) {
  const char* session = std::getenv(k_session_env);
  if (session == nullptr || *session == '\0') {
    return;
  }
  std::string path = std::string(session) + "/" + k_launch_log;
  std::string line = std::string(cache_name(cache)) + " " + std::string(outcome) + "\n";
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    if (verbose) {
      say("cannot append to " + path + ": " + std::strerror(errno));
    }
  }
  if (fd >= 0) {
    ::close(fd);
  }
}

void note_child_exit(int) {
  int saved = errno;
  if (g_child_exit_pipe >= 0) {
    [[maybe_unused]] ssize_t n = ::write(g_child_exit_pipe, "x", 1);
  }
  errno = saved;
}

int cannot_run(const char* program, int error) {
  say(std::string("cannot run ") + program + ": " + std::strerror(error));
  return cannot_start_exit_code(error);
}

/// Start argv with stdout/stderr on the given descriptors (-1: inherited), forwarding the
/// build tool's stop signals to it. Returns the pid, or -1 with errno set.
/// vfork, not posix_spawn: glibc's posix_spawn maps a stack for its child and queries all 64
/// signal dispositions there, which measured 0.4-0.7 ms more per compile on the 2-core build VM.
pid_t spawn(const std::vector<char*>& argv, bool search_path, int out_fd, int err_fd) {
  // Signals stay blocked until the child's pid is known, so none is lost in between and no
  // handler runs in the vfork child (which shares this memory); the child restores the mask it
  // runs the program with.
  sigset_t blocked;
  sigset_t original;
  sigemptyset(&blocked);
  for (int signal : k_forwarded_signals) {
    sigaddset(&blocked, signal);
  }
  sigaddset(&blocked, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &blocked, &original);
  char* const* args = argv.data();
  volatile int exec_error = 0;
  pid_t pid = ::vfork();
  if (pid == 0) {
    if ((out_fd < 0 || ::dup2(out_fd, STDOUT_FILENO) >= 0) &&
        (err_fd < 0 || ::dup2(err_fd, STDERR_FILENO) >= 0)) {
      ::sigprocmask(SIG_SETMASK, &original, nullptr);
      if (search_path) {
        ::execvp(args[0], args);
      } else {
        ::execv(args[0], args);
      }
    }
    exec_error = errno;
    ::_exit(127);
  }
  int error = pid < 0 ? errno : exec_error;
  if (pid > 0 && error != 0) {
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
  set_child(pid > 0 ? pid : 0);
  ::sigprocmask(SIG_SETMASK, &original, nullptr);
  errno = error;
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

/// The compile's argv, after `tool` unless that is empty; null-terminated for exec.
std::vector<char*> command(const std::string& tool, int argc, char** argv) {
  std::vector<char*> args;
  args.reserve(static_cast<std::size_t>(argc) + 2);
  if (!tool.empty()) {
    args.push_back(const_cast<char*>(tool.c_str()));
  }
  args.insert(args.end(), argv, argv + argc);
  args.push_back(nullptr);
  return args;
}

/// Run the compile as the compiler itself, in this process: the build tool then waits for the
/// compiler with nothing in between. Returns only when it cannot start.
int exec_compiler(char** argv) {
  ::execvp(argv[0], argv);
  return cannot_run(argv[0], errno);
}

/// ccache or the bare compiler, with the real streams. Without a session there is nothing to
/// record afterwards, so kiln-cc becomes the program; with one it waits to log the outcome.
int run_plain(const Route& route, int argc, char** argv, bool verbose) {
  std::vector<char*> args = command(route.tool, argc, argv);
  const char* session = std::getenv(k_session_env);
  if (session == nullptr || *session == '\0') {
    ::execvp(args[0], args.data());
    return cannot_run(args[0], errno);
  }
  forward_stop_signals();
  pid_t pid = spawn(args, true, -1, -1);
  if (pid < 0) {
    int error = errno;
    log_launch(route.cache, "failed", verbose);
    return cannot_run(args[0], error);
  }
  int status = wait_for(pid);
  log_launch(route.cache, WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "ok" : "failed", verbose);
  return exit_code_of(status);
}

/// Compile directly because sccache failed for its own reasons.
int bypass(std::string_view reason, char** argv, bool verbose) {
  log_launch(Cache::sccache, "bypass", verbose);
  if (verbose) {
    say(std::string("sccache bypass (") + std::string(reason) + "): compiling directly");
  }
  return exec_compiler(argv);
}

bool working_directory_exists() {
  char buffer[PATH_MAX];
  return ::getcwd(buffer, sizeof(buffer)) != nullptr || errno != ENOENT;
}

/// `sccache <compiler> <args>` with its output held (sccache_output.h) until it is known to be
/// the compiler's: sccache's own failures are dropped and the compiler runs directly instead.
int run_through_sccache(const Route& route, int argc, char** argv, bool verbose) {
  // CMake's TryCompile deletes its scratch dir: sccache would say so on stdout with exit 1,
  // like a compile error; the bare compiler, which inherits the directory, still works.
  if (!working_directory_exists()) {
    return bypass("working directory gone", argv, verbose);
  }
  int out_pipe[2];
  int err_pipe[2];
  int exit_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0 ||
      ::pipe2(exit_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return bypass(std::string("no pipe: ") + std::strerror(errno), argv, verbose);
  }
  g_child_exit_pipe = exit_pipe[1];
  struct sigaction on_child_exit {};
  on_child_exit.sa_handler = note_child_exit;
  sigemptyset(&on_child_exit.sa_mask);
  on_child_exit.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  ::sigaction(SIGCHLD, &on_child_exit, nullptr);
  forward_stop_signals();

  pid_t pid = spawn(command(route.tool, argc, argv), false, out_pipe[1], err_pipe[1]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (pid < 0) {
    return bypass(std::string("cannot run sccache: ") + std::strerror(errno), argv, verbose);
  }

  SccacheOutput output(
      [](Stream stream, std::string_view bytes) {
        write_all(stream == Stream::out ? STDOUT_FILENO : STDERR_FILENO, bytes);
      },
      k_hold_limit);
  static char buffer[64 * 1024];
  std::array<pollfd, 3> fds = {
      {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}, {exit_pipe[0], POLLIN, 0}}};
  auto read_ready = [&](bool drain) {
    for (std::size_t i = 0; i < 2; ++i) {
      while (fds[i].fd >= 0 && (drain || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0)) {
        ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
        if (n < 0 && errno == EINTR) {
          continue;
        }
        if (n > 0) {
          output.add(i == 0 ? Stream::out : Stream::err,
                     std::string_view(buffer, static_cast<std::size_t>(n)));
          if (drain) {
            continue;
          }
        } else if (n == 0 || errno != EAGAIN) {
          fds[i].fd = -1; // poll skips negative descriptors
        }
        break;
      }
    }
    output.settle();
  };
  int status = 0;
  bool reaped = false;
  while (!reaped && (fds[0].fd >= 0 || fds[1].fd >= 0)) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) {
        continue; // a forwarded signal, or SIGCHLD, which the exit pipe reports
      }
      break; // cannot wait for output any more: wait for sccache itself
    }
    read_ready(false);
    if ((fds[2].revents & POLLIN) != 0) {
      while (::read(exit_pipe[0], buffer, sizeof(buffer)) > 0) {
      }
      reaped = ::waitpid(pid, &status, WNOHANG) == pid;
    }
  }
  if (reaped) {
    // sccache has exited but something it started still holds the pipes (a server started
    // with SCCACHE_NO_DAEMON=1): take what is there now rather than wait for it to exit.
    for (std::size_t i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0) {
        ::fcntl(fds[i].fd, F_SETFL, O_NONBLOCK);
      }
    }
    read_ready(true);
  } else {
    status = wait_for(pid);
  }
  set_child(0);

  if (WIFSIGNALED(status)) {
    // sccache itself was stopped (the build was interrupted): not a failure of its own.
    output.flush();
    log_launch(Cache::sccache, "failed", verbose);
    die_of(WTERMSIG(status));
  }
  int code = WEXITSTATUS(status);
  if (output.holding()) {
    if (const SccacheFailureClass* failure =
            find_own_failure(output.held_out(), output.held_err(), code)) {
      return bypass(failure->name, argv, verbose);
    }
  }
  std::optional<SignalNote> note = output.finish(code);
  if (output.compiled_locally()) {
    log_launch(Cache::sccache, "bypass", verbose);
    if (verbose) {
      say("sccache bypass (server lost after the compile started): sccache compiled directly");
    }
  } else {
    log_launch(Cache::sccache, code == 0 && !note ? "ok" : "failed", verbose);
  }
  if (note) {
    die_of(note->signal);
  }
  return code;
}

} // namespace

int run_launcher(int argc, char** argv) {
  if (argc < 1) {
    say("usage: kiln-cc <compiler> [args...]  (or: kiln-cc session <verb> ...)");
    return 2;
  }
  const char* verbose_env = std::getenv("KILN_CC_VERBOSE");
  bool verbose = verbose_env != nullptr && std::strcmp(verbose_env, "1") == 0;
  Route route = resolve_route();
  if (verbose) {
    say(std::string("compiling ") +
        (route.cache == Cache::direct ? "directly"
                                      : std::string("through ") + cache_name(route.cache)) +
        " (" + route.why + ")");
  }
  if (route.cache == Cache::sccache) {
    return run_through_sccache(route, argc, argv, verbose);
  }
  return run_plain(route, argc, argv, verbose);
}

} // namespace kiln::cc
