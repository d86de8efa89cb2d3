#include "util/cancel.h"

#include <atomic>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

namespace kiln {

namespace {

// Lock-free, so the handler may write it; atomic, as the run's threads read it.
std::atomic<int> g_first_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

void on_signal(int signal) {
  int none = 0;
  g_first_signal.compare_exchange_strong(none, signal); // the first one is kept
  interrupt_token().cancel();
}

} // namespace

CancelToken::CancelToken() {
  if (::pipe2(m_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    m_pipe[0] = m_pipe[1] = -1;
  }
}

CancelToken::~CancelToken() {
  for (int fd : m_pipe) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
}

void CancelToken::cancel() {
  int level = m_level.load();
  while (level < static_cast<int>(CancelLevel::kill) &&
         !m_level.compare_exchange_weak(level, level + 1)) {
  }
  if (m_pipe[1] >= 0) {
    // The pipe is never drained, so one byte keeps it readable for every poller; a second
    // byte wakes a poller that waits on it again after the first.
    char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(m_pipe[1], &byte, 1);
  }
}

bool CancelToken::sleep_for(std::chrono::milliseconds duration) const {
  auto deadline = std::chrono::steady_clock::now() + duration;
  while (!cancelled()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return true;
    }
    // poll takes an int of milliseconds: a day-long wait goes in slices, never wraps.
    pollfd fd{m_pipe[0], POLLIN, 0};
    ::poll(&fd, m_pipe[0] >= 0 ? 1 : 0, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
  }
  return false;
}

CancelToken& interrupt_token() {
  // Never destroyed: a signal may arrive while static destructors run.
  static CancelToken* token = new CancelToken;
  return *token;
}

void install_interrupt_handlers() {
  static bool installed = false;
  if (installed) {
    return;
  }
  installed = true;
  interrupt_token(); // made now, not inside the handler
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  // A closed terminal (SIGHUP), Ctrl-\ (SIGQUIT) and a kill (SIGTERM) end the run as Ctrl-C
  // does, recorded under their own names. A reader of kiln's output that went away must not
  // end it at all: SIGPIPE is ignored and a write to it fails with EPIPE instead.
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    ::sigaction(signal, &action, nullptr);
  }
  ::signal(SIGPIPE, SIG_IGN);
}

int interrupt_signal() {
  return g_first_signal.load();
}

std::string interrupt_signal_name() {
  int first = g_first_signal.load();
  const char* name = first != 0 ? sigabbrev_np(first) : nullptr;
  return name != nullptr ? std::string("SIG") + name : std::string();
}

} // namespace kiln
