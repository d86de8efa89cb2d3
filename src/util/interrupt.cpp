#include "util/interrupt.h"

#include <atomic>
#include <csignal>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

namespace kiln {

namespace {

int g_pipe[2] = {-1, -1};
volatile std::sig_atomic_t g_signal = 0;

void on_signal(int signal) {
  if (g_signal == 0) {
    g_signal = signal;
    char byte = 1;
    // The pipe is never drained, so one byte keeps it readable for every poller.
    [[maybe_unused]] ssize_t n = ::write(g_pipe[1], &byte, 1);
  }
}

} // namespace

void install_interrupt_handlers() {
  if (g_pipe[0] >= 0) {
    return;
  }
  if (::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return;
  }
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

int interrupt_fd() {
  return g_pipe[0];
}

int interrupt_signal() {
  return g_signal;
}

std::string interrupt_signal_name() {
  const char* name = g_signal != 0 ? sigabbrev_np(g_signal) : nullptr;
  return name != nullptr ? std::string("SIG") + name : std::string();
}

bool sleep_unless_interrupted(std::chrono::milliseconds duration) {
  pollfd fd{g_pipe[0], POLLIN, 0};
  int ready = ::poll(&fd, g_pipe[0] >= 0 ? 1 : 0, static_cast<int>(duration.count()));
  return !(ready > 0 || g_signal != 0);
}

} // namespace kiln
