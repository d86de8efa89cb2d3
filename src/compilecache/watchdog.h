#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <sys/types.h>

namespace kiln::cc {

/// What a watchdog does on behalf of the process it watches (its owner).
struct WatchdogPlan {
  /// Starts what is watched. Runs first, in the watchdog, with the caller's standard streams;
  /// what it returns is what run_watched returns.
  std::function<std::string()> start;
  /// Runs every `keep_alive_every` while the owner lives; zero: never.
  std::function<void()> keep_alive;
  std::chrono::milliseconds keep_alive_every{0};
  /// Runs once the owner has ended (or the watchdog got SIGTERM): asks what start left running
  /// to end. Whatever still runs `stop_grace` later is killed.
  std::function<void()> stop;
  std::chrono::milliseconds stop_grace{10000};
};

/// Run plan.start in a watchdog: a process of its own, in a session of its own (a Ctrl-C or a
/// kill of the caller's process group leaves it be), that outlives the caller and watches
/// `owner` for as long as anything plan.start started still runs. Whatever that is, a daemon
/// that detached included, is its child: the watchdog is their subreaper. When `owner` ends,
/// however it ends (SIGKILL included), the watchdog runs plan.stop and kills what is left.
/// Returns what plan.start returned, once it has, and once the watchdog holds none of the
/// caller's standard streams (a shell reading `$(kiln-cc session start)` waits for every
/// writer). When no watchdog can run, `error` says why and plan.start runs here, unwatched.
std::string run_watched(pid_t owner, const WatchdogPlan& plan, std::string& error);

/// The shell that ran this process: its parent, or, when the parent is a subshell forked only
/// to run it (a `$(...)` that did not exec), that subshell's own shell.
pid_t calling_shell();

} // namespace kiln::cc
