// Running sccache: its version, and a command of it with exactly the session's environment,
// its output kept apart and its time bounded.
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compilecache/session_control.h"
#include "util/process.h"

namespace kiln::cc::session_control {

namespace {

std::string read_all(int fd) {
  std::string text;
  char buffer[8192];
  off_t offset = 0;
  ssize_t n;
  while ((n = ::pread(fd, buffer, sizeof buffer, offset)) > 0) {
    text.append(buffer, static_cast<size_t>(n));
    offset += n;
  }
  return text;
}

} // namespace

std::vector<std::string> environment_strings(const Environment& env) {
  std::vector<std::string> strings;
  for (const auto& [name, value] : env) {
    strings.push_back(name + "=" + value);
  }
  return strings;
}

std::optional<Version> parse_version(std::string_view text) {
  auto start = text.find_first_of("0123456789");
  if (start == std::string_view::npos) {
    return std::nullopt;
  }
  Version version;
  int* parts[] = {&version.major, &version.minor, &version.patch};
  size_t pos = start;
  for (int i = 0; i < 3; ++i) {
    if (pos >= text.size() || !std::isdigit(static_cast<unsigned char>(text[pos]))) {
      return i >= 2 ? std::optional(version) : std::nullopt;
    }
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      *parts[i] = *parts[i] * 10 + (text[pos] - '0');
      ++pos;
    }
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
    } else {
      return i >= 1 ? std::optional(version) : std::nullopt;
    }
  }
  return version;
}

CommandResult run_command(const std::string& program, const std::vector<std::string>& args,
                          const Environment& env, std::chrono::milliseconds timeout) {
  CommandResult result;
  int out_fd = ::memfd_create("kiln-cc-out", MFD_CLOEXEC);
  int err_fd = ::memfd_create("kiln-cc-err", MFD_CLOEXEC);
  if (out_fd < 0 || err_fd < 0) {
    result.spawn_error = std::string("memfd_create: ") + std::strerror(errno);
    if (out_fd >= 0) {
      ::close(out_fd);
    }
    if (err_fd >= 0) {
      ::close(err_fd);
    }
    return result;
  }
  std::vector<std::string> argv_strings = {program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv = c_strings(argv_strings);
  std::vector<std::string> env_strings = environment_strings(env);
  std::vector<char*> envp = c_strings(env_strings);

  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  ::posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  // sccache, and the server it starts, begin with the signal state of a fresh process: the
  // watchdog runs this with signals blocked and SIGPIPE ignored.
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int signal : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) {
    sigaddset(&defaults, signal);
  }
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, program.c_str(), &actions, &attr, argv.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    result.spawn_error = "cannot run " + program + ": " + std::strerror(rc);
  } else {
    const auto deadline = Clock::now() + timeout;
    int status = 0;
    while (true) {
      pid_t done = ::waitpid(pid, &status, WNOHANG);
      if (done == pid || (done < 0 && errno != EINTR)) {
        break;
      }
      if (Clock::now() >= deadline) {
        result.timed_out = true;
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    if (!result.timed_out) {
      result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    result.out = read_all(out_fd);
    result.err = read_all(err_fd);
  }
  ::close(out_fd);
  ::close(err_fd);
  return result;
}

void apply_changes(Environment& env, const std::vector<EnvironmentChange>& changes) {
  for (const EnvironmentChange& change : changes) {
    if (change.value) {
      env[change.name] = *change.value;
    } else {
      env.erase(change.name);
    }
  }
}

} // namespace kiln::cc::session_control
