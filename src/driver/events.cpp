#include "driver/events.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "driver/console.h"
#include "util/time.h"

namespace kiln {

std::string_view event_type_name(EventType type) {
  switch (type) {
  case EventType::run_started:
    return "run.started";
  case EventType::stage_queued:
    return "stage.queued";
  case EventType::stage_started:
    return "stage.started";
  case EventType::attempt_started:
    return "attempt.started";
  case EventType::step_started:
    return "step.started";
  case EventType::attempt_ended:
    return "attempt.ended";
  case EventType::gate_verdict:
    return "gate.verdict";
  case EventType::stage_ended:
    return "stage.ended";
  case EventType::publish_ended:
    return "publish.ended";
  case EventType::run_ended:
    return "run.ended";
  }
  return "unknown";
}

EventLog::EventLog(std::filesystem::path file, const Clock& clock, Console* json_out)
    : m_path(std::move(file)), m_clock(clock), m_json_out(json_out), m_start(clock.steady()) {
  m_file = std::fopen(m_path.c_str(), "a");
  if (m_file == nullptr) {
    m_error = fmt::format("{}: {}", m_path.string(), std::strerror(errno));
  }
  m_writer = std::thread([this] { write_lines(); });
}

EventLog::~EventLog() {
  {
    std::lock_guard lock(m_mutex);
    m_stopping = true;
  }
  m_wake.notify_all();
  m_writer.join();
  if (m_file != nullptr) {
    std::fclose(m_file);
  }
}

void EventLog::emit(EventType type, nlohmann::json fields) {
  double t = std::chrono::duration<double>(m_clock.steady() - m_start).count();
  // Made whole before the lock; under it only the number that orders the file.
  std::string rest = fmt::format(R"("time":"{}","t":{},"type":"{}")", utc_iso8601(m_clock.wall()),
                                 std::round(t * 1000) / 1000, event_type_name(type));
  for (const auto& [key, value] : fields.items()) {
    rest += ',';
    rest += nlohmann::json(key).dump();
    rest += ':';
    rest += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::lock_guard lock(m_mutex);
  // The writer takes the whole queue at once: only an empty queue means it may be waiting.
  if (m_queued.empty()) {
    m_wake.notify_one();
  }
  m_queued.push_back(
      fmt::format(R"({{"schema":{},"seq":{},{}}})", k_events_schema, ++m_seq, rest) + "\n");
}

void EventLog::flush() {
  std::unique_lock lock(m_mutex);
  m_written.wait(lock, [&] { return m_queued.empty() && !m_writing; });
}

std::string EventLog::write_error() const {
  std::lock_guard lock(m_mutex);
  return m_error;
}

void EventLog::write_lines() {
  std::unique_lock lock(m_mutex);
  for (;;) {
    m_wake.wait(lock, [&] { return m_stopping || !m_queued.empty(); });
    if (m_queued.empty()) {
      return; // stopping, and everything is written
    }
    std::deque<std::string> lines;
    lines.swap(m_queued);
    m_writing = true;
    lock.unlock();
    std::string text;
    for (const auto& line : lines) {
      text += line;
    }
    std::string error;
    if (m_file != nullptr && (std::fwrite(text.data(), 1, text.size(), m_file) != text.size() ||
                              std::fflush(m_file) != 0)) {
      error = fmt::format("{}: {}", m_path.string(), std::strerror(errno));
      std::clearerr(m_file);
    }
    if (m_json_out != nullptr) {
      m_json_out->raw(text);
    }
    lock.lock();
    m_writing = false;
    if (m_error.empty()) {
      m_error = std::move(error);
    }
    m_written.notify_all();
  }
}

} // namespace kiln
