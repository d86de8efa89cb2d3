#pragma once

#include <chrono>
#include <mutex>
#include <vector>

#include "util/clock.h"

namespace kiln::testing {

/// A clock that moves only when told to or when something sleeps on it: a run's cooldowns
/// take no time, and every duration a run records is the one the test scripted.
class FakeClock : public Clock {
public:
  std::chrono::system_clock::time_point wall() const override;
  std::chrono::steady_clock::time_point steady() const override;
  /// Moves the clock by `duration` at once; false (and no move) when `cancel` was cancelled.
  bool sleep_for(std::chrono::milliseconds duration, const CancelToken& cancel) const override;

  void advance(std::chrono::milliseconds duration) const;
  /// Every sleep asked for, in order.
  std::vector<std::chrono::milliseconds> sleeps() const;

private:
  mutable std::mutex m_mutex;
  mutable std::chrono::milliseconds m_elapsed{0};
  mutable std::vector<std::chrono::milliseconds> m_sleeps;
};

} // namespace kiln::testing
