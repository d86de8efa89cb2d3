#pragma once

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "driver/record_fold.h"
#include "util/clock.h"

namespace kiln {

class Console;

/// The version of the event schema (docs/events.md); bump it on any change a reader could notice.
constexpr int k_events_schema = 2;

/// What happened in a run, in the words of docs/events.md.
enum class EventType {
  run_started,     // the run's id, chain, engine, host and selected stages
  stage_queued,    // a stage of the run, its lane and needs, before any starts
  stage_started,   // the scheduler started it: its gates and attempts follow
  attempt_started, // one engine invocation: its number, command and log
  step_started,    // the engine began a Dockerfile step of the attempt
  attempt_ended,   // its verdict, exit code, seconds and steps
  gate_verdict,    // a gate graded the stage's image or parents
  stage_ended,     // its status and outcome, seconds and image
  publish_ended,   // a publish target: published, held, blocked, failed or interrupted
  run_ended,       // the run's status and exit code: always the last event
  // The record's parts as they change: the manifest is their fold (record_fold.h).
  run_record,     // the run's own fields
  stage_record,   // one stage's record, attempts, gates and all
  publish_record, // one publish target's record
};

std::string_view event_type_name(EventType type);

/// One line of events.jsonl: the header (schema, seq, time, t, type), then `fields` in order.
std::string event_line(long seq, std::string_view time, double t, std::string_view type,
                       const nlohmann::ordered_json& fields);

/// A run's events, each one JSON line: `{"schema":2,"seq":N,"time":"<UTC>","t":<seconds since the
/// run started>,"type":"stage.started","stage":"base",...}`. emit() only queues the event; one
/// writer thread appends it to `events.jsonl` in the run's folder, folds the record events into
/// the manifest and hands that to `on_record` (the one writer of manifest.json), and, with
/// --progress=json, hands the lines to a console of its own (which never waits for its reader
/// either). The destructor writes whatever is queued.
class EventLog {
public:
  /// Called on the writer thread with the manifest text after each batch of events that held a
  /// record event, and whether the record says the run ended.
  using RecordWriter = std::function<void(const std::string& manifest, bool ended)>;

  /// `json_out` (nullable): where the events go as JSON lines besides the file.
  EventLog(std::filesystem::path file, const Clock& clock, Console* json_out,
           RecordWriter on_record = {});
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  /// Record `type` with `fields` (an object, its keys in the order given; `stage` for the
  /// events of one stage).
  void emit(EventType type, nlohmann::ordered_json fields = nlohmann::ordered_json::object());

  /// Wait until every event emitted so far is written.
  void flush();

  /// The first write of events.jsonl that failed, "" while none did.
  std::string write_error() const;

private:
  struct Queued {
    std::string line;
    bool record = false; // a record event: the fold takes it
  };

  void write_lines();
  /// Write one batch: events.jsonl, the manifest when the batch changed the record, the JSON
  /// console. The write error, "" when none.
  std::string write_batch(const std::deque<Queued>& lines);

  std::filesystem::path m_path;
  const Clock& m_clock;
  Console* m_json_out;
  std::chrono::steady_clock::time_point m_start;
  std::FILE* m_file = nullptr;
  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  std::condition_variable m_written;
  RecordWriter m_on_record;
  RecordFold m_fold; // the writer thread's alone
  std::deque<Queued> m_queued;
  bool m_writing = false;
  bool m_stopping = false;
  long m_seq = 0;
  std::string m_error;
  std::thread m_writer;
};

} // namespace kiln
