// LogAnalyzer's state while a log goes by, shared by the files that read it: log_analysis.cpp
// splits the log into lines, tells the engine from the first ones and ends the log;
// log_buildkit.cpp and log_buildah.cpp read each engine's lines into steps;
// log_step_output.cpp reads what a step prints (errors, compile-cache statistics, warnings,
// -j); log_file.cpp reads a log file ahead on a thread of its own. run_analysis.cpp and
// analysis_json.cpp use only the small helpers at the top.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "forensics/line_times.h"
#include "forensics/log_analysis.h"
#include "forensics/signals.h"
#include "forensics/warnings.h"

namespace kiln::forensics {

inline constexpr size_t k_name_limit = 200;
inline constexpr size_t k_error_line_limit = 500;
inline constexpr size_t k_tail_lines = 50; // a step's last lines, for a failure no pattern names
inline constexpr size_t k_tail_line_limit = 300;  // bytes kept of each
inline constexpr size_t k_line_limit = 64 * 1024; // bytes of one line looked at
inline constexpr size_t k_detect_lines = 20;      // non-empty lines that may show the format
inline constexpr size_t k_traceback_frames = 2;   // indented lines kept before the exception
inline constexpr int k_cmake_lines = 4;           // indented lines kept after `CMake Error`
inline constexpr int k_colons_looked_at = 64;     // a line of URLs or JSON need not be walked whole

inline double round_ms(double seconds) {
  return std::round(seconds * 1000.0) / 1000.0;
}

inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

inline bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_digit);
}

inline std::optional<int> small_number(std::string_view text) {
  if (text.empty() || text.size() > 9) {
    return std::nullopt;
  }
  int value = 0;
  for (char c : text) {
    if (!is_digit(c)) {
      return std::nullopt;
    }
    value = value * 10 + (c - '0');
  }
  return value;
}

// "1.069" as display.go prints elapsed seconds (1 to 3 decimals), kept as read: a step needs
// the double of its last line only, at the end, and a division per line shows in a profile.
struct Decimal {
  uint64_t whole = 0;
  uint64_t fraction = 0;
  size_t places = 0; // 1 to 3

  double value() const {
    static constexpr double k_scale[] = {1, 10, 100, 1000};
    return static_cast<double>(whole) + static_cast<double>(fraction) / k_scale[places];
  }
};

// Offsets of every '\n' in `chunk`, into `out` (cleared first).
void find_newlines(std::string_view chunk, std::vector<uint32_t>& out);

bool is_buildkit_line(std::string_view line);
// "[2/3] " before buildah's lines of a multi-stage build.
std::string_view buildah_stage_prefix(std::string_view line);
// "STEP 3/5: RUN ..." -> "STEP 3/5" and the instruction; false for another line.
bool buildah_step(std::string_view line, std::string_view& id, std::string_view& instruction);

std::optional<std::string> read_small_file(const std::filesystem::path& path, size_t limit);

// ---------------------------------------------------------------------------------------------
// One step while its log goes by.

enum class Block { none, traceback, cmake };

// A step's last lines, k_tail_line_limit bytes of each, in slots of a fixed size: remembering
// a line is a copy into its slot, where a ring of std::strings paid for their bookkeeping.
// Slots fill in order (`size` of them), then the step's tail_next says which to overwrite.
struct TailRing {
  std::array<std::array<char, k_tail_line_limit>, k_tail_lines> bytes;
  std::array<uint16_t, k_tail_lines> lengths{};
  size_t size = 0;

  std::string_view operator[](size_t i) const { return {bytes[i].data(), lengths[i]}; }
};

struct StepWork {
  StepResult r;
  std::string full_name; // BuildKit: a header repeats it exactly
  int number = 0;        // BuildKit vertex number
  bool open = true;
  bool instruction_fetches = false;
  // Timing.
  std::optional<Decimal> last_relative; // BuildKit: seconds into the vertex of its last line
  std::optional<double> last_output_at; // sidecar time of the last output line
  std::optional<double> done_seconds;
  // Compile-cache statistics, each the last block printed (their counters are cumulative)
  // except kiln-cc's lines, one per compile step, which add up.
  std::optional<CacheCounts> sccache_text, sccache_json, ccache;
  std::optional<CacheCounts> kiln_cc;
  bool ccache_summary_open = false;
  // Multi-line errors.
  Block block = Block::none;
  int block_lines = 0;
  std::vector<std::string> traceback_frames;
  // Error lines: the first K, then a ring of the last K.
  std::vector<std::string> last_errors;
  size_t last_errors_next = 0;
  // The last lines, for a failure no error line names; dropped once the step succeeded.
  std::unique_ptr<TailRing> tail; // made on the first line
  size_t tail_next = 0;
};

struct LogAnalyzer::Impl {
  Options options;
  WarningClassifier classifier;
  LineClock clock;
  LogResult result;

  std::vector<StepWork> steps;
  std::vector<std::unique_ptr<TailRing>> spare_tails; // of succeeded steps, for the next ones
  // Reading.
  std::string carry;
  bool carry_overlong = false;
  uint64_t offset = 0;      // bytes fed
  uint64_t carry_start = 0; // offset of the carried line
  size_t non_empty_seen = 0;
  enum class Format { unknown, buildkit, buildah } format = Format::unknown;
  bool undetectable = false;
  std::string last_non_empty; // bounded: the last non-empty line, for buildah's final error
  std::string engine_error;   // bounded: BuildKit's first `error: ` line (its solve error)
  // BuildKit.
  std::unordered_map<int, size_t> by_number;
  std::optional<size_t> current;
  bool header_due = true;
  enum class BkBlock { none, replay, excerpt } bk_block = BkBlock::none;
  // buildah.
  std::optional<size_t> open_step;
  std::unordered_map<std::string, std::string> buildah_stages; // prefix -> FROM ... AS name

  Impl(const Options& o, LineClock c)
      : options(o), classifier(o.noise, o.signal), clock(std::move(c)) {}

  std::optional<double> time_at(uint64_t at) {
    if (clock.empty()) {
      return std::nullopt;
    }
    return clock.at(at);
  }

  // Reading: log_analysis.cpp.
  void feed(std::string_view chunk);
  void feed_split(std::string_view chunk, std::span<const uint32_t> newlines);
  void append_carry(const char* p, const char* stop, const char* begin);
  void line(std::string_view text, uint64_t at);

  // What any step's output says: log_step_output.cpp.
  void add_error(StepWork& s, std::string_view text);
  void end_traceback(StepWork& s, std::string_view exception);
  bool continue_block(StepWork& s, std::string_view text);
  void note_dash(StepWork& s, std::string_view text, const char* p, bool& dash_c);
  void note_jobs(StepWork& s, std::string_view text, bool& dash_c);
  void remember_tail(StepWork& s, std::string_view text);
  void scan(StepWork& s, std::string_view text);
  void sccache_text_line(StepWork& s, std::string_view text);
  void ccache_print_stats_line(StepWork& s, std::string_view text);
  bool ccache_summary_line(StepWork& s, std::string_view text);
  StepWork& new_step(std::string id, std::string_view name, std::string stage,
                     std::string_view instruction, uint64_t at);
  std::unique_ptr<TailRing> take_tail_ring();
  void succeeded(StepWork& s);

  // BuildKit: log_buildkit.cpp.
  void buildkit_line(std::string_view text, uint64_t at);
  static bool log_line(std::string_view rest, Decimal& seconds, std::string_view& text);
  void vertex_line(int number, std::string_view rest, uint64_t at);
  void vertex_log(StepWork& s, const Decimal& seconds, std::string_view text, uint64_t at);
  void vertex_event(StepWork& s, std::string_view rest, uint64_t at);
  void close(StepWork& s, uint64_t at);

  // buildah: log_buildah.cpp.
  void buildah_end(StepWork& s, uint64_t at);
  void buildah_line(std::string_view line, uint64_t at);

  // The end: log_analysis.cpp.
  LogResult finish();
  void finish_step(StepWork& s);
};

} // namespace kiln::forensics
