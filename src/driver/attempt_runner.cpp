#include "driver/attempt_runner.h"

#include <atomic>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "compilecache/stats_line.h"
#include "util/byte_queue.h"
#include "util/cancel.h"

namespace kiln {

namespace {

// BuildKit's note where it stopped keeping a step's output (util/progress/logs in v0.11.6):
// `#5 0.073 [output clipped, log limit 2KiB reached]`.
constexpr std::string_view k_clip_note = "[output clipped, log limit ";
constexpr size_t k_clip_lines_kept = 20;

void keep_last(std::deque<std::string>& lines, std::string_view line, size_t count) {
  lines.emplace_back(line);
  if (lines.size() > count) {
    lines.pop_front();
  }
}

constexpr size_t k_recent_bytes = 8192;

/// The last line `bytes` ended with a newline, without it; "" when there is none.
std::string last_complete_line(std::string_view bytes) {
  size_t end = bytes.rfind('\n');
  if (end == std::string_view::npos) {
    return {};
  }
  std::string_view before = bytes.substr(0, end);
  size_t start = before.rfind('\n');
  std::string_view line = before.substr(start == std::string_view::npos ? 0 : start + 1);
  if (!line.empty() && line.back() == '\r') {
    line.remove_suffix(1);
  }
  return std::string(line);
}

/// Its thread takes what the engine's read loop queued and hands it to `take`, until the queue
/// is closed; joined on every way out. What `take` throws is kept for the caller, and from then
/// on the queue is only drained.
class QueueReader {
public:
  QueueReader(ByteQueue& queue, std::function<void(const ByteQueue::Taken&)> take)
      : m_queue(queue), m_thread([this, take = std::move(take)] {
          while (auto taken = m_queue.pop()) {
            if (m_failed) {
              continue;
            }
            try {
              take(*taken);
            } catch (...) {
              m_error = std::current_exception();
              m_failed = true;
            }
          }
        }) {}
  ~QueueReader() { finish(); }
  QueueReader(const QueueReader&) = delete;
  QueueReader& operator=(const QueueReader&) = delete;

  bool failed() const { return m_failed; }
  /// Everything queued taken.
  void finish() {
    if (m_thread.joinable()) {
      m_queue.close();
      m_thread.join();
    }
  }
  /// What `take` threw, if it did; once finished.
  void rethrow() const {
    if (m_error) {
      std::rethrow_exception(m_error);
    }
  }

private:
  ByteQueue& m_queue;
  std::atomic<bool> m_failed{false};
  std::exception_ptr m_error;
  std::thread m_thread;
};

} // namespace

AttemptOutcome run_attempt(const Engine& engine, const BuildRequest& request, RecordLog& log,
                           const ProgressListener& on_progress, const BuildLimits& limits,
                           const OutputListener& on_output) {
  AttemptOutcome outcome;
  if (!request.metadata.empty()) {
    // buildctl writes its metadata file but does not create the folder for it.
    std::error_code ignored;
    std::filesystem::create_directories(request.metadata.parent_path(), ignored);
  }
  std::unique_ptr<BuildOutput> output = engine.read_output();
  std::deque<std::string> tail;
  LineSplitter lines([&](std::string_view line) {
    keep_last(tail, line, k_console_tail_lines);
    if (output->feed(line) && on_progress) {
      on_progress(output->progress());
    }
    if (line.find(k_clip_note) != std::string_view::npos &&
        outcome.clip_lines.size() < k_clip_lines_kept) {
      outcome.clip_lines.emplace_back(line.substr(0, 500));
    }
    // Found anywhere in the line: an engine may prefix what a RUN printed.
    if (size_t at = line.find(cc::k_stats_prefix); at != std::string_view::npos) {
      if (auto stats = cc::parse_stats_line(line.substr(at))) {
        outcome.compile = outcome.compile.value_or(CompileReport{});
        outcome.compile->add(*stats);
      }
    }
  });
  // The last bytes read, kept by the read loop itself: when a limit stops the build, the line
  // it printed last is known there, whatever the queue's reader has got to.
  std::string recent;
  BuildLimits stoppable = limits;
  stoppable.on_stop = [&] {
    outcome.last_line_at_stop = last_complete_line(recent);
    if (limits.on_stop) {
      limits.on_stop();
    }
  };
  // The engine's read loop only queues what it reads: the log's disk, the readers and the
  // console may be slow, and the loop's stall and time limits must not wait for them.
  ByteQueue queue(k_output_queue_bytes, k_output_queue_wait);
  QueueReader reader(queue, [&](const ByteQueue::Taken& taken) {
    log.write(taken.bytes); // the whole output, byte for byte, before anything interprets it
    lines.feed(taken.bytes);
    if (taken.dropped_after > 0) {
      log.write(fmt::format("\n[kiln] {} byte(s) of the engine's output were dropped here: its "
                            "log and readers fell {} MiB behind\n",
                            taken.dropped_after, k_output_queue_bytes >> 20));
    }
    if (on_output) {
      on_output();
    }
  });
  try {
    outcome.exit = engine.build(
        request,
        [&](std::string_view chunk) {
          if (reader.failed()) {
            // Stops the build (its process group is killed); the reader's own error is what
            // reaches the caller.
            throw std::runtime_error("the reader of the build's output failed");
          }
          recent.append(chunk);
          if (recent.size() > k_recent_bytes) {
            recent.erase(0, recent.size() - k_recent_bytes);
          }
          queue.push(chunk);
        },
        stoppable);
  } catch (...) {
    reader.finish();
    reader.rethrow();
    throw;
  }
  reader.finish();
  reader.rethrow();
  outcome.dropped_bytes = queue.dropped();
  lines.finish();
  outcome.progress = output->progress();
  outcome.evidence = output->evidence();
  outcome.engine_evidence = output->engine_evidence();
  outcome.finished_build_stages = output->finished_build_stages();
  outcome.steps = output->steps();
  if (!outcome.exit.spawn_error.empty()) {
    log.write("kiln: " + outcome.exit.spawn_error + "\n");
    keep_last(tail, outcome.exit.spawn_error, k_console_tail_lines);
    outcome.evidence.push_back(outcome.exit.spawn_error);
    outcome.engine_evidence.push_back(outcome.exit.spawn_error);
  }
  outcome.tail.assign(tail.begin(), tail.end());
  outcome.output = std::move(output);
  return outcome;
}

} // namespace kiln
