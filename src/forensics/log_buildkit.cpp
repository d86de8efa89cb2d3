// BuildKit's plain progress output (buildctl --progress=plain): `#<n> ` lines of each vertex,
// its header, its log lines with their seconds, and DONE, CACHED, CANCELED or ERROR.
#include <optional>
#include <string>

#include "engine/buildkit_progress.h"
#include "forensics/log_analyzer_impl.h"
#include "forensics/signals.h"

namespace kiln::forensics {

namespace {

// buildctl's printer (display.go) and logs.go upstream; see engine/buildkit_progress.cpp.
constexpr std::string_view k_replay_rule = "------";
constexpr std::string_view k_excerpt_rule = "--------------------";
constexpr std::string_view k_clip_head = "[output clipped, log limit ";
constexpr std::string_view k_clip_tail = " reached]";

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

} // namespace

bool is_buildkit_line(std::string_view line) {
  if (line.size() < 3 || line[0] != '#') {
    return false;
  }
  size_t space = line.find(' ');
  return space != std::string_view::npos && space > 1 && all_digits(line.substr(1, space - 1));
}

void LogAnalyzer::Impl::buildkit_line(std::string_view text, uint64_t at) {
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
    if (engine_error.empty()) {
      engine_error = one_line(text, k_error_line_limit);
    }
  }
}

// "0.262 text" -> the seconds and the text.
bool LogAnalyzer::Impl::log_line(std::string_view rest, Decimal& seconds, std::string_view& text) {
  const char* end = rest.data() + rest.size();
  const char* after = parse_decimal(rest.data(), end, 3, seconds);
  if (!after || (after != end && *after != ' ')) {
    return false;
  }
  text = after == end ? std::string_view{} : std::string_view(after + 1, end - after - 1);
  return true;
}

void LogAnalyzer::Impl::vertex_line(int number, std::string_view rest, uint64_t at) {
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

void LogAnalyzer::Impl::vertex_log(StepWork& s, const Decimal& seconds, std::string_view text,
                                   uint64_t at) {
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

void LogAnalyzer::Impl::vertex_event(StepWork& s, std::string_view rest, uint64_t at) {
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

void LogAnalyzer::Impl::close(StepWork& s, uint64_t at) {
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

} // namespace kiln::forensics
