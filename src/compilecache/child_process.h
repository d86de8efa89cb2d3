#pragma once

#include <array>
#include <csignal>

#include <sys/types.h>

namespace kiln::cc {

/// kiln-cc standing in for a child it runs (the compiler, sccache, the command of `session
/// run`): the stop signals reach the child, and the child's end becomes kiln-cc's own, so the
/// build tool sees what it would have seen from the child itself.

/// The signals a build tool stops a process with. Passed on to the child, because a build tool
/// or `timeout` may signal kiln-cc alone, not its process group.
constexpr std::array<int, 4> k_forwarded_signals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

/// From now on, pass k_forwarded_signals on to the current child (set_child); a signal the
/// caller's parent ignores stays ignored, as it would for the child. `also` (async-signal-safe,
/// may be null) is called with each signal too.
void forward_stop_signals(void (*also)(int signal) = nullptr);

/// The child the stop signals go to; 0 for none. Set it while the signals are blocked, between
/// starting the child and unblocking them, so that none is lost.
void set_child(pid_t child);

/// Die of `signal` the way the child did (core dumps off: the child's crash is not kiln-cc's).
[[noreturn]] void die_of(int signal);

/// The exit code for a child's wait status; dies of the child's signal instead when one killed
/// it.
int exit_code_of(int wait_status);

/// What a shell exits with when it cannot start a program: 127 when there is none, else 126.
int cannot_start_exit_code(int error);

} // namespace kiln::cc
