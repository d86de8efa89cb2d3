// LogAnalyzer: splits a log into lines, tells its engine from the first ones and hands each
// line to that engine's reader; at the end, each step's times, compile counts and error lines.
#include "forensics/log_analysis.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "forensics/log_analyzer_impl.h"
#include "forensics/signals.h"

namespace kiln::forensics {

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

void LogAnalyzer::Impl::feed(std::string_view chunk) {
  std::vector<uint32_t> newlines;
  find_newlines(chunk, newlines);
  feed_split(chunk, newlines);
}

// `chunk` with the offsets of its newlines, found beforehand (on the reading thread when
// analyze_log_file reads): the lines between them go to line(), a line cut by the chunk's
// end waits in `carry` for the rest.
void LogAnalyzer::Impl::feed_split(std::string_view chunk, std::span<const uint32_t> newlines) {
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
void LogAnalyzer::Impl::append_carry(const char* p, const char* stop, const char* begin) {
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

void LogAnalyzer::Impl::line(std::string_view text, uint64_t at) {
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

// ----- the end -----

LogResult LogAnalyzer::Impl::finish() {
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
  // A BuildKit build that failed with no vertex in error lost its daemon, or was cancelled by
  // it: the step it was at failed, and the daemon's own error line is the reason.
  std::optional<size_t> lost_at;
  if (format == Format::buildkit && result.failed && !engine_error.empty() &&
      std::none_of(steps.begin(), steps.end(),
                   [](const StepWork& s) { return s.r.state == StepState::error; })) {
    for (size_t i = steps.size(); i-- > 0;) {
      if (steps[i].r.state == StepState::running || steps[i].r.state == StepState::canceled) {
        steps[i].r.state = StepState::error;
        lost_at = i;
        break;
      }
    }
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    StepWork& s = steps[i];
    if (s.block == Block::traceback) {
      end_traceback(s, {});
    }
    finish_step(s);
    if (lost_at == i) {
      s.r.errors = {engine_error};
      s.r.errors_from_tail = false;
      s.r.error_lines_total = 1;
    }
    result.steps.push_back(std::move(s.r));
  }
  steps.clear();
  return std::move(result);
}

void LogAnalyzer::Impl::finish_step(StepWork& s) {
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

LogAnalyzer::LogAnalyzer(const Options& options, LineClock clock)
    : m_impl(std::make_unique<Impl>(options, std::move(clock))) {}

LogAnalyzer::~LogAnalyzer() = default;

void LogAnalyzer::feed(std::string_view chunk) {
  m_impl->feed(chunk);
}

LogResult LogAnalyzer::finish() {
  return m_impl->finish();
}

} // namespace kiln::forensics
