#include "util/process.h"

#include <cerrno>
#include <csignal>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "util/strings.h"

extern char** environ;

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> merged_environment(const ProcessSpec& spec) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& [key, value] : spec.env) {
      overridden = overridden || key == name;
    }
    if (!overridden) {
      env.emplace_back(entry);
    }
  }
  for (const auto& [key, value] : spec.env) {
    env.push_back(key + "=" + value);
  }
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) {
    out.push_back(s.data());
  }
  out.push_back(nullptr);
  return out;
}

// ESRCH (the group is already empty) is the outcome we want, so the result is not checked.
void kill_group(pid_t pgid, int signal) {
  ::kill(-pgid, signal);
}

} // namespace

void LineSplitter::feed(std::string_view chunk) {
  while (!chunk.empty()) {
    size_t newline = chunk.find('\n');
    if (newline == std::string_view::npos) {
      m_partial.append(chunk);
      return;
    }
    m_partial.append(chunk.substr(0, newline));
    if (!m_partial.empty() && m_partial.back() == '\r') {
      m_partial.pop_back();
    }
    m_on_line(m_partial);
    m_partial.clear();
    chunk.remove_prefix(newline + 1);
  }
}

void LineSplitter::finish() {
  if (!m_partial.empty()) {
    m_on_line(m_partial);
    m_partial.clear();
  }
}

ProcessExit run_process(const ProcessSpec& spec, const OutputSink& sink, int interrupt_fd,
                        std::chrono::milliseconds grace) {
  ProcessExit result;
  if (spec.argv.empty()) {
    result.spawn_error = "empty command";
    return result;
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    result.spawn_error = fmt::format("pipe: {}", std::strerror(errno));
    return result;
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  if (!spec.cwd.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, spec.cwd.c_str());
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD}) {
    sigaddset(&defaults, s);
  }
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<std::string> argv_strings = spec.argv;
  std::vector<std::string> env_strings = merged_environment(spec);
  std::vector<char*> argv = c_strings(argv_strings);
  std::vector<char*> envp = c_strings(env_strings);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    result.spawn_error = fmt::format("cannot run {}: {}", spec.argv[0], std::strerror(rc));
    return result;
  }

  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  int out_fd = out[0];
  bool leader_done = false;
  bool interrupting = false;
  Clock::time_point kill_deadline{};
  // After the leader exits, a process outside its group could still hold the pipe open;
  // wait this long for the end of output before giving up on it.
  constexpr auto k_drain_timeout = std::chrono::seconds(5);
  Clock::time_point drain_deadline{};
  const bool limited = spec.timeout.count() > 0;
  const Clock::time_point time_limit = Clock::now() + spec.timeout;
  char buffer[65536];

  while (!leader_done || out_fd >= 0) {
    std::vector<pollfd> fds;
    if (out_fd >= 0) {
      fds.push_back({out_fd, POLLIN, 0});
    }
    if (!leader_done && pidfd >= 0) {
      fds.push_back({pidfd, POLLIN, 0});
    }
    if (!leader_done && !interrupting && interrupt_fd >= 0) {
      fds.push_back({interrupt_fd, POLLIN, 0});
    }
    int timeout_ms = -1;
    auto now = Clock::now();
    if (interrupting && !leader_done) {
      timeout_ms = static_cast<int>(std::max<long>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(kill_deadline - now).count()));
    } else if (leader_done) {
      timeout_ms = static_cast<int>(std::max<long>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(drain_deadline - now).count()));
    } else if (pidfd < 0) {
      timeout_ms = 100; // no pidfd: fall back to polling the leader
    }
    if (limited && !interrupting && !leader_done) {
      int left = static_cast<int>(std::max<long>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(time_limit - now).count()));
      timeout_ms = timeout_ms < 0 ? left : std::min(timeout_ms, left);
    }
    int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) {
      break;
    }
    now = Clock::now();
    for (const auto& fd : fds) {
      if (fd.revents == 0) {
        continue;
      }
      if (fd.fd == out_fd) {
        ssize_t n = ::read(out_fd, buffer, sizeof buffer);
        if (n > 0) {
          sink(std::string_view(buffer, static_cast<size_t>(n)));
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          ::close(out_fd);
          out_fd = -1;
        }
      } else if (fd.fd == interrupt_fd) {
        interrupting = true;
        result.interrupted = true;
        kill_deadline = now + grace;
        kill_group(pid, SIGINT);
      }
    }
    if (limited && !interrupting && !leader_done && now >= time_limit) {
      interrupting = true;
      result.timed_out = true;
      kill_deadline = now + grace;
      kill_group(pid, SIGINT);
    }
    if (interrupting && !leader_done && now >= kill_deadline) {
      kill_group(pid, SIGKILL);
    }
    if (!leader_done) {
      int status = 0;
      pid_t waited = ::waitpid(pid, &status, WNOHANG);
      if (waited == pid) {
        leader_done = true;
        if (WIFEXITED(status)) {
          result.exit_code = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
          result.term_signal = WTERMSIG(status);
        }
        kill_group(pid, SIGKILL);
        drain_deadline = now + k_drain_timeout;
      }
    } else if (out_fd >= 0 && now >= drain_deadline) {
      ::close(out_fd);
      out_fd = -1;
    }
  }
  if (pidfd >= 0) {
    ::close(pidfd);
  }
  return result;
}

std::string CapturedRun::failure() const {
  if (!exit.spawn_error.empty()) {
    return exit.spawn_error;
  }
  if (exit.timed_out) {
    return "no answer before the time limit";
  }
  std::string said;
  for (const std::string& line : split(output, '\n')) {
    if (!trim(line).empty()) {
      said = std::string(trim(line));
    }
  }
  std::string status = exit.term_signal != 0 ? fmt::format("killed by signal {}", exit.term_signal)
                                             : fmt::format("exit {}", exit.exit_code);
  return said.empty() ? status : fmt::format("{} ({})", said, status);
}

CapturedRun run_captured(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  CapturedRun run;
  run.exit =
      run_process({argv, {}, {}, timeout}, [&](std::string_view chunk) { run.output += chunk; });
  return run;
}

tl::expected<std::string, std::string> capture_output(const std::vector<std::string>& argv) {
  std::string output;
  ProcessExit exit = run_process({argv, {}, {}}, [&](std::string_view chunk) { output += chunk; });
  if (!exit.spawn_error.empty()) {
    return tl::unexpected(exit.spawn_error);
  }
  if (!exit.ok()) {
    return tl::unexpected(
        fmt::format("{} exited with {}: {}", join(argv, " "), exit.status_code(), trim(output)));
  }
  return output;
}

} // namespace kiln
