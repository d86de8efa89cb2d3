#include "compilecache/watchdog.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/strings.h"

namespace kiln::cc {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Without a pidfd (Linux before 5.3, or a seccomp filter that predates it), how often the
// watchdog looks whether its owner is still there.
constexpr auto k_owner_poll = 1000ms;

/// What /proc/<pid>/stat says of a process; nullopt once it is gone.
struct ProcStat {
  char state = '?';
  pid_t parent = 0;
  unsigned long long start_time = 0; // clock ticks after boot: with the pid, who it is
};

std::optional<ProcStat> proc_stat(pid_t pid) {
  auto text = read_proc_file("/proc/" + std::to_string(pid) + "/stat", 4096);
  if (!text) {
    return std::nullopt;
  }
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last.
  size_t close = text->rfind(')');
  if (close == std::string::npos) {
    return std::nullopt;
  }
  std::vector<std::string> fields = split(trim(std::string_view(*text).substr(close + 1)), ' ');
  // After comm: state is field 3 of the file, ppid 4, starttime 22.
  if (fields.size() < 20 || fields[0].empty()) {
    return std::nullopt;
  }
  ProcStat stat;
  stat.state = fields[0][0];
  stat.parent = static_cast<pid_t>(std::strtol(fields[1].c_str(), nullptr, 10));
  stat.start_time = std::strtoull(fields[19].c_str(), nullptr, 10);
  return stat;
}

std::string proc_text(pid_t pid, const char* what) {
  return read_proc_file("/proc/" + std::to_string(pid) + "/" + what).value_or("");
}

std::string proc_link(pid_t pid, const char* what) {
  char buffer[4096];
  std::string path = "/proc/" + std::to_string(pid) + "/" + what;
  ssize_t n = ::readlink(path.c_str(), buffer, sizeof buffer);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
}

/// The owner, as the watchdog follows it: by pidfd where the kernel has them (readable once the
/// process has ended, whatever reaped it), else by pid and start time, read every second.
class Owner {
public:
  explicit Owner(pid_t pid) : m_pid(pid) {
    m_fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (auto stat = proc_stat(pid)) {
      m_start_time = stat->start_time;
    }
  }
  int fd() const { return m_fd; }
  bool gone() const {
    if (m_fd >= 0) {
      pollfd p{m_fd, POLLIN, 0};
      return ::poll(&p, 1, 0) == 1;
    }
    if (::kill(m_pid, 0) != 0 && errno == ESRCH) {
      return true;
    }
    // A zombie, or the pid taken by another process since. Without /proc, the pid alone.
    auto stat = proc_stat(m_pid);
    return stat && (stat->state == 'Z' || stat->state == 'X' || stat->start_time != m_start_time);
  }

private:
  pid_t m_pid;
  int m_fd = -1;
  unsigned long long m_start_time = 0;
};

/// Close every descriptor but the standard streams and `keep`: one the caller's shell left open
/// would pass on to the server the watchdog starts and stay open for the server's whole life.
void close_inherited(const std::vector<int>& keep) {
  std::vector<int> open;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (dirent* entry = ::readdir(dir)) {
      int fd = std::atoi(entry->d_name);
      if (fd > 2 && std::find(keep.begin(), keep.end(), fd) == keep.end()) {
        open.push_back(fd);
      }
    }
    ::closedir(dir);
  }
  for (int fd : open) {
    ::close(fd); // the listing's own descriptor is among them, closed already: EBADF
  }
}

std::vector<pid_t> children() {
  std::vector<pid_t> found;
  const pid_t self = ::getpid();
  if (DIR* dir = ::opendir("/proc")) {
    while (dirent* entry = ::readdir(dir)) {
      pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
      if (pid <= 0) {
        continue;
      }
      if (auto stat = proc_stat(pid); stat && stat->parent == self) {
        found.push_back(pid);
      }
    }
    ::closedir(dir);
  }
  return found;
}

/// Reap every child that has ended. False once there is no child left.
bool reap() {
  while (true) {
    pid_t pid = ::waitpid(-1, nullptr, WNOHANG);
    if (pid > 0) {
      continue;
    }
    return pid == 0 || errno != ECHILD;
  }
}

int ms_until(Clock::time_point when) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 24LL * 3600 * 1000));
}

/// plan.stop, then wait up to plan.stop_grace for the children to end; kill what is left.
void end_children(const WatchdogPlan& plan, int signals) {
  if (plan.stop) {
    plan.stop();
  }
  const auto deadline = Clock::now() + plan.stop_grace;
  while (reap() && Clock::now() < deadline) {
    pollfd p{signals, POLLIN, 0};
    if (::poll(&p, 1, std::min(ms_until(deadline), 100)) == 1) {
      signalfd_siginfo info{};
      [[maybe_unused]] ssize_t n = ::read(signals, &info, sizeof info);
    }
  }
  for (pid_t child : children()) {
    ::kill(child, SIGKILL);
  }
  while (::waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
  }
}

[[noreturn]] void watch(const Owner& owner, const WatchdogPlan& plan) {
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  sigaddset(&handled, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &handled, nullptr);
  int signals = ::signalfd(-1, &handled, SFD_CLOEXEC);
  const bool keeps_alive = plan.keep_alive && plan.keep_alive_every.count() > 0;
  auto next_keep_alive = Clock::now() + plan.keep_alive_every;
  while (reap()) {
    int timeout = -1;
    if (keeps_alive) {
      timeout = ms_until(next_keep_alive);
    }
    if (owner.fd() < 0 || signals < 0) {
      timeout = timeout < 0 ? static_cast<int>(k_owner_poll.count())
                            : std::min(timeout, static_cast<int>(k_owner_poll.count()));
    }
    pollfd fds[2] = {{owner.fd(), POLLIN, 0}, {signals, POLLIN, 0}};
    ::poll(fds, 2, timeout);
    bool terminate = false;
    if ((fds[1].revents & POLLIN) != 0) {
      signalfd_siginfo info{};
      while (::read(signals, &info, sizeof info) == sizeof info) {
        terminate = terminate || info.ssi_signo == SIGTERM;
        pollfd more{signals, POLLIN, 0};
        if (::poll(&more, 1, 0) != 1) {
          break;
        }
      }
    }
    if (terminate || owner.gone()) {
      end_children(plan, signals);
      break;
    }
    if (keeps_alive && Clock::now() >= next_keep_alive) {
      plan.keep_alive();
      next_keep_alive = Clock::now() + plan.keep_alive_every;
    }
  }
  ::_exit(0);
}

} // namespace

std::string run_watched(pid_t owner, const WatchdogPlan& plan, std::string& error) {
  Owner watched(owner);
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    error = std::string("no pipe: ") + std::strerror(errno);
    return plan.start();
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) {
    error = std::string("cannot fork: ") + std::strerror(errno);
    ::close(ready[0]);
    ::close(ready[1]);
    return plan.start();
  }
  if (pid == 0) {
    ::close(ready[0]);
    ::setsid();
    // Whatever plan.start leaves running, daemons that detach themselves included, is
    // re-parented here rather than to init: the watchdog knows them, and when they end.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    ::prctl(PR_SET_NAME, "kiln-cc watch");
    close_inherited({ready[1], watched.fd()});
    ::signal(SIGPIPE, SIG_IGN); // a caller gone before the answer must not end the watch
    std::string result = plan.start();
    std::fflush(stdout);
    std::fflush(stderr);
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3 && null >= 0; ++fd) {
      ::dup2(null, fd);
    }
    // Nor its working folder: a step's bind mount the watchdog sat in could not be unmounted
    // while it stops the server.
    [[maybe_unused]] int at_root = ::chdir("/");
    std::string_view left = result;
    while (!left.empty()) {
      ssize_t n = ::write(ready[1], left.data(), left.size());
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        break;
      }
      left.remove_prefix(static_cast<size_t>(n));
    }
    ::close(ready[1]);
    watch(watched, plan);
  }
  ::close(ready[1]);
  if (watched.fd() >= 0) {
    ::close(watched.fd());
  }
  std::string result;
  char buffer[4096];
  while (true) {
    ssize_t n = ::read(ready[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    result.append(buffer, static_cast<size_t>(n));
  }
  ::close(ready[0]);
  return result;
}

pid_t calling_shell() {
  pid_t shell = ::getppid();
  // A forked subshell never ran exec: it has its parent's program and arguments. Bounded, so a
  // chain of identical shells costs a few reads at most.
  for (int depth = 0; depth < 16; ++depth) {
    auto stat = proc_stat(shell);
    if (!stat || stat->parent <= 1) {
      break;
    }
    std::string program = proc_link(shell, "exe");
    std::string arguments = proc_text(shell, "cmdline");
    // What /proc does not show (another user's process under hidepid) proves nothing.
    if (program.empty() || arguments.empty() || program != proc_link(stat->parent, "exe") ||
        arguments != proc_text(stat->parent, "cmdline")) {
      break;
    }
    shell = stat->parent;
  }
  return shell;
}

} // namespace kiln::cc
