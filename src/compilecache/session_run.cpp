// `run`: the whole compile step in one session, the command run in it with the step's terminal
// and the stop signals forwarded, then drain, stats and stop whatever the command did.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compilecache/child_process.h"
#include "compilecache/session_control.h"
#include "util/cancel.h"
#include "util/process.h"

namespace kiln::cc::session_control {

// ---- run ------------------------------------------------------------------------------------

namespace {

CancelToken* g_interrupted = nullptr;

void note_interrupt(int) {
  if (g_interrupted != nullptr) {
    g_interrupted->cancel();
  }
}

/// `command` with the session's environment, kiln-cc standing in for it (child_process.h).
/// Returns its wait status, or nullopt with errno set when it could not start. Not kiln_base's
/// run_process: the command keeps the step's terminal, streams and process group, as if the
/// shell had run it.
std::optional<int> run_in_session(const std::vector<std::string>& command, const Environment& env) {
  std::vector<std::string> env_strings = environment_strings(env);
  std::vector<char*> envp = c_strings(env_strings);
  std::vector<std::string> argv_strings = command;
  std::vector<char*> argv = c_strings(argv_strings);
  // posix_spawnp looks the command up on the PATH of kiln-cc, not of envp: the session
  // changes no PATH, so the two agree.
  sigset_t blocked;
  sigset_t original;
  sigemptyset(&blocked);
  for (int signal : k_forwarded_signals) {
    sigaddset(&blocked, signal);
  }
  ::sigprocmask(SIG_BLOCK, &blocked, &original);
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  ::posix_spawnattr_setsigmask(&attr, &original);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), envp.data());
  ::posix_spawnattr_destroy(&attr);
  set_child(rc == 0 ? pid : 0);
  ::sigprocmask(SIG_SETMASK, &original, nullptr);
  if (rc != 0) {
    errno = rc;
    return std::nullopt;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  set_child(0);
  return status;
}

} // namespace

int run_with_session(const Options& options, const std::vector<std::string>& command) {
  // The watchdog watches this process: should run die, even of SIGKILL, and even before the
  // command starts, the server still stops.
  std::string dir = start_watched(options, ::getpid());
  static CancelToken interrupted;
  g_interrupted = &interrupted;
  forward_stop_signals(note_interrupt);
  std::optional<Session> session = dir.empty() ? std::nullopt : load_session_at(dir);
  if (!dir.empty() && !session) {
    warn("the session folder " + dir + " holds no readable " + k_session_file +
         ": the command runs without a kiln-cc session");
  }
  Environment env = environment_of_process();
  if (session) {
    apply_changes(env, session->changes);
  }
  std::optional<int> status = run_in_session(command, env);
  int start_error = status ? 0 : errno;
  if (!status) {
    print(stderr,
          "kiln-cc: cannot run " + command.front() + ": " + std::strerror(start_error) + "\n");
  }
  if (session) {
    if (interrupted.cancelled()) {
      note("interrupted: not waiting for uploads to slower levels; a later build uploads them "
           "again");
    } else {
      drain(*session, options, interrupted);
    }
    print(stdout, format_stats_line(step_stats(*session)) + "\n");
    std::fflush(stdout);
    stop(*session);
    // Nothing reads the folder once the command is over, and it would stay in the image.
    std::error_code ignored;
    fs::remove_all(session->dir, ignored);
  }
  if (!status) {
    return cannot_start_exit_code(start_error);
  }
  return exit_code_of(*status);
}

} // namespace kiln::cc::session_control
