#include "compilecache/child_process.h"

#include <cerrno>
#include <cstdlib>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace kiln::cc {

namespace {

volatile sig_atomic_t g_child = 0;
void (*g_also)(int) = nullptr;

void forward_signal(int signal) {
  if (g_child > 0) {
    ::kill(g_child, signal);
  }
  if (g_also != nullptr) {
    g_also(signal);
  }
}

} // namespace

void forward_stop_signals(void (*also)(int signal)) {
  g_also = also;
  for (int signal : k_forwarded_signals) {
    struct sigaction current {};
    ::sigaction(signal, nullptr, &current);
    // A signal the build tool ignores (a background make ignores SIGINT) stays ignored, as it
    // would for the child.
    if (current.sa_handler == SIG_IGN) {
      continue;
    }
    struct sigaction action {};
    action.sa_handler = forward_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(signal, &action, nullptr);
  }
}

void set_child(pid_t child) {
  g_child = child;
}

[[noreturn]] void die_of(int signal) {
  rlimit core{};
  if (::getrlimit(RLIMIT_CORE, &core) == 0) {
    core.rlim_cur = 0;
    ::setrlimit(RLIMIT_CORE, &core);
  }
  ::signal(signal, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(signal);
  ::_exit(128 + signal); // a signal that does not terminate (none kills a compiler that way)
}

int exit_code_of(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    die_of(WTERMSIG(wait_status));
  }
  return WEXITSTATUS(wait_status);
}

int cannot_start_exit_code(int error) {
  return error == ENOENT ? 127 : 126;
}

} // namespace kiln::cc
