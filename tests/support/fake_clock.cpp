#include "fake_clock.h"

namespace kiln::testing {

namespace {

// 2026-12-02T14:00:00Z: records made under a fake clock read the same on every machine.
const std::chrono::system_clock::time_point k_epoch{std::chrono::seconds(1796220000)};

} // namespace

std::chrono::system_clock::time_point FakeClock::wall() const {
  std::lock_guard lock(m_mutex);
  return k_epoch + m_elapsed;
}

std::chrono::steady_clock::time_point FakeClock::steady() const {
  std::lock_guard lock(m_mutex);
  return std::chrono::steady_clock::time_point(m_elapsed);
}

bool FakeClock::sleep_for(std::chrono::milliseconds duration, const CancelToken& cancel) const {
  std::lock_guard lock(m_mutex);
  m_sleeps.push_back(duration);
  if (cancel.cancelled()) {
    return false;
  }
  m_elapsed += duration;
  return true;
}

void FakeClock::advance(std::chrono::milliseconds duration) const {
  std::lock_guard lock(m_mutex);
  m_elapsed += duration;
}

std::vector<std::chrono::milliseconds> FakeClock::sleeps() const {
  std::lock_guard lock(m_mutex);
  return m_sleeps;
}

} // namespace kiln::testing
