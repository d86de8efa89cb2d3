#pragma once

#include <chrono>

#include "util/cancel.h"

namespace kiln {

/// Where a run reads the time and waits: the system's clocks, or a test's, so a test of retries
/// and cooldowns neither waits for them nor depends on how fast the machine is.
class Clock {
public:
  virtual ~Clock() = default;
  /// The time of day, for records.
  virtual std::chrono::system_clock::time_point wall() const = 0;
  /// A clock that never jumps, for durations.
  virtual std::chrono::steady_clock::time_point steady() const = 0;
  /// Wait for `duration` unless `cancel` is cancelled first. False when it was.
  virtual bool sleep_for(std::chrono::milliseconds duration, const CancelToken& cancel) const = 0;
};

/// The system's clocks.
const Clock& real_clock();

} // namespace kiln
