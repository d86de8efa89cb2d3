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
class Console {
public:
  Console(std::FILE* out, bool live);
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  /// A line of kiln's own, prefixed `kiln: `.
  void note(const std::string& message);
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
  /// Print `text` (whole lines) above the live block, which is drawn again below it.
  void print_locked(const std::string& text);
  void redraw_locked();
  void clear_block_locked();
  void write_out(const std::string& text);
  void tick();

  std::FILE* m_out;
  bool m_live;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stopping = false;
  std::vector<Running> m_running; // in the order they started
  size_t m_drawn = 0;             // lines of the live block now on the terminal
  std::thread m_ticker;
};

/// The summary's line for what a run published: its status, each image, what did not run.
std::string publish_line(const PublishRecord& published);

} // namespace kiln
