#pragma once

#include <atomic>
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

/// What the console shows about the stage being built.
struct StageView {
  int index = 0; // 1-based position in this run
  int count = 0;
  std::string name;
  int attempt = 1;
  int attempts = 1;
  std::optional<double> eta_seconds; // how long the last successful build of it took
};

/// kiln's voice on the terminal. Live mode (a TTY) keeps one redrawn line per running stage,
/// ticking the elapsed time; plain mode (logs, CI) prints one line per event instead.
class Console {
public:
  Console(std::FILE* out, bool live);
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  /// A line of kiln's own, prefixed `kiln: `.
  void note(const std::string& message);
  void stage_started(const StageView& view);
  void stage_progress(const BuildProgress& progress);
  /// The build printed something: the live line counts the step's silence from now.
  void stage_output();
  /// Close the stage's live line with a final one.
  void stage_finished(const std::string& outcome);
  /// The last lines of a failed attempt's output and where the whole of it is.
  void failure_tail(const std::vector<std::string>& lines, const std::string& log_path);
  void summary(const RunRecord& run, const std::filesystem::path& run_dir);

private:
  using Clock = std::chrono::steady_clock;
  std::string status_line_locked() const;
  void redraw_locked();
  void clear_line_locked();
  void tick();

  std::FILE* m_out;
  bool m_live;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stopping = false;
  std::optional<StageView> m_stage;
  BuildProgress m_progress;
  Clock::time_point m_stage_start;
  std::atomic<Clock::rep> m_last_output{0}; // steady ticks; atomic: set for every chunk
  std::thread m_ticker;
};

} // namespace kiln
