// What any step's output says, line by line: its error lines (multi-line Python tracebacks and
// CMake errors among them) and last lines, compiler invocations and the most jobs asked for,
// compile-cache statistics (sccache, ccache, kiln-cc), warnings and fetches without progress.
#include <algorithm>
#include <array>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "compilecache/sccache_stats.h"
#include "compilecache/stats_line.h"
#include "forensics/log_analyzer_impl.h"
#include "forensics/signals.h"

namespace kiln::forensics {

namespace {

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

bool mentions_fetch(std::string_view text) {
  return text.find("wget") != std::string_view::npos || text.find("curl") != std::string_view::npos;
}

} // namespace

void LogAnalyzer::Impl::add_error(StepWork& s, std::string_view text) {
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

void LogAnalyzer::Impl::end_traceback(StepWork& s, std::string_view exception) {
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
bool LogAnalyzer::Impl::continue_block(StepWork& s, std::string_view text) {
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
void LogAnalyzer::Impl::note_dash(StepWork& s, std::string_view text, const char* p, bool& dash_c) {
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

void LogAnalyzer::Impl::note_jobs(StepWork& s, std::string_view text, bool& dash_c) {
  find_marks(
      text, [&](const char* p) { note_dash(s, text, p, dash_c); }, nullptr, 0);
}

void LogAnalyzer::Impl::remember_tail(StepWork& s, std::string_view text) {
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

void LogAnalyzer::Impl::scan(StepWork& s, std::string_view text) {
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

void LogAnalyzer::Impl::sccache_text_line(StepWork& s, std::string_view text) {
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

void LogAnalyzer::Impl::ccache_print_stats_line(StepWork& s, std::string_view text) {
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

bool LogAnalyzer::Impl::ccache_summary_line(StepWork& s, std::string_view text) {
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

StepWork& LogAnalyzer::Impl::new_step(std::string id, std::string_view name, std::string stage,
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
std::unique_ptr<TailRing> LogAnalyzer::Impl::take_tail_ring() {
  if (spare_tails.empty()) {
    return std::unique_ptr<TailRing>(new TailRing);
  }
  std::unique_ptr<TailRing> ring = std::move(spare_tails.back());
  spare_tails.pop_back();
  ring->size = 0;
  return ring;
}

void LogAnalyzer::Impl::succeeded(StepWork& s) {
  s.open = false;
  if (s.tail) {
    spare_tails.push_back(std::move(s.tail));
  }
  s.traceback_frames.clear();
}

} // namespace kiln::forensics
