#include "forensics/log_analysis.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <fcntl.h>
#include <map>
#include <mutex>
#include <span>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <unordered_map>

#include "compilecache/sccache_stats.h"
#include "compilecache/stats_line.h"
#include "driver/records.h"
#include "engine/buildkit_progress.h"
#include "forensics/signals.h"
#include "util/json_field.h"

namespace kiln::forensics {

namespace {

constexpr size_t k_name_limit = 200;
constexpr size_t k_error_line_limit = 500;
constexpr size_t k_tail_lines = 50;        // a step's last lines, for a failure no pattern names
constexpr size_t k_tail_line_limit = 300;  // bytes kept of each
constexpr size_t k_line_limit = 64 * 1024; // bytes of one line looked at
constexpr size_t k_detect_lines = 20;      // non-empty lines that may show the format
constexpr size_t k_traceback_frames = 2;   // indented lines kept before the exception
constexpr int k_cmake_lines = 4;           // indented lines kept after `CMake Error`
constexpr int k_colons_looked_at = 64;     // a line of URLs or JSON need not be walked whole

// buildctl's printer (display.go) and logs.go upstream; see engine/buildkit_progress.cpp.
constexpr std::string_view k_replay_rule = "------";
constexpr std::string_view k_excerpt_rule = "--------------------";
constexpr std::string_view k_clip_head = "[output clipped, log limit ";
constexpr std::string_view k_clip_tail = " reached]";

double round_ms(double seconds) {
  return std::round(seconds * 1000.0) / 1000.0;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_digit);
}

std::optional<int> small_number(std::string_view text) {
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

// The decimal at the start of [p, end), up to 9 digits before the point and 1 to
// `max_decimals` after it; the end of the number, or nullptr when there is none.
const char* parse_decimal(const char* p, const char* end, size_t max_decimals, Decimal& out) {
  const char* start = p;
  out.whole = 0;
  while (p < end && is_digit(*p)) {
    out.whole = out.whole * 10 + static_cast<uint64_t>(*p - '0');
    ++p;
  }
  if (p == start || p - start > 9 || p == end || *p != '.') {
    return nullptr;
  }
  ++p;
  const char* fraction = p;
  out.fraction = 0;
  while (p < end && is_digit(*p)) {
    out.fraction = out.fraction * 10 + static_cast<uint64_t>(*p - '0');
    ++p;
  }
  out.places = static_cast<size_t>(p - fraction);
  if (out.places == 0 || out.places > max_decimals) {
    return nullptr;
  }
  return p;
}

// The whole of `text` as such a decimal; nullopt otherwise.
std::optional<double> decimal_seconds(std::string_view text, size_t max_decimals) {
  Decimal decimal;
  const char* end = text.data() + text.size();
  if (parse_decimal(text.data(), end, max_decimals, decimal) != end) {
    return std::nullopt;
  }
  return decimal.value();
}

// Offsets of every '\n' in `chunk`, into `out` (cleared first).
void find_newlines(std::string_view chunk, std::vector<uint32_t>& out) {
  out.clear();
  const char* begin = chunk.data();
  const char* end = begin + chunk.size();
  for (const char* p = begin; p < end; ++p) {
    p = static_cast<const char*>(std::memchr(p, '\n', end - p));
    if (!p) {
      break;
    }
    out.push_back(static_cast<uint32_t>(p - begin));
  }
}

// One walk over `text` for the '-'s and ':'s scan() looks around: calls `on_dash` with each
// '-' in order and keeps the first `limit` ':'s in `colons`; returns how many it kept. With
// SSE2 it compares 16 bytes at a time against both, where two memchr walks per line (and a
// call per byte found) cost more than the look at each byte itself.
template <class OnDash>
size_t find_marks(std::string_view text, OnDash&& on_dash, const char** colons, size_t limit) {
  const char* b = text.data();
  const size_t n = text.size();
  size_t count = 0;
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i dash = _mm_set1_epi8('-');
  const __m128i colon = _mm_set1_epi8(':');
  for (; i + 16 <= n; i += 16) {
    __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i));
    unsigned dashes = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, dash)));
    unsigned found = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, colon)));
    for (found |= dashes; found != 0; found &= found - 1) {
      unsigned bit = static_cast<unsigned>(__builtin_ctz(found));
      if (dashes >> bit & 1u) {
        on_dash(b + i + bit);
      } else if (count < limit) {
        colons[count++] = b + i + bit;
      }
    }
  }
#endif
  for (; i < n; ++i) {
    if (b[i] == '-') {
      on_dash(b + i);
    } else if (b[i] == ':' && count < limit) {
      colons[count++] = b + i;
    }
  }
  return count;
}

bool is_hex_id(std::string_view text) {
  return text.size() >= 6 && text.size() <= 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return is_digit(c) || (c >= 'a' && c <= 'f');
         });
}

bool is_buildkit_line(std::string_view line) {
  if (line.size() < 3 || line[0] != '#') {
    return false;
  }
  size_t space = line.find(' ');
  return space != std::string_view::npos && space > 1 && all_digits(line.substr(1, space - 1));
}

// "[2/3] " before buildah's lines of a multi-stage build.
std::string_view buildah_stage_prefix(std::string_view line) {
  if (!line.starts_with('[')) {
    return {};
  }
  size_t close = line.find("] ");
  if (close == std::string_view::npos || close > 16) {
    return {};
  }
  std::string_view inside = line.substr(1, close - 1);
  size_t slash = inside.find('/');
  if (slash == std::string_view::npos || !all_digits(inside.substr(0, slash)) ||
      !all_digits(inside.substr(slash + 1))) {
    return {};
  }
  return line.substr(0, close + 2);
}

// "STEP 3/5: RUN ..." -> "STEP 3/5" and the instruction; false for another line.
bool buildah_step(std::string_view line, std::string_view& id, std::string_view& instruction) {
  if (!line.starts_with("STEP ")) {
    return false;
  }
  size_t colon = line.find(": ", 5);
  if (colon == std::string_view::npos) {
    return false;
  }
  std::string_view fraction = line.substr(5, colon - 5);
  size_t slash = fraction.find('/');
  if (slash == std::string_view::npos || !all_digits(fraction.substr(0, slash)) ||
      !all_digits(fraction.substr(slash + 1))) {
    return false;
  }
  id = line.substr(0, colon);
  instruction = line.substr(colon + 2);
  return true;
}

std::string lower_ascii(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

// `FROM image AS name` -> "name".
std::string from_stage_name(std::string_view instruction) {
  std::string lowered = lower_ascii(instruction);
  if (!lowered.starts_with("from ")) {
    return {};
  }
  size_t as = lowered.rfind(" as ");
  if (as == std::string::npos) {
    return {};
  }
  std::string_view name = instruction.substr(as + 4);
  while (!name.empty() && name.back() == ' ') {
    name.remove_suffix(1);
  }
  if (name.empty() || name.find(' ') != std::string_view::npos) {
    return {};
  }
  return std::string(name);
}

// `... did not complete successfully: exit code: 3`
std::optional<int> buildkit_exit_code(std::string_view error) {
  constexpr std::string_view k_marker = "exit code: ";
  size_t at = error.rfind(k_marker);
  if (at == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view rest = error.substr(at + k_marker.size());
  size_t digits = 0;
  while (digits < rest.size() && is_digit(rest[digits])) {
    ++digits;
  }
  return small_number(rest.substr(0, digits));
}

bool mentions_fetch(std::string_view text) {
  return text.find("wget") != std::string_view::npos || text.find("curl") != std::string_view::npos;
}

} // namespace

const char* state_name(StepState state) {
  switch (state) {
  case StepState::running:
    return "running";
  case StepState::done:
    return "done";
  case StepState::cached:
    return "cached";
  case StepState::error:
    return "error";
  case StepState::canceled:
    return "canceled";
  }
  return "running";
}

// ---------------------------------------------------------------------------------------------
// One step while its log goes by.

namespace {

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

} // namespace

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

  void feed(std::string_view chunk) {
    std::vector<uint32_t> newlines;
    find_newlines(chunk, newlines);
    feed_split(chunk, newlines);
  }

  // `chunk` with the offsets of its newlines, found beforehand (on the reading thread when
  // analyze_log_file reads): the lines between them go to line(), a line cut by the chunk's
  // end waits in `carry` for the rest.
  void feed_split(std::string_view chunk, std::span<const uint32_t> newlines) {
    const char* begin = chunk.data();
    const char* p = begin;
    for (uint32_t at : newlines) {
      const char* stop = begin + at;
      if (!carry.empty() || carry_overlong) {
        append_carry(p, stop, begin);
        line(carry, carry_start);
        carry.clear();
        carry_overlong = false;
      } else {
        size_t length = std::min<size_t>(stop - p, k_line_limit);
        line(std::string_view(p, length), offset + (p - begin));
      }
      p = stop + 1;
    }
    if (p < begin + chunk.size()) {
      append_carry(p, begin + chunk.size(), begin);
    }
    offset += chunk.size();
  }

  // [p, stop) of the chunk at `begin` onto the carried line, up to k_line_limit bytes of it.
  void append_carry(const char* p, const char* stop, const char* begin) {
    if (carry.empty() && !carry_overlong) {
      carry_start = offset + (p - begin);
    }
    size_t room = k_line_limit > carry.size() ? k_line_limit - carry.size() : 0;
    size_t take = std::min<size_t>(room, stop - p);
    carry.append(p, take);
    if (take < static_cast<size_t>(stop - p)) {
      carry_overlong = true;
    }
  }

  void line(std::string_view text, uint64_t at) {
    ++result.lines;
    if (!text.empty() && text.back() == '\r') {
      text.remove_suffix(1);
    }
    if (format != Format::buildkit && !text.empty()) {
      last_non_empty.assign(text.substr(0, k_error_line_limit));
    }
    switch (format) {
    case Format::buildkit:
      buildkit_line(text, at);
      return;
    case Format::buildah:
      buildah_line(text, at);
      return;
    case Format::unknown:
      break;
    }
    if (undetectable || text.empty()) {
      return;
    }
    std::string_view id, instruction;
    if (is_buildkit_line(text)) {
      format = Format::buildkit;
      result.format = "buildkit";
      result.timed = true;
      buildkit_line(text, at);
    } else if (buildah_step(text.substr(buildah_stage_prefix(text).size()), id, instruction)) {
      format = Format::buildah;
      result.format = "buildah";
      result.timed = !clock.empty();
      buildah_line(text, at);
    } else if (++non_empty_seen >= k_detect_lines) {
      undetectable = true;
    }
  }

  // ----- what any step's output says -----

  void add_error(StepWork& s, std::string_view text) {
    ++s.r.error_lines_total;
    std::string kept = one_line(text, k_error_line_limit);
    if (s.r.errors.size() < options.error_lines) {
      s.r.errors.push_back(std::move(kept));
      return;
    }
    if (options.error_lines == 0) {
      return;
    }
    if (s.last_errors.size() < options.error_lines) {
      s.last_errors.push_back(std::move(kept));
    } else {
      s.last_errors[s.last_errors_next] = std::move(kept);
    }
    s.last_errors_next = (s.last_errors_next + 1) % options.error_lines;
  }

  void end_traceback(StepWork& s, std::string_view exception) {
    add_error(s, "Traceback (most recent call last):");
    for (const auto& frame : s.traceback_frames) {
      add_error(s, frame);
    }
    if (!exception.empty()) {
      add_error(s, exception);
    }
    s.traceback_frames.clear();
    s.block = Block::none;
  }

  // True when the line belonged to a multi-line error and needs no other look.
  bool continue_block(StepWork& s, std::string_view text) {
    if (s.block == Block::traceback) {
      if (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
        if (s.traceback_frames.size() == k_traceback_frames) {
          s.traceback_frames.erase(s.traceback_frames.begin());
        }
        s.traceback_frames.push_back(one_line(text, k_error_line_limit));
        return true;
      }
      end_traceback(s, text);
      return !text.empty();
    }
    // CMake: the message's indented lines, blank lines between paragraphs.
    if (text.empty()) {
      return true;
    }
    if (text.starts_with("  ")) {
      if (s.block_lines++ < k_cmake_lines) {
        add_error(s, text);
      }
      return true;
    }
    s.block = Block::none;
    return false;
  }

  // The '-' at `p` in `text`: `-c` (a compiler invocation, in `dash_c`), `-j N` or
  // `--parallel N` (the most jobs asked for, in the step's result).
  void note_dash(StepWork& s, std::string_view text, const char* p, bool& dash_c) {
    const char* b = text.data();
    const char* end = b + text.size();
    if (p != b) {
      char before = p[-1];
      if (before != ' ' && before != '=' && before != '\'' && before != '"' && before != '\t') {
        return;
      }
    }
    if (p + 1 >= end) {
      return;
    }
    char next = p[1];
    if (next == 'c' && (p + 2 == end || p[2] == ' ')) {
      dash_c = true;
    } else if (next == 'j' || (next == '-' && p + 2 < end && p[2] == 'p')) {
      if (auto jobs = jobs_option(std::string_view(p, end - p))) {
        s.r.jobs = std::max(s.r.jobs.value_or(0), *jobs);
      }
    }
  }

  void note_jobs(StepWork& s, std::string_view text, bool& dash_c) {
    find_marks(
        text, [&](const char* p) { note_dash(s, text, p, dash_c); }, nullptr, 0);
  }

  void remember_tail(StepWork& s, std::string_view text) {
    std::string_view kept = text.substr(0, k_tail_line_limit);
    if (!s.tail) {
      s.tail = take_tail_ring();
    }
    TailRing& ring = *s.tail;
    size_t slot = ring.size < k_tail_lines ? ring.size++ : s.tail_next;
    // copy_n, not memcpy: an empty line's view may hold a null pointer.
    std::copy_n(kept.data(), kept.size(), ring.bytes[slot].data());
    ring.lengths[slot] = static_cast<uint16_t>(kept.size());
    s.tail_next = (s.tail_next + 1) % k_tail_lines;
  }

  void scan(StepWork& s, std::string_view text) {
    remember_tail(s, text);
    if (s.block != Block::none && continue_block(s, text)) {
      return;
    }
    if (text.empty()) {
      return;
    }
    const char* b = text.data();
    const size_t n = text.size();
    const char c0 = b[0];

    // One walk over the line finds both: the dashes are looked at as they come, the colons
    // wait for the checks below, which need to know first whether the line has a `-c`.
    bool dash_c = false;
    std::array<const char*, k_colons_looked_at> colons;
    size_t colon_count = find_marks(
        text, [&](const char* p) { note_dash(s, text, p, dash_c); }, colons.data(), colons.size());
    if (dash_c ? is_compiler_invocation(text) : (c0 == '[' && is_build_progress_compile(text))) {
      ++s.r.compiler_invocations;
    }
    if (c0 == '+' && n > 2 && b[1] == ' ' && !s.instruction_fetches) {
      s.r.fetches_without_progress += fetches_without_progress(text.substr(2));
    }

    if (colon_count == 0) {
      if (c0 == 'C') {
        sccache_text_line(s, text);
      } else if ((c0 == 'c' || c0 == 'd' || c0 == 'p') && std::memchr(b, '\t', n)) {
        ccache_print_stats_line(s, text);
      }
      return;
    }
    // Every colon: `...: warning:`, `[kiln-cc:stats]`, `{"stats":`. Every error marker but a
    // line's first word has a colon too (`error:`, `: undefined reference to`, `: multiple
    // definition of`), so the walk
    // also tells whether is_error_line's whole-line searches below can find anything.
    int colons_seen = 0;
    bool all_colons_seen = true;
    bool error_marker = false;
    for (size_t k = 0; k < colon_count; ++k) {
      const char* p = colons[k];
      size_t i = static_cast<size_t>(p - b);
      if (!error_marker) {
        error_marker = (i >= 5 && std::memcmp(p - 5, "error", 5) == 0 &&
                        (i == 5 || p[-6] == ' ' || p[-6] == ':')) ||
                       (n - i >= 24 && (std::memcmp(p, ": undefined reference to", 24) == 0 ||
                                        std::memcmp(p, ": multiple definition of", 24) == 0));
      }
      if (i >= 9 && std::memcmp(p - 7, "warning", 7) == 0 && p[-8] == ' ' && p[-9] == ':') {
        if (auto warning = parse_warning_line(text)) {
          classifier.count(warning->klass, s.r.warnings);
          return;
        }
      }
      if (i >= 8 && std::memcmp(p - 8, "[kiln-cc", 8) == 0) {
        if (auto stats = cc::parse_stats_line(text.substr(i - 8))) {
          CacheCounts& counts = s.kiln_cc ? *s.kiln_cc : s.kiln_cc.emplace();
          counts.requests += stats->compile_requests;
          counts.hits += stats->hits;
          counts.misses += stats->misses;
          return;
        }
      }
      if (i == 8 && c0 == '{' && text.starts_with("{\"stats\":")) {
        std::string error;
        if (auto stats = cc::parse_sccache_stats(text, error)) {
          s.sccache_json = CacheCounts{stats->compile_requests, stats->hits, stats->misses};
        }
        return;
      }
      if (i + 1 == n) {
        break;
      }
      if (++colons_seen == k_colons_looked_at) {
        all_colons_seen = false;
        break;
      }
    }
    if (c0 == 'T' && is_traceback_start(text)) {
      s.block = Block::traceback;
      s.traceback_frames.clear();
      return;
    }
    if (c0 == 'C' && is_cmake_error(text)) {
      add_error(s, text);
      s.block = Block::cmake;
      s.block_lines = 0;
      return;
    }
    if (ccache_summary_line(s, text)) {
      return;
    }
    // Without a marker among the colons only the first word can make an error line.
    if (error_marker || !all_colons_seen ? is_error_line(text) : starts_error_line(text)) {
      add_error(s, text);
    }
  }

  void sccache_text_line(StepWork& s, std::string_view text) {
    if (auto requests = sccache_text_count(text, "Compile requests")) {
      s.sccache_text = CacheCounts{*requests, 0, 0};
    } else if (!s.sccache_text) {
      return;
    } else if (auto hits = sccache_text_count(text, "Cache hits")) {
      s.sccache_text->hits = *hits;
    } else if (auto misses = sccache_text_count(text, "Cache misses")) {
      s.sccache_text->misses = *misses;
    }
  }

  void ccache_print_stats_line(StepWork& s, std::string_view text) {
    // Keys come sorted: cache_miss before direct_cache_hit and preprocessed_cache_hit.
    if (auto misses = ccache_print_stats_count(text, "cache_miss")) {
      s.ccache = CacheCounts{*misses, 0, *misses};
    } else if (!s.ccache) {
      return;
    } else if (auto hits = ccache_print_stats_count(text, "direct_cache_hit")) {
      s.ccache->hits += *hits;
      s.ccache->requests += *hits;
    } else if (auto more = ccache_print_stats_count(text, "preprocessed_cache_hit")) {
      s.ccache->hits += *more;
      s.ccache->requests += *more;
    }
  }

  bool ccache_summary_line(StepWork& s, std::string_view text) {
    if (auto calls = ccache_summary_count(text, "Cacheable calls")) {
      s.ccache = CacheCounts{*calls, 0, 0};
      s.ccache_summary_open = true;
      return true;
    }
    if (!s.ccache_summary_open) {
      return false;
    }
    if (!text.starts_with(' ')) {
      s.ccache_summary_open = false;
      return false;
    }
    if (auto hits = ccache_summary_count(text, "Hits")) {
      s.ccache->hits = *hits;
      return true;
    }
    if (auto misses = ccache_summary_count(text, "Misses")) {
      s.ccache->misses = *misses;
      return true;
    }
    return false;
  }

  StepWork& new_step(std::string id, std::string_view name, std::string stage,
                     std::string_view instruction, uint64_t at) {
    StepWork& s = steps.emplace_back();
    s.r.id = std::move(id);
    s.r.name = one_line(name, k_name_limit);
    s.r.stage = std::move(stage);
    s.r.start = time_at(at);
    if (instruction.starts_with("RUN ")) {
      s.instruction_fetches = mentions_fetch(instruction);
      s.r.fetches_without_progress = fetches_without_progress(instruction.substr(4));
      bool ignored = false;
      note_jobs(s, instruction, ignored);
    }
    return s;
  }

  // A ring a succeeded step gave back, or a new one: its slots left uninitialized (the lengths
  // say what is in them), as 15 KB of fresh memory per step showed as memset and page faults.
  std::unique_ptr<TailRing> take_tail_ring() {
    if (spare_tails.empty()) {
      return std::unique_ptr<TailRing>(new TailRing);
    }
    std::unique_ptr<TailRing> ring = std::move(spare_tails.back());
    spare_tails.pop_back();
    ring->size = 0;
    return ring;
  }

  void succeeded(StepWork& s) {
    s.open = false;
    if (s.tail) {
      spare_tails.push_back(std::move(s.tail));
    }
    s.traceback_frames.clear();
  }

  // ----- BuildKit -----

  void buildkit_line(std::string_view text, uint64_t at) {
    if (bk_block == BkBlock::replay) {
      if (text == k_replay_rule) {
        bk_block = BkBlock::none;
      }
      return;
    }
    if (bk_block == BkBlock::excerpt) {
      if (text == k_excerpt_rule) {
        bk_block = BkBlock::none;
      }
      return;
    }
    if (text.empty()) {
      header_due = true;
      return;
    }
    if (text[0] == '#') {
      // `#<1 to 9 digits> `, read in one pass: every line of a BuildKit log starts so.
      int number = 0;
      size_t digits_end = 1;
      while (digits_end < text.size() && digits_end <= 9 && is_digit(text[digits_end])) {
        number = number * 10 + (text[digits_end] - '0');
        ++digits_end;
      }
      if (digits_end > 1 && digits_end < text.size() && text[digits_end] == ' ') {
        vertex_line(number, text.substr(digits_end + 1), at);
      }
      return;
    }
    if (text == k_replay_rule) {
      bk_block = BkBlock::replay;
    } else if (text == k_excerpt_rule) {
      bk_block = BkBlock::excerpt;
    } else if (text.starts_with("error: ")) {
      result.failed = true;
    }
  }

  // "0.262 text" -> the seconds and the text.
  static bool log_line(std::string_view rest, Decimal& seconds, std::string_view& text) {
    const char* end = rest.data() + rest.size();
    const char* after = parse_decimal(rest.data(), end, 3, seconds);
    if (!after || (after != end && *after != ' ')) {
      return false;
    }
    text = after == end ? std::string_view{} : std::string_view(after + 1, end - after - 1);
    return true;
  }

  void vertex_line(int number, std::string_view rest, uint64_t at) {
    StepWork* cur = current ? &steps[*current] : nullptr;
    Decimal seconds;
    std::string_view text;
    if (number == 0) {
      // The first log line of a vertex can carry #0: it still belongs under the header.
      if (cur && log_line(rest, seconds, text)) {
        header_due = false;
        vertex_log(*cur, seconds, text, at);
      }
      return;
    }
    bool is_current = cur && cur->number == number;
    std::optional<size_t> known;
    if (is_current) {
      known = *current;
    } else if (auto found = by_number.find(number); found != by_number.end()) {
      known = found->second;
    }
    if (known && rest == "...") {
      header_due = true;
      return;
    }
    bool header = header_due || !is_current;
    if (header && is_current && rest != cur->full_name) {
      header = false;
    }
    header_due = false;
    if (!header) {
      if (log_line(rest, seconds, text)) {
        vertex_log(*cur, seconds, text, at);
      } else {
        vertex_event(*cur, rest, at);
      }
      return;
    }
    if (!known) {
      Vertex vertex = classify_vertex_name(rest);
      StepWork& s = new_step("#" + std::to_string(number), rest, vertex.stage,
                             vertex.kind == VertexKind::step ? std::string_view(vertex.instruction)
                                                             : std::string_view{},
                             at);
      s.number = number;
      s.full_name.assign(rest);
      s.r.dockerfile_step = vertex.kind == VertexKind::step;
      if (vertex.kind != VertexKind::step && vertex.kind != VertexKind::context) {
        s.r.stage.clear();
      }
      known = steps.size() - 1;
      by_number.emplace(number, *known);
    }
    current = known;
  }

  void vertex_log(StepWork& s, const Decimal& seconds, std::string_view text, uint64_t at) {
    if (text.size() > k_clip_head.size() + k_clip_tail.size() && text.starts_with(k_clip_head) &&
        text.ends_with(k_clip_tail)) {
      s.r.clipped = true;
      result.clipped = true;
      result.clips.push_back({s.r.id, one_line(text, k_name_limit)});
      return;
    }
    if (s.r.state == StepState::cached) {
      ++s.r.replayed_lines;
    } else {
      ++s.r.output_lines;
    }
    s.last_relative = seconds;
    if (!clock.empty()) {
      s.last_output_at = clock.at(at);
    }
    scan(s, text);
  }

  void vertex_event(StepWork& s, std::string_view rest, uint64_t at) {
    if (rest == "DONE" || (rest.starts_with("DONE ") && rest.ends_with('s'))) {
      if (rest.size() > 5) {
        s.done_seconds = decimal_seconds(rest.substr(5, rest.size() - 6), 3);
      }
      s.r.state = StepState::done;
      close(s, at);
      succeeded(s);
    } else if (rest == "CACHED") {
      s.r.state = StepState::cached;
      s.r.cached = true;
      // What such a vertex printed is a replay of an earlier build, not work done now.
      s.r.replayed_lines += s.r.output_lines;
      s.r.output_lines = 0;
      close(s, at);
      succeeded(s);
    } else if (rest == "CANCELED") {
      s.r.state = StepState::canceled;
      close(s, at);
    } else if (rest.starts_with("ERROR: ")) {
      s.r.state = StepState::error;
      s.r.exit_code = buildkit_exit_code(rest);
      result.failed = true;
      close(s, at);
    }
  }

  void close(StepWork& s, uint64_t at) {
    if (s.r.end || !s.r.start) {
      s.open = false;
      return;
    }
    if (s.done_seconds) {
      s.r.end = *s.r.start + *s.done_seconds;
    } else {
      s.r.end = time_at(at);
    }
    s.open = false;
  }

  // ----- buildah -----

  void buildah_end(StepWork& s, uint64_t at) {
    if (s.open) {
      s.r.end = time_at(at);
    }
  }

  void buildah_line(std::string_view line, uint64_t at) {
    std::string_view prefix = buildah_stage_prefix(line);
    std::string_view text = line.substr(prefix.size());
    std::string_view id, instruction;
    if (buildah_step(text, id, instruction)) {
      if (open_step) {
        StepWork& previous = steps[*open_step];
        buildah_end(previous, at);
        if (previous.r.state == StepState::running) {
          previous.r.state = previous.r.cached ? StepState::cached : StepState::done;
        }
        succeeded(previous);
      }
      std::string key(prefix);
      if (std::string name = from_stage_name(instruction); !name.empty()) {
        buildah_stages[key] = name;
      }
      auto known = buildah_stages.find(key);
      StepWork& s =
          new_step(std::string(prefix) + std::string(id), instruction,
                   known == buildah_stages.end() ? std::string() : known->second, instruction, at);
      s.r.dockerfile_step = true;
      open_step = steps.size() - 1;
      return;
    }
    if (text.starts_with("Error: ")) {
      if (open_step) {
        StepWork& s = steps[*open_step];
        if (text.starts_with("Error: building at STEP")) {
          s.r.state = StepState::error;
          buildah_end(s, at);
          s.open = false;
          open_step.reset();
          result.failed = true;
          return;
        }
      } else {
        return;
      }
    }
    if (!open_step) {
      return;
    }
    StepWork& s = steps[*open_step];
    if (text.starts_with("--> ")) {
      std::string_view rest = text.substr(4);
      if (rest.starts_with("Using cache ")) {
        s.r.cached = true;
        return;
      }
      if (is_hex_id(rest)) {
        buildah_end(s, at);
        s.r.state = s.r.cached ? StepState::cached : StepState::done;
        succeeded(s);
        open_step.reset();
        return;
      }
    }
    if (text == "COMMIT" || text.starts_with("COMMIT ")) {
      return;
    }
    constexpr std::string_view k_exited = "subprocess exited with status ";
    if (text.starts_with(k_exited)) {
      if (auto code = small_number(text.substr(k_exited.size()))) {
        s.r.exit_code = *code;
      }
      return;
    }
    ++s.r.output_lines;
    if (!clock.empty()) {
      s.last_output_at = clock.at(at);
    }
    scan(s, text);
  }

  // ----- the end -----

  LogResult finish() {
    if (!carry.empty() || carry_overlong) {
      line(carry, carry_start);
      carry.clear();
      carry_overlong = false;
    }
    result.bytes = offset;
    if (format == Format::buildah) {
      // buildah's last word on a failed build is an `Error: ...` line of its own.
      if (last_non_empty.starts_with("Error: ")) {
        result.failed = true;
      }
      if (open_step) {
        StepWork& s = steps[*open_step];
        if (result.failed) {
          s.r.state = StepState::error;
        }
        s.r.end = clock.last();
        s.open = false;
      }
    }
    for (StepWork& s : steps) {
      if (s.block == Block::traceback) {
        end_traceback(s, {});
      }
      finish_step(s);
      result.steps.push_back(std::move(s.r));
    }
    steps.clear();
    return std::move(result);
  }

  void finish_step(StepWork& s) {
    StepResult& r = s.r;
    if (s.done_seconds) {
      r.seconds = s.done_seconds;
    } else if (r.start && r.end) {
      r.seconds = std::max(0.0, *r.end - *r.start);
    }
    if (s.done_seconds && s.last_relative) {
      r.idle_tail_seconds = std::max(0.0, *s.done_seconds - s.last_relative->value());
    } else if (r.end && s.last_output_at) {
      r.idle_tail_seconds = std::max(0.0, *r.end - *s.last_output_at);
    }
    for (auto* value : {&r.start, &r.end, &r.seconds, &r.idle_tail_seconds}) {
      if (*value) {
        **value = round_ms(**value);
      }
    }
    // The compile cache that answered: kiln-cc's own count first (it names sccache's and
    // ccache's), then sccache's, then ccache's.
    auto pick = [&](const std::optional<CacheCounts>& counts, const char* source) {
      if (counts && !r.compile) {
        r.compile = CompileCounts{counts->requests, counts->hits, counts->misses, source};
      }
    };
    pick(s.kiln_cc, "kiln-cc");
    pick(s.sccache_json, "sccache-json");
    pick(s.sccache_text, "sccache-text");
    pick(s.ccache, "ccache");
    r.compile_bypass = r.compiler_invocations > 0 && (!r.compile || r.compile->requests == 0);
    r.flood = r.output_lines > options.flood_lines;
    // The ring's lines in order after the first K.
    if (!s.last_errors.empty()) {
      size_t n = s.last_errors.size();
      size_t first = n < options.error_lines ? 0 : s.last_errors_next;
      for (size_t i = 0; i < n; ++i) {
        r.errors.push_back(std::move(s.last_errors[(first + i) % n]));
      }
    }
    if (r.state != StepState::error) {
      r.errors.clear();
      r.error_lines_total = 0;
    } else if (r.errors.empty() && s.tail && s.tail->size > 0) {
      r.errors_from_tail = true;
      size_t n = s.tail->size;
      size_t first = n < k_tail_lines ? 0 : s.tail_next;
      size_t keep = std::min(n, options.error_lines);
      for (size_t i = n - keep; i < n; ++i) {
        r.errors.push_back(one_line((*s.tail)[(first + i) % n], k_error_line_limit));
      }
    }
  }
};

LogAnalyzer::LogAnalyzer(const Options& options, LineClock clock)
    : m_impl(std::make_unique<Impl>(options, std::move(clock))) {}

LogAnalyzer::~LogAnalyzer() = default;

void LogAnalyzer::feed(std::string_view chunk) {
  m_impl->feed(chunk);
}

LogResult LogAnalyzer::finish() {
  return m_impl->finish();
}

// ---------------------------------------------------------------------------------------------
// Files and runs.

bool parse_log_name(const std::filesystem::path& relative, std::string& stage, std::string& lane,
                    int& attempt) {
  std::string file = relative.filename().string();
  constexpr std::string_view k_suffix = ".log";
  constexpr std::string_view k_attempt = ".attempt-";
  if (!std::string_view(file).ends_with(k_suffix)) {
    return false;
  }
  std::string_view base(file.data(), file.size() - k_suffix.size());
  size_t at = base.rfind(k_attempt);
  if (at == std::string_view::npos || at == 0) {
    return false;
  }
  auto number = small_number(base.substr(at + k_attempt.size()));
  if (!number || *number < 1) {
    return false;
  }
  stage = std::string(base.substr(0, at));
  attempt = *number;
  lane.clear();
  // stages/<lane>/<stage>.attempt-N.log: the folder between stages/ and the file is the lane.
  std::filesystem::path parent = relative.parent_path();
  if (!parent.empty() && parent.filename() != "stages" &&
      parent.parent_path().filename() == "stages") {
    lane = parent.filename().string();
  }
  return true;
}

namespace {

std::string fmt_error(const std::filesystem::path& path, const char* why) {
  return "cannot read " + path.string() + ": " + why;
}

std::optional<std::string> read_small_file(const std::filesystem::path& path, size_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return std::nullopt;
  }
  std::string text;
  char buffer[65536];
  ssize_t got = 0;
  while ((got = ::read(fd, buffer, sizeof buffer)) > 0 && text.size() < limit) {
    text.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return text;
}

// Reads a file ahead on a thread of its own into a few buffers while the caller analyses
// the chunk before: the copy out of the page cache then costs the analysis no time, and
// neither does finding the line ends, which the thread does for each chunk it read.
class ReadAhead {
public:
  explicit ReadAhead(int fd) : m_fd(fd) {
    for (size_t i = 0; i < k_buffers; ++i) {
      m_chunks[i].bytes.resize(k_chunk_bytes);
      m_free.push_back(i);
    }
    m_thread = std::thread([this] { run(); });
  }

  ~ReadAhead() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_changed.notify_all();
    m_thread.join();
  }

  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  struct Piece {
    std::string_view bytes;
    std::span<const uint32_t> newlines; // offsets of the '\n's in `bytes`
  };

  /// The next chunk of the file, empty at its end or on an error; valid until the next call.
  Piece next() {
    std::unique_lock lock(m_mutex);
    if (m_held) {
      m_free.push_back(*m_held);
      m_held.reset();
      m_changed.notify_all();
    }
    m_changed.wait(lock, [this] { return !m_filled.empty() || m_ended; });
    if (m_filled.empty()) {
      return {};
    }
    m_held = m_filled.front();
    m_filled.pop_front();
    const Chunk& chunk = m_chunks[*m_held];
    return {std::string_view(chunk.bytes.data(), chunk.size), chunk.newlines};
  }

  /// The errno of a failed read, 0 when the file was read to its end; once next() came back
  /// empty.
  int error() {
    std::lock_guard lock(m_mutex);
    return m_errno;
  }

private:
  static constexpr size_t k_buffers = 4;
  static constexpr size_t k_chunk_bytes = 1u << 20;

  struct Chunk {
    std::vector<char> bytes;
    size_t size = 0;
    std::vector<uint32_t> newlines;
  };

  void run() {
    for (;;) {
      size_t index = 0;
      {
        std::unique_lock lock(m_mutex);
        m_changed.wait(lock, [this] { return !m_free.empty() || m_stop; });
        if (m_stop) {
          return;
        }
        index = m_free.front();
        m_free.pop_front();
      }
      Chunk& chunk = m_chunks[index];
      ssize_t got = ::read(m_fd, chunk.bytes.data(), chunk.bytes.size());
      int read_errno = got < 0 ? errno : 0;
      if (got > 0) {
        chunk.size = static_cast<size_t>(got);
        find_newlines(std::string_view(chunk.bytes.data(), chunk.size), chunk.newlines);
      }
      {
        std::lock_guard lock(m_mutex);
        if (got <= 0) {
          m_errno = read_errno;
          m_ended = true;
        } else {
          m_filled.push_back(index);
        }
      }
      m_changed.notify_all();
      if (got <= 0) {
        return;
      }
    }
  }

  int m_fd;
  std::array<Chunk, k_buffers> m_chunks;
  std::mutex m_mutex;
  std::condition_variable m_changed;
  std::deque<size_t> m_free, m_filled;
  std::optional<size_t> m_held; // the chunk the caller has
  bool m_ended = false;
  bool m_stop = false;
  int m_errno = 0;
  std::thread m_thread;
};

} // namespace

tl::expected<LogResult, std::string> analyze_log_file(const std::filesystem::path& path,
                                                      const std::string& shown,
                                                      const Options& options) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return tl::unexpected(fmt_error(path, std::strerror(errno)));
  }
  LineClock clock;
  std::filesystem::path times = path;
  times.replace_extension(".times");
  // A sidecar is a few bytes per tenth of a second of build; 64 MiB is days of it.
  if (auto text = read_small_file(times, 64u << 20)) {
    clock = LineClock(parse_line_times(*text));
  }
  bool sidecar = !clock.empty();
  LogAnalyzer analyzer(options, std::move(clock));
  int read_errno = 0;
  {
    ReadAhead reader(fd);
    for (auto piece = reader.next(); !piece.bytes.empty(); piece = reader.next()) {
      analyzer.m_impl->feed_split(piece.bytes, piece.newlines);
    }
    read_errno = reader.error();
  }
  ::close(fd);
  if (read_errno != 0) {
    return tl::unexpected(fmt_error(path, std::strerror(read_errno)));
  }
  LogResult result = analyzer.finish();
  result.path = shown;
  result.line_times = sidecar;
  parse_log_name(path, result.stage, result.lane, result.attempt);
  return result;
}

namespace {

struct LogKey {
  std::string lane, stage;
  int attempt = 0;
  std::string path;
  bool operator<(const LogKey& other) const {
    return std::tie(lane, stage, attempt, path) <
           std::tie(other.lane, other.stage, other.attempt, other.path);
  }
};

bool failed_step(const StepResult& step) {
  return step.state == StepState::error;
}

const StepResult* first_failed_step(const LogResult& log) {
  for (const auto& step : log.steps) {
    if (failed_step(step)) {
      return &step;
    }
  }
  return nullptr;
}

std::vector<std::string> error_lines(const LogResult& log) {
  const StepResult* step = first_failed_step(log);
  return step ? step->errors : std::vector<std::string>{};
}

std::optional<long> log_jobs(const LogResult& log) {
  std::optional<long> jobs;
  for (const auto& step : log.steps) {
    if (step.jobs) {
      jobs = std::max(jobs.value_or(0), *step.jobs);
    }
  }
  return jobs;
}

std::string failure_text(const LogResult& log) {
  const StepResult* step = first_failed_step(log);
  if (!step) {
    return "the build failed";
  }
  std::string text = "step " + step->id + " " + step->name + " failed";
  if (!step->errors.empty()) {
    text += ": " + step->errors.front();
  }
  return text;
}

void find_retries(const std::vector<const LogResult*>& attempts, RunAnalysis& run) {
  for (size_t i = 0; i + 1 < attempts.size(); ++i) {
    const LogResult& a = *attempts[i];
    const LogResult& b = *attempts[i + 1];
    RetryFinding base;
    base.stage = a.stage;
    base.lane = a.lane;
    base.from_attempt = a.attempt;
    base.to_attempt = b.attempt;
    if (a.failed && !b.failed) {
      RetryFinding finding = base;
      finding.kind = "retry";
      finding.detail = "attempt " + std::to_string(a.attempt) + " failed (" + failure_text(a) +
                       "), attempt " + std::to_string(b.attempt) + " succeeded";
      run.retries.push_back(std::move(finding));
    } else if (a.failed && b.failed) {
      auto lines = error_lines(a);
      if (!lines.empty() && lines == error_lines(b)) {
        RetryFinding finding = base;
        finding.kind = "repeated-failure";
        finding.detail = "attempts " + std::to_string(a.attempt) + " and " +
                         std::to_string(b.attempt) + " failed with the same " +
                         std::to_string(lines.size()) + " error line(s): " + lines.front();
        run.retries.push_back(std::move(finding));
      }
    }
    // A -j / --parallel that went down: first step by step (the same instruction in both
    // attempts), else the largest of each attempt.
    bool found = false;
    for (const auto& before : a.steps) {
      if (!before.jobs) {
        continue;
      }
      for (const auto& after : b.steps) {
        if (after.name == before.name && after.jobs && *after.jobs < *before.jobs) {
          RetryFinding finding = base;
          finding.kind = "downgrade";
          finding.jobs_from = before.jobs;
          finding.jobs_to = after.jobs;
          finding.detail = "-j" + std::to_string(*before.jobs) + " -> -j" +
                           std::to_string(*after.jobs) + " (attempt " + std::to_string(a.attempt) +
                           " -> " + std::to_string(b.attempt) + ", step " + after.name + ")";
          run.retries.push_back(std::move(finding));
          found = true;
          break;
        }
      }
      if (found) {
        break;
      }
    }
    auto from = log_jobs(a);
    auto to = log_jobs(b);
    if (!found && from && to && *to < *from) {
      RetryFinding finding = base;
      finding.kind = "downgrade";
      finding.jobs_from = from;
      finding.jobs_to = to;
      finding.detail = "-j" + std::to_string(*from) + " -> -j" + std::to_string(*to) +
                       " (attempt " + std::to_string(a.attempt) + " -> " +
                       std::to_string(b.attempt) + ")";
      run.retries.push_back(std::move(finding));
    }
  }
}

} // namespace

void summarize(RunAnalysis& run) {
  run.stages.clear();
  run.retries.clear();
  std::map<std::pair<std::string, std::string>, std::vector<const LogResult*>> by_stage;
  std::vector<std::pair<std::string, std::string>> order;
  for (const auto& log : run.logs) {
    auto key = std::make_pair(log.lane, log.stage);
    if (!by_stage.count(key)) {
      order.push_back(key);
    }
    by_stage[key].push_back(&log);
  }
  for (const auto& key : order) {
    auto& attempts = by_stage[key];
    std::stable_sort(attempts.begin(), attempts.end(), [](const LogResult* a, const LogResult* b) {
      return a->attempt < b->attempt;
    });
    StageSummary summary;
    summary.lane = key.first;
    summary.stage = key.second;
    summary.attempts = static_cast<int>(attempts.size());
    for (const LogResult* log : attempts) {
      summary.clipped = summary.clipped || log->clipped;
      for (const auto& step : log->steps) {
        if (step.dockerfile_step) {
          ++summary.steps;
          summary.steps_cached += step.cached ? 1 : 0;
        }
        summary.step_seconds += step.seconds.value_or(0);
        summary.idle_tail_seconds += step.idle_tail_seconds.value_or(0);
        if (step.idle_tail_seconds &&
            *step.idle_tail_seconds >= run.options.idle_threshold_seconds) {
          ++summary.idle_tail_steps;
        }
        if (step.compile) {
          CompileCounts& counts = summary.compile ? *summary.compile : summary.compile.emplace();
          counts.requests += step.compile->requests;
          counts.hits += step.compile->hits;
          counts.misses += step.compile->misses;
        }
        summary.compile_bypass_steps += step.compile_bypass ? 1 : 0;
        summary.warnings += step.warnings.total;
        summary.signal_warnings += step.warnings.signal;
        summary.fetches_without_progress += step.fetches_without_progress;
      }
    }
    summary.step_seconds = round_ms(summary.step_seconds);
    summary.idle_tail_seconds = round_ms(summary.idle_tail_seconds);
    run.stages.push_back(std::move(summary));
    find_retries(attempts, run);
  }
}

tl::expected<RunAnalysis, std::string> analyze_target(const std::string& target,
                                                      const std::filesystem::path& records,
                                                      const Options& options) {
  namespace fs = std::filesystem;
  RunAnalysis run;
  run.options = options;
  std::error_code ec;
  fs::path path(target);
  if (target.empty()) {
    return tl::unexpected(std::string("no log, run folder or run id given"));
  }
  if (fs::is_regular_file(path, ec)) {
    auto log = analyze_log_file(path, target, options);
    if (!log) {
      return tl::unexpected(log.error());
    }
    run.logs.push_back(std::move(*log));
    summarize(run);
    return run;
  }
  fs::path folder;
  if (fs::is_directory(path, ec) && fs::is_directory(path / "stages", ec)) {
    folder = path;
  } else if (fs::is_directory(path, ec) && fs::is_directory(path / "runs", ec)) {
    return tl::unexpected(path.string() +
                          " is a records folder, not a run: name a run id under it (or latest) "
                          "with --records " +
                          path.string());
  } else if (target.find('/') == std::string::npos &&
             fs::is_directory(records / "runs" / target, ec)) {
    folder = records / "runs" / target;
  } else if (target == "latest" && fs::is_directory(records / "latest", ec)) {
    folder = fs::canonical(records / "latest", ec);
  } else if (fs::exists(path, ec)) {
    return tl::unexpected(path.string() +
                          " is neither a log file nor a run folder (one holding stages/)");
  } else if (target.find('/') != std::string::npos || path.extension() == ".log") {
    return tl::unexpected("no log file or run folder at " + target +
                          ": check the path, or pass a run id (looked up under " +
                          (records / "runs").string() + ", --records DIR)");
  } else {
    return tl::unexpected("no run '" + target + "' in " + (records / "runs").string() +
                          " and no file of that name: pass a log file, a run folder, or a run "
                          "id with --records DIR");
  }
  run.run_id = fs::path(folder).lexically_normal().filename().string();
  if (run.run_id->empty()) {
    run.run_id = fs::path(folder).lexically_normal().parent_path().filename().string();
  }
  std::vector<LogKey> found;
  fs::path stages = folder / "stages";
  for (auto it = fs::recursive_directory_iterator(stages, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) {
      continue;
    }
    fs::path relative = fs::relative(it->path(), folder, ec);
    LogKey key;
    key.path = relative.string();
    if (parse_log_name(relative, key.stage, key.lane, key.attempt)) {
      found.push_back(std::move(key));
    }
  }
  if (ec) {
    return tl::unexpected("cannot list " + stages.string() + ": " + ec.message());
  }
  std::sort(found.begin(), found.end());
  for (const auto& key : found) {
    auto log = analyze_log_file(folder / key.path, key.path, options);
    if (!log) {
      return tl::unexpected(log.error());
    }
    run.logs.push_back(std::move(*log));
  }
  if (auto text = read_small_file(folder / "manifest.json", k_manifest_read_limit)) {
    using Json = nlohmann::json;
    Json manifest = Json::parse(*text, nullptr, false);
    Json publish = manifest.is_object() ? manifest.value("publish", Json()) : Json();
    for (const Json& target : publish.is_array() ? publish : Json::array()) {
      if (!target.is_object()) {
        continue;
      }
      std::string status = json_field<std::string>(target, "status", "");
      if (status == "failed" || status == "blocked") {
        run.publish_failures.push_back({json_field<std::string>(target, "ref", ""), status,
                                        json_field<std::string>(target, "failure", ""),
                                        json_field<std::string>(target, "log", "")});
      }
    }
  }
  summarize(run);
  return run;
}

// ---------------------------------------------------------------------------------------------
// JSON

namespace {

using nlohmann::json;

json optional_number(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

json warnings_json(const WarningCounts& counts) {
  json classes = json::object();
  for (const auto& [klass, count] : counts.classes) {
    classes[klass] = count;
  }
  return {{"total", counts.total},
          {"noise", counts.noise},
          {"signal", counts.signal},
          {"unclassified", counts.unclassified},
          {"classes", classes}};
}

json compile_json(const std::optional<CompileCounts>& counts, bool with_source) {
  if (!counts) {
    return nullptr;
  }
  json out = {{"requests", counts->requests}, {"hits", counts->hits}, {"misses", counts->misses}};
  if (with_source) {
    out["source"] = counts->source;
  }
  return out;
}

json step_json(const StepResult& step) {
  return {{"id", step.id},
          {"name", step.name},
          {"stage", step.stage},
          {"dockerfile_step", step.dockerfile_step},
          {"cached", step.cached},
          {"state", state_name(step.state)},
          {"exit_code", step.exit_code ? json(*step.exit_code) : json(nullptr)},
          {"start", optional_number(step.start)},
          {"end", optional_number(step.end)},
          {"seconds", optional_number(step.seconds)},
          {"idle_tail_seconds", optional_number(step.idle_tail_seconds)},
          {"output_lines", step.output_lines},
          {"replayed_lines", step.replayed_lines},
          {"clipped", step.clipped},
          {"compile", compile_json(step.compile, true)},
          {"compiler_invocations", step.compiler_invocations},
          {"compile_bypass", step.compile_bypass},
          {"warnings", warnings_json(step.warnings)},
          {"flood", step.flood},
          {"fetches_without_progress", step.fetches_without_progress},
          {"errors", step.errors},
          {"error_lines_total", step.error_lines_total},
          {"errors_from_tail", step.errors_from_tail},
          {"jobs", step.jobs ? json(*step.jobs) : json(nullptr)}};
}

} // namespace

nlohmann::json to_json(const RunAnalysis& run) {
  json out;
  out["schema"] = 1;
  out["run_id"] = run.run_id ? json(*run.run_id) : json(nullptr);
  out["idle_tail_threshold_seconds"] = run.options.idle_threshold_seconds;
  out["flood_threshold_lines"] = run.options.flood_lines;
  json logs = json::array();
  struct Ranked {
    const LogResult* log;
    const StepResult* step;
  };
  std::vector<Ranked> timed;
  json idle_steps = json::array();
  double idle_total = 0;
  double idle_over = 0;
  json clips = json::array();
  json errors = json::array();
  WarningCounts warnings;
  long fetches = 0;
  for (const auto& log : run.logs) {
    json steps = json::array();
    for (const auto& step : log.steps) {
      steps.push_back(step_json(step));
      if (step.seconds) {
        timed.push_back({&log, &step});
      }
      if (step.idle_tail_seconds) {
        idle_total += *step.idle_tail_seconds;
        if (*step.idle_tail_seconds >= run.options.idle_threshold_seconds) {
          idle_over += *step.idle_tail_seconds;
          idle_steps.push_back({{"stage", log.stage},
                                {"lane", log.lane},
                                {"attempt", log.attempt},
                                {"id", step.id},
                                {"name", step.name},
                                {"idle_tail_seconds", *step.idle_tail_seconds}});
        }
      }
      if (step.state == StepState::error) {
        errors.push_back({{"stage", log.stage},
                          {"lane", log.lane},
                          {"attempt", log.attempt},
                          {"id", step.id},
                          {"name", step.name},
                          {"lines", step.errors},
                          {"from_tail", step.errors_from_tail}});
      }
      warnings += step.warnings;
      fetches += step.fetches_without_progress;
    }
    for (const auto& clip : log.clips) {
      clips.push_back({{"stage", log.stage},
                       {"lane", log.lane},
                       {"attempt", log.attempt},
                       {"id", clip.id},
                       {"line", clip.line}});
    }
    logs.push_back({{"path", log.path},
                    {"stage", log.stage},
                    {"lane", log.lane},
                    {"attempt", log.attempt},
                    {"format", log.format},
                    {"timed", log.timed},
                    {"line_times", log.line_times},
                    {"lines", log.lines},
                    {"bytes", log.bytes},
                    {"clipped", log.clipped},
                    {"failed", log.failed}});
    logs.back()["steps"] = std::move(steps);
  }
  out["logs"] = std::move(logs);
  json stages = json::array();
  for (const auto& stage : run.stages) {
    stages.push_back({{"stage", stage.stage},
                      {"lane", stage.lane},
                      {"attempts", stage.attempts},
                      {"steps", stage.steps},
                      {"steps_cached", stage.steps_cached},
                      {"step_seconds", stage.step_seconds},
                      {"idle_tail_seconds", stage.idle_tail_seconds},
                      {"idle_tail_steps", stage.idle_tail_steps},
                      {"compile", compile_json(stage.compile, false)},
                      {"compile_bypass_steps", stage.compile_bypass_steps},
                      {"warnings", stage.warnings},
                      {"signal_warnings", stage.signal_warnings},
                      {"clipped", stage.clipped},
                      {"fetches_without_progress", stage.fetches_without_progress}});
  }
  out["stages"] = std::move(stages);
  std::stable_sort(timed.begin(), timed.end(), [](const Ranked& a, const Ranked& b) {
    return *a.step->seconds > *b.step->seconds;
  });
  json slowest = json::array();
  for (size_t i = 0; i < timed.size() && i < run.options.top; ++i) {
    slowest.push_back({{"stage", timed[i].log->stage},
                       {"lane", timed[i].log->lane},
                       {"attempt", timed[i].log->attempt},
                       {"id", timed[i].step->id},
                       {"name", timed[i].step->name},
                       {"seconds", *timed[i].step->seconds}});
  }
  out["slowest_steps"] = std::move(slowest);
  out["idle_tails"] = {{"total_seconds", round_ms(idle_total)},
                       {"over_threshold_seconds", round_ms(idle_over)},
                       {"steps", std::move(idle_steps)}};
  out["clips"] = std::move(clips);
  json retries = json::array();
  for (const auto& retry : run.retries) {
    json entry = {{"stage", retry.stage},
                  {"lane", retry.lane},
                  {"kind", retry.kind},
                  {"detail", retry.detail},
                  {"from_attempt", retry.from_attempt},
                  {"to_attempt", retry.to_attempt}};
    if (retry.jobs_from && retry.jobs_to) {
      entry["jobs_from"] = *retry.jobs_from;
      entry["jobs_to"] = *retry.jobs_to;
    }
    retries.push_back(std::move(entry));
  }
  out["retries"] = std::move(retries);
  out["warnings"] = warnings_json(warnings);
  for (const auto& p : run.publish_failures) {
    errors.push_back({{"stage", "publish"},
                      {"lane", ""},
                      {"attempt", nullptr},
                      {"id", p.ref},
                      {"name", "publish " + p.ref + ": " + p.status},
                      {"lines", json::array({p.failure})},
                      {"from_tail", false},
                      {"log", p.log}});
  }
  out["errors"] = std::move(errors);
  out["fetches_without_progress"] = fetches;
  return out;
}

} // namespace kiln::forensics
