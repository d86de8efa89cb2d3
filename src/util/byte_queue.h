#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

/// Chunks of bytes from one thread that must not wait long (a process's read loop, whose stall
/// and time limits run on its clock) to one that may (a log on a slow disk, parsers). push()
/// waits at most `max_wait` for room: a reader that keeps up slows the writer down as a pipe
/// would, and one that is stuck costs it a drop, counted, not its clock. After a drop every
/// chunk is dropped until the reader takes what waits, and the reader is told how much went
/// missing right after what it takes.
class ByteQueue {
public:
  ByteQueue(size_t capacity, std::chrono::milliseconds max_wait)
      : m_capacity(capacity), m_max_wait(max_wait) {}

  /// Queue `chunk`, or drop it when `capacity` bytes still wait after `max_wait`. Returns false
  /// on a drop.
  bool push(std::string_view chunk);
  /// No more pushes: pop() returns what waits, then nothing.
  void close();

  struct Taken {
    std::string bytes;
    uint64_t dropped_after = 0; // bytes dropped right after these, before the next taken
  };
  /// The next chunk, waiting for one; nullopt once closed and empty.
  std::optional<Taken> pop();

  /// Every byte dropped so far.
  uint64_t dropped() const;

private:
  const size_t m_capacity;
  const std::chrono::milliseconds m_max_wait;
  mutable std::mutex m_mutex;
  std::condition_variable m_ready; // something to take
  std::condition_variable m_room;  // room to push
  std::string m_waiting;           // every pushed chunk, in order, not yet taken
  uint64_t m_dropped_since_taken = 0;
  uint64_t m_dropped = 0;
  bool m_closed = false;
};

} // namespace kiln
