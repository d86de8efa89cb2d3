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
  case EventType::run_record:
    return "run.record";
  case EventType::stage_record:
    return "stage.record";
  case EventType::publish_record:
    return "publish.record";
  }
  return "unknown";
}

std::string event_line(long seq, std::string_view time, double t, std::string_view type,
                       const nlohmann::ordered_json& fields) {
  std::string line = fmt::format(R"({{"schema":{},"seq":{},"time":"{}","t":{},"type":"{}")",
                                 k_events_schema, seq, time, std::round(t * 1000) / 1000, type);
  for (const auto& [key, value] : fields.items()) {
    line += ',';
    line += nlohmann::json(key).dump();
    line += ':';
    // Engine output is not always UTF-8: what is invalid is replaced, never a lost event.
    line += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return line + "}\n";
}

EventLog::EventLog(std::filesystem::path file, const Clock& clock, Console* json_out,
                   RecordWriter on_record)
    : m_path(std::move(file)), m_clock(clock), m_json_out(json_out), m_start(clock.steady()),
      m_on_record(std::move(on_record)) {
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

void EventLog::emit(EventType type, nlohmann::ordered_json fields) {
  bool record = is_record_event(event_type_name(type));
  std::lock_guard lock(m_mutex);
  // Read under the lock: the number orders the file, and the time must not go back with it.
  double t = std::chrono::duration<double>(m_clock.steady() - m_start).count();
  std::string time = utc_iso8601(m_clock.wall());
  // The writer takes the whole queue at once: only an empty queue means it may be waiting.
  if (m_queued.empty()) {
    m_wake.notify_one();
  }
  m_queued.push_back({event_line(++m_seq, time, t, event_type_name(type), fields), record});
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
    std::deque<Queued> lines;
    lines.swap(m_queued);
    m_writing = true;
    lock.unlock();
    std::string error;
    try {
      error = write_batch(lines);
    } catch (const std::exception& e) {
      // Out of memory, most likely: the batch is lost, the next may fit, and the run says so.
      error = fmt::format("{}: {}", m_path.string(), e.what());
    }
    lock.lock();
    m_writing = false;
    if (m_error.empty()) {
      m_error = std::move(error);
    }
    m_written.notify_all();
  }
}

std::string EventLog::write_batch(const std::deque<Queued>& lines) {
  std::string text;
  bool record = false;
  for (const auto& queued : lines) {
    text += queued.line;
    if (queued.record) {
      record = true;
      // A line kiln made itself: it always folds.
      (void)m_fold.apply_line(queued.line);
    }
  }
  std::string error;
  if (m_file != nullptr && (std::fwrite(text.data(), 1, text.size(), m_file) != text.size() ||
                            std::fflush(m_file) != 0)) {
    error = fmt::format("{}: {}", m_path.string(), std::strerror(errno));
    std::clearerr(m_file);
  }
  // After the events: a manifest never holds what events.jsonl does not.
  if (record && m_on_record) {
    m_on_record(m_fold.manifest(), m_fold.ended());
  }
  if (m_json_out != nullptr) {
    m_json_out->raw(text);
  }
  return error;
}

} // namespace kiln
