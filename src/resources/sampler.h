#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <tl/expected.hpp>

#include "resources/host_stats.h"
#include "util/fs.h"

namespace kiln {

/// One line of the resources CSV: the host at one instant, tagged with the build phase.
struct ResourceRow {
  std::string time; // UTC ISO-8601, `2026-12-02T14:03:00Z`
  std::string phase;
  double cpu_pct = 0;
  double free_ram_gb = 0;  // MemAvailable
  double committed_gb = 0; // Committed_AS
  double free_disk_gb = 0; // on the filesystem the sampler was pointed at
};

inline constexpr std::string_view k_resource_csv_header =
    "time,phase,cpu_pct,free_ram_gb,committed_gb,free_disk_gb\n";

/// The phase rows carry until the first set_phase (set_phase before start() replaces it).
inline constexpr std::string_view k_initial_phase = "startup";

/// The CPU readings a sampler measures from: the last, and the one before it.
struct CpuBaseline {
  CpuTimes last;
  CpuTimes before;
};

/// Fewer clock ticks than this (all CPUs together) since the last reading is too short a time to
/// measure: a tick more or less reads as 0 % or 100 %.
inline constexpr uint64_t k_min_cpu_ticks = 100;

/// CPU use up to `now`: since the last reading, which `now` then becomes; or, when that was
/// under k_min_cpu_ticks ago (a row at a stage boundary, moments after the tick's), since the
/// reading before it, the last one kept. With nothing read yet, the average since boot.
double cpu_since(CpuBaseline& baseline, const CpuTimes& now);

/// Takes one sample now: CPU use (cpu_since()), free RAM, committed memory and free disk on
/// `disk_path`. A reading that fails (only possible without /proc) leaves its field at 0.
ResourceRow sample_once(const std::string& phase, const std::filesystem::path& disk_path,
                        CpuBaseline& cpu);

/// Formats `row` as one CSV line (C locale, 1 decimal) and writes it with a single write, so
/// the line is on disk even if kiln is killed right after.
void append_resource_row(AppendFile& file, const ResourceRow& row);

/// Samples the host every `interval` into a CSV, tagged with the current build phase. Every row
/// reaches the file at once, so a killed run keeps what it sampled.
class ResourceSampler {
public:
  ResourceSampler(std::filesystem::path csv, std::filesystem::path disk_path,
                  std::chrono::milliseconds interval);
  ResourceSampler(const ResourceSampler&) = delete;
  ResourceSampler& operator=(const ResourceSampler&) = delete;
  ~ResourceSampler();

  /// Creates the CSV (and its folder) with its header, writes a first row at once and starts
  /// the sampling thread. A sampler starts once; a second call is an error.
  tl::expected<void, std::string> start();

  /// Thread-safe. When the phase changes a row is written at once, before this returns, so a
  /// phase shorter than the interval still shows up; the periodic rows then carry it.
  void set_phase(std::string phase);

  /// Wakes the thread at once, joins it and writes a final row. Idempotent.
  void stop();

private:
  void run();
  void write_row_locked();

  std::filesystem::path m_csv;
  std::filesystem::path m_disk_path;
  std::chrono::milliseconds m_interval;

  std::mutex m_mutex; // guards everything below; the thread holds it only while writing a row
  std::condition_variable m_wake;
  std::string m_phase{k_initial_phase};
  bool m_started = false;
  bool m_running = false;
  bool m_stopping = false;
  CpuBaseline m_cpu;
  AppendFile m_file;
  std::thread m_thread;
};

/// Parses a CSV written by ResourceSampler, so an old run can be analysed again. Blank lines
/// are skipped; any other malformed line is an error naming the file and the line number.
tl::expected<std::vector<ResourceRow>, std::string>
read_resource_csv(const std::filesystem::path& csv);

struct PhaseSummary {
  std::string phase;
  double minutes = 0;
  double avg_cpu = 0;
  double peak_cpu = 0;
  double min_free_ram_gb = 0;
  double min_free_disk_gb = 0;
  int samples = 0;
};

/// One entry per phase, in order of first appearance. Each row starts an interval that lasts
/// until the next row, and that interval counts for the row's phase: a phase runs from its
/// first row to the row after its last one (the last row of the file adds no time). A phase
/// that comes back later adds its new intervals rather than the span in between. A time that
/// does not parse adds no time.
std::vector<PhaseSummary> summarize(const std::vector<ResourceRow>& rows);

/// An aligned plain-text table, one line per phase under the header
/// `phase  minutes  avg_cpu  peak_cpu  min_free_ram_gb  min_free_disk_gb`.
std::string format_summary(const std::vector<PhaseSummary>& phases);

} // namespace kiln
