#pragma once

#include <atomic>
#include <chrono>
#include <string>

namespace kiln {

/// How far a cancellation has gone. The first request stops processes politely (SIGINT to
/// their group, SIGKILL once a grace period has passed); the second kills them at once.
enum class CancelLevel { none = 0, stop = 1, kill = 2 };

/// A cancellation every process kiln starts watches. Its descriptor becomes readable at the
/// first cancel() and stays readable, so any number of pollers notice it without a lock.
/// cancel() is async-signal-safe: the interrupt handler calls it.
class CancelToken {
public:
  CancelToken();
  ~CancelToken();
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  /// Each call raises the level by one, up to CancelLevel::kill.
  void cancel();
  CancelLevel level() const { return static_cast<CancelLevel>(m_level.load()); }
  bool cancelled() const { return level() != CancelLevel::none; }
  /// Readable once cancelled; -1 when no pipe could be made (the level still works).
  int fd() const { return m_pipe[0]; }

  /// Sleep for `duration` unless cancelled first. Returns false when cancelled.
  bool sleep_for(std::chrono::milliseconds duration) const;

private:
  int m_pipe[2] = {-1, -1};
  std::atomic<int> m_level{0};
};

/// The token SIGINT, SIGTERM, SIGHUP and SIGQUIT cancel: a second signal escalates to killing
/// every process group kiln started. Every process kiln starts watches it unless handed another
/// token.
CancelToken& interrupt_token();

/// Route SIGINT, SIGTERM, SIGHUP and SIGQUIT into interrupt_token(), so the run notices them at
/// its next poll instead of dying mid-write, and ignore SIGPIPE (a write to a reader that went
/// away fails with EPIPE instead of killing kiln).
void install_interrupt_handlers();

/// The first signal that arrived, 0 when none.
int interrupt_signal();

/// "SIGINT", "SIGHUP", ... once one arrived, "" before.
std::string interrupt_signal_name();

} // namespace kiln
