#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace kiln {

/// A mutex that knows which thread holds it: a crash handler running on some thread must tell
/// "I hold the record already" from "another thread does, wait for it". Lockable, for
/// std::unique_lock and std::condition_variable_any.
class OwnedMutex {
public:
  void lock() {
    m_mutex.lock();
    m_owner = std::this_thread::get_id();
  }
  bool try_lock() {
    if (!m_mutex.try_lock()) {
      return false;
    }
    m_owner = std::this_thread::get_id();
    return true;
  }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    if (!m_mutex.try_lock_for(timeout)) {
      return false;
    }
    m_owner = std::this_thread::get_id();
    return true;
  }
  void unlock() {
    m_owner = std::thread::id();
    m_mutex.unlock();
  }
  bool held_here() const { return m_owner.load() == std::this_thread::get_id(); }

private:
  std::timed_mutex m_mutex;
  std::atomic<std::thread::id> m_owner{};
};

} // namespace kiln
