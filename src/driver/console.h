#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "driver/records.h"
#include "engine/engine.h"

namespace kiln {

/// What the console shows about a stage being built.
struct StageView {
  int index = 0; // 1-based position in the run order
  int count = 0;
  std::string name; // the key of every call about this stage
  int attempt = 1;
  int attempts = 1;
  std::optional<double> eta_seconds; // how long the last successful build of it took
  std::string action = "building";   // or "publishing"
};

/// kiln's voice on the terminal. Live mode (a TTY) keeps a block of redrawn lines, one per
/// running stage, ticking the elapsed time, with finished stages and notes scrolling above it;
/// plain mode (logs, CI) prints one line per event instead, each prefixed `[stage]`. Safe from
/// any thread: stages build at once.
///
/// No call ever waits for the terminal: each one queues its text, and a writer thread of the
/// console's own writes it with no lock held. A terminal that stops reading (Ctrl-S, a CI log
/// pipe nobody drains) stalls that thread alone; what is queued past k_queue_limit is dropped,
/// counted, and said once the terminal takes text again. The destructor waits until the queue
/// is written, so the summary reaches a reader that comes back.
class Console {
public:
  Console(std::FILE* out, bool live);
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  /// A line of kiln's own, prefixed `kiln: `.
  void note(const std::string& message);
  /// Whole lines as they are (the JSON lines of --progress=json): queued like every other text,
  /// and never dropped.
  void raw(const std::string& lines);
  void stage_started(const StageView& view);
  void stage_progress(const std::string& stage, const BuildProgress& progress);
  /// The build printed something: the live line counts the step's silence from now.
  void stage_output(const std::string& stage);
  /// Close the stage's live line with a final one.
  void stage_finished(const std::string& stage, const std::string& outcome);
  /// The last lines of a failed attempt's output and where the whole of it is.
  void failure_tail(const std::vector<std::string>& lines, const std::string& log_path);
  /// The error lines the failed step printed anywhere in its output, before the tail: at -j16
  /// the first error scrolls far above the last lines.
  void failure_errors(const std::string& stage, const std::string& step,
                      const std::vector<std::string>& lines, long total);
  void summary(const RunRecord& run, const std::filesystem::path& run_dir);
  /// Wait until everything queued so far is written: for a reader that must see it now.
  void flush();

  /// Text queued beyond this is dropped (the run's record keeps everything).
  static constexpr size_t k_queue_limit = 256 * 1024;

private:
  using Clock = std::chrono::steady_clock;
  struct Running {
    StageView view;
    BuildProgress progress;
    Clock::time_point start;
    Clock::time_point last_output;
  };
  std::string status_line_locked(const Running& stage) const;
  Running* find_locked(const std::string& stage);
  /// Queue `text` (whole lines) to be printed above the live block; `keep` text (the summary)
  /// is never dropped.
  void print_locked(const std::string& text, bool keep = false);
  /// The live block wants drawing again.
  void redraw_locked();
  /// What the writer puts on the terminal next: the dropped-lines note, the queued text and, live,
  /// the block drawn again below it. Empties the queue.
  std::string next_frame_locked();
  void write_out(const std::string& text);
  /// The writer thread: frames out, one at a time, with m_mutex let go while each is written.
  void write_frames();

  std::FILE* m_out;
  bool m_live;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  std::condition_variable m_written; // the writer finished a frame
  bool m_writing = false;            // a frame is being written, with m_mutex let go
  bool m_stopping = false;
  std::vector<Running> m_running; // in the order they started
  std::string m_queued;           // whole lines waiting for the writer
  bool m_redraw = false;          // the live block changed since it was drawn
  size_t m_dropped = 0;           // lines dropped since the terminal last took text
  size_t m_drawn = 0;             // lines of the live block now on the terminal (the writer's)
  std::thread m_writer;
};

/// The summary's line for what a run published: its status, each image, what did not run.
std::string publish_line(const PublishRecord& published);

} // namespace kiln
