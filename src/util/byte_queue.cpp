#include "util/byte_queue.h"

namespace kiln {

bool ByteQueue::push(std::string_view chunk) {
  {
    std::unique_lock lock(m_mutex);
    // A chunk larger than the whole queue goes in alone.
    auto fits = [&] { return m_waiting.empty() || m_waiting.size() + chunk.size() <= m_capacity; };
    // Once a chunk is dropped, so is every later one until the reader takes what waits: the
    // bytes missing are one gap, right after what it takes.
    if (m_dropped_since_taken > 0 || !m_room.wait_for(lock, m_max_wait, fits)) {
      m_dropped_since_taken += chunk.size();
      m_dropped += chunk.size();
      return false;
    }
    m_waiting.append(chunk);
  }
  m_ready.notify_one();
  return true;
}

void ByteQueue::close() {
  {
    std::lock_guard lock(m_mutex);
    m_closed = true;
  }
  m_ready.notify_all();
}

std::optional<ByteQueue::Taken> ByteQueue::pop() {
  std::unique_lock lock(m_mutex);
  m_ready.wait(lock, [&] { return !m_waiting.empty() || m_dropped_since_taken > 0 || m_closed; });
  if (m_waiting.empty() && m_dropped_since_taken == 0) {
    return std::nullopt;
  }
  Taken taken{std::move(m_waiting), m_dropped_since_taken};
  m_waiting.clear();
  m_dropped_since_taken = 0;
  m_room.notify_all();
  return taken;
}

uint64_t ByteQueue::dropped() const {
  std::lock_guard lock(m_mutex);
  return m_dropped;
}

} // namespace kiln
