#include "util/process.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <mutex>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

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

// ESRCH (the group is already empty) is the outcome we want, so the result is not checked.
void kill_group(pid_t pgid, int signal) {
  ::kill(-pgid, signal);
}

int ms_until(Clock::time_point deadline, Clock::time_point now) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::clamp<long>(left, 0, 24L * 3600 * 1000));
}

/// A process of its own that outlives kiln by a moment: kiln tells it every process group it
/// starts and ends, over a pipe whose write end only kiln holds (close-on-exec). When kiln dies,
/// even by SIGKILL, the kernel closes that end; the sentinel reads end-of-file and kills every
/// group still registered. PR_SET_PDEATHSIG would reach only the engine itself, not the RUN
/// step's processes it leaves behind in its group, and it fires when the spawning thread ends.
class GroupSentinel {
public:
  /// Called before a spawn, so that between the spawn and `watch` there is one write, not a
  /// fork: a kiln killed in that window would leave the new group unwatched.
  void ready() {
    std::lock_guard lock(m_mutex);
    ensure_started();
  }
  void watch(pid_t group) { send(static_cast<int32_t>(group)); }
  void release(pid_t group) { send(-static_cast<int32_t>(group)); }

private:
  void ensure_started() {
    if (m_owner != ::getpid()) {
      // First use, or a forked child: a child watches its own groups, and must not hold the
      // parent's pipe open past the parent's death.
      if (m_fd >= 0) {
        ::close(m_fd);
        m_fd = -1;
      }
      m_owner = ::getpid();
      start();
    }
  }

  void send(int32_t message) {
    std::lock_guard lock(m_mutex);
    ensure_started();
    if (m_fd >= 0) {
      // Four bytes to a pipe are written whole or not at all.
      [[maybe_unused]] ssize_t n = ::write(m_fd, &message, sizeof message);
    }
  }

  void start() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      return;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      return;
    }
    if (pid == 0) {
      // The sentinel's own copy of the write end would keep it from ever reading end-of-file;
      // closed by name, not left to close_range, which a seccomp filter may refuse.
      ::close(fds[1]);
      watch_groups(fds[0]); // never returns
    }
    ::close(fds[0]);
    m_fd = fds[1];
  }

  /// The sentinel's whole life, in the child of a fork from a process that may have threads:
  /// only async-signal-safe calls, no allocation.
  [[noreturn]] static void watch_groups(int in) {
    // Its own session: a terminal's Ctrl-C or a kill of kiln's process group must not take
    // the sentinel down before it has done its work.
    ::setsid();
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) {
      ::sigaction(s, &ignore, nullptr);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Hold nothing of kiln's: a copy of another process's output pipe would keep it open.
    if (in != 3) {
      ::dup2(in, 3);
    }
    int null = ::open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3 && null >= 0; ++fd) {
      ::dup2(null, fd);
    }
    ::syscall(SYS_close_range, 4U, ~0U, 0U);
    static pid_t groups[4096];
    size_t count = 0;
    while (true) {
      int32_t message = 0;
      ssize_t n = ::read(3, &message, sizeof message);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n != sizeof message) {
        break;
      }
      if (message > 0 && count < std::size(groups)) {
        groups[count++] = message;
      } else if (message < 0) {
        for (size_t i = 0; i < count; ++i) {
          if (groups[i] == -message) {
            groups[i] = groups[--count];
            break;
          }
        }
      }
    }
    for (size_t i = 0; i < count; ++i) {
      ::kill(-groups[i], SIGKILL);
    }
    ::_exit(0);
  }

  std::mutex m_mutex;
  pid_t m_owner = 0; // the process that started the sentinel m_fd talks to
  int m_fd = -1;
};

GroupSentinel& sentinel() {
  static GroupSentinel* instance = new GroupSentinel; // outlives static destruction
  return *instance;
}

} // namespace

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) {
    out.push_back(s.data());
  }
  out.push_back(nullptr);
  return out;
}

void LineSplitter::append(std::string_view part) {
  if (m_partial.size() < m_max_line) {
    m_partial.append(part.substr(0, m_max_line - m_partial.size()));
  }
}

void LineSplitter::feed(std::string_view chunk) {
  while (!chunk.empty()) {
    size_t newline = chunk.find('\n');
    if (newline == std::string_view::npos) {
      append(chunk);
      return;
    }
    append(chunk.substr(0, newline));
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

ProcessExit run_process(const ProcessSpec& spec, const OutputSink& sink) {
  ProcessExit result;
  const CancelToken& cancel = spec.cancel != nullptr ? *spec.cancel : interrupt_token();
  if (spec.argv.empty()) {
    result.spawn_error = "empty command";
    return result;
  }
  if (cancel.cancelled()) {
    result.interrupted = true;
    result.spawn_error = "not started: " + spec.argv[0] + " was cancelled before it began";
    return result;
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    result.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (spec.stdout_file.empty()) {
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, spec.stdout_file.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  if (!spec.cwd.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, spec.cwd.c_str());
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  // A child starts with the default of every signal kiln handles or ignores: SIGPIPE ignored
  // by kiln must still end a `yes | head` inside a build.
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD}) {
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
  sentinel().ready();
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    result.spawn_error = "cannot run " + spec.argv[0] + ": " + std::strerror(rc);
    return result;
  }
  sentinel().watch(pid);

  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  int out_fd = out[0];
  bool leader_done = false;
  // However this call is left (a sink or on_stop that throws included), the child's group is
  // killed and reaped and the descriptors closed: no child outlives the call that started it.
  struct OwnedChild {
    pid_t pid;
    const bool& leader_done;
    int& out_fd;
    int pidfd;
    ~OwnedChild() {
      if (!leader_done) {
        kill_group(pid, SIGKILL);
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
      }
      if (out_fd >= 0) {
        ::close(out_fd);
      }
      if (pidfd >= 0) {
        ::close(pidfd);
      }
      sentinel().release(pid);
    }
  } owned{pid, leader_done, out_fd, pidfd};
  bool stopping = false; // SIGINT sent; SIGKILL at kill_deadline
  Clock::time_point kill_deadline{};
  // After the leader exits, a process outside its group could still hold the pipe open;
  // wait this long for the end of output before giving up on it.
  constexpr auto k_drain_timeout = std::chrono::seconds(5);
  // While stopping, how often to look whether the token escalated to an immediate kill.
  constexpr auto k_escalation_poll = std::chrono::milliseconds(100);
  Clock::time_point drain_deadline{};
  const Clock::time_point started = Clock::now();
  Clock::time_point last_output = started;
  const bool limited = spec.timeout.count() > 0;
  const bool stall_limited = spec.stall_timeout.count() > 0;
  char buffer[65536];

  auto stop = [&](Clock::time_point now) {
    result.silent_for = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_output);
    if (spec.on_stop) {
      spec.on_stop();
    }
    stopping = true;
    kill_deadline = now + spec.grace;
    kill_group(pid, SIGINT);
  };

  while (!leader_done || out_fd >= 0) {
    std::vector<pollfd> fds;
    if (out_fd >= 0) {
      fds.push_back({out_fd, POLLIN, 0});
    }
    if (!leader_done && pidfd >= 0) {
      fds.push_back({pidfd, POLLIN, 0});
    }
    if (!leader_done && !stopping && cancel.fd() >= 0) {
      fds.push_back({cancel.fd(), POLLIN, 0});
    }
    auto now = Clock::now();
    int timeout_ms = -1;
    auto at_most = [&](int ms) { timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms); };
    if (leader_done) {
      at_most(ms_until(drain_deadline, now));
    } else if (stopping) {
      at_most(std::min(ms_until(kill_deadline, now), static_cast<int>(k_escalation_poll.count())));
    } else {
      if (pidfd < 0) {
        at_most(100); // no pidfd: fall back to polling the leader
      }
      if (cancel.fd() < 0) {
        at_most(static_cast<int>(k_escalation_poll.count()));
      }
      if (limited) {
        at_most(ms_until(started + spec.timeout, now));
      }
      if (stall_limited) {
        at_most(ms_until(last_output + spec.stall_timeout, now));
      }
    }
    int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) {
      break;
    }
    now = Clock::now();
    for (const auto& fd : fds) {
      if (fd.revents == 0 || fd.fd != out_fd) {
        continue;
      }
      ssize_t n = ::read(out_fd, buffer, sizeof buffer);
      if (n > 0) {
        last_output = now;
        sink(std::string_view(buffer, static_cast<size_t>(n)));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(out_fd);
        out_fd = -1;
      }
    }
    if (!leader_done && !stopping) {
      if (cancel.cancelled()) {
        result.interrupted = true;
        stop(now);
      } else if (limited && now >= started + spec.timeout) {
        result.timed_out = true;
        stop(now);
      } else if (stall_limited && now >= last_output + spec.stall_timeout) {
        result.stalled = true;
        stop(now);
      }
    }
    if (stopping && !leader_done && (now >= kill_deadline || cancel.level() == CancelLevel::kill)) {
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
        if (!stopping) {
          result.silent_for =
              std::chrono::duration_cast<std::chrono::milliseconds>(now - last_output);
        }
        kill_group(pid, SIGKILL);
        drain_deadline = now + k_drain_timeout;
      }
    } else if (out_fd >= 0 && now >= drain_deadline) {
      ::close(out_fd);
      out_fd = -1;
    }
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
  if (exit.interrupted) {
    return "interrupted";
  }
  std::string said;
  for (const std::string& line : split(output, '\n')) {
    if (!trim(line).empty()) {
      said = std::string(trim(line));
    }
  }
  std::string status = exit.term_signal != 0
                           ? "killed by signal " + std::to_string(exit.term_signal)
                           : "exit " + std::to_string(exit.exit_code);
  return said.empty() ? status : said + " (" + status + ")";
}

CapturedRun run_captured(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  CapturedRun run;
  ProcessSpec spec{argv};
  spec.timeout = timeout;
  run.exit = run_process(spec, [&](std::string_view chunk) { run.output += chunk; });
  return run;
}

tl::expected<std::string, std::string> capture_output(const std::vector<std::string>& argv) {
  CapturedRun run = run_captured(argv);
  if (!run.exit.spawn_error.empty()) {
    return tl::unexpected(run.exit.spawn_error);
  }
  if (!run.exit.ok()) {
    return tl::unexpected(join(argv, " ") + " exited with " +
                          std::to_string(run.exit.status_code()) + ": " +
                          std::string(trim(run.output)));
  }
  return run.output;
}

} // namespace kiln
