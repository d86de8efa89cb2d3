#include "engine/buildkit_progress.h"

#include <algorithm>
#include <charconv>

namespace kiln {

namespace {

/// Append `item`, and once twice k_vertex_lines_kept are held drop the older half: the last
/// lines stay, at an amortised constant cost per line.
template <typename T> void keep_tail(std::vector<T>& items, T item) {
  items.push_back(std::move(item));
  if (items.size() >= 2 * k_vertex_lines_kept) {
    items.erase(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(k_vertex_lines_kept));
  }
}

// printErrorLogs in display.go frames the logs it replays for a failed vertex with this.
constexpr std::string_view k_replay_rule = "------";
// errdefs.Source.Print frames the Dockerfile excerpt with this.
constexpr std::string_view k_excerpt_rule = "--------------------";
// handleErr in buildctl's main.go, for whatever error ended the command.
constexpr std::string_view k_error_prefix = "error: ";
// logs.go appends "\n[output clipped, log limit 2KiB reached]\n" to the step's own output; the
// limit varies with BUILDKIT_STEP_LOG_MAX_SIZE (or reads "…/s" for the speed limit).
constexpr std::string_view k_clip_head = "[output clipped, log limit ";
constexpr std::string_view k_clip_tail = " reached]";

bool all_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<int> parse_number(std::string_view text) {
  if (!all_digits(text)) {
    return std::nullopt;
  }
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

// "%.1f" as the printer writes it: no sign, no exponent.
std::optional<double> parse_seconds(std::string_view text) {
  std::size_t dot = text.find('.');
  if (dot == std::string_view::npos || !all_digits(text.substr(0, dot)) ||
      !all_digits(text.substr(dot + 1))) {
    return std::nullopt;
  }
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

std::string_view trim_spaces(std::string_view text) {
  while (!text.empty() && text.front() == ' ') {
    text.remove_prefix(1);
  }
  while (!text.empty() && text.back() == ' ') {
    text.remove_suffix(1);
  }
  return text;
}

// The text of a log line, given what follows "#N ". display.go writes the elapsed seconds with
// 3 decimals below 10s, 2 below 100s and 1 beyond, then a space, then the text (possibly empty).
std::optional<std::string_view> log_text(std::string_view rest) {
  std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos || !all_digits(rest.substr(0, dot))) {
    return std::nullopt;
  }
  std::size_t space = rest.find(' ', dot);
  std::string_view decimals = rest.substr(
      dot + 1, space == std::string_view::npos ? std::string_view::npos : space - dot - 1);
  if (!all_digits(decimals) || decimals.size() > 3) {
    return std::nullopt;
  }
  // A log collector that strips trailing blanks would turn "#6 0.262 " into "#6 0.262".
  if (space == std::string_view::npos) {
    return std::string_view{};
  }
  return rest.substr(space + 1);
}

bool is_clip_marker(std::string_view text) {
  return text.size() > k_clip_head.size() + k_clip_tail.size() && text.starts_with(k_clip_head) &&
         text.ends_with(k_clip_tail);
}

// errdefs.Source.Print opens the excerpt with "<filename>:<first line>"; the filename is the
// frontend's (a Dockerfile name or path), which has no blanks in the recordings.
std::optional<int> excerpt_opening_line(std::string_view line) {
  std::size_t colon = line.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || line.front() == '#' ||
      line.find(' ') != std::string_view::npos) {
    return std::nullopt;
  }
  return parse_number(line.substr(colon + 1));
}

// Excerpt lines are " %3d | <marker> <source line>".
bool is_excerpt_source_line(std::string_view line) {
  line = line.substr(std::min(line.find_first_not_of(' '), line.size()));
  std::size_t bar = line.find(" | ");
  return bar != std::string_view::npos && all_digits(line.substr(0, bar));
}

// logrus's text formatter quotes a value with strconv.Quote when it holds anything beyond
// [A-Za-z0-9-._/@^+]; the escapes below are the single-character ones Quote emits, anything
// else (\x.., \u....) is kept as printed.
std::optional<std::string> read_logrus_value(std::string_view& text) {
  if (text.empty() || text.front() != '"') {
    std::size_t end = std::min(text.find(' '), text.size());
    std::string value(text.substr(0, end));
    text.remove_prefix(end);
    return value;
  }
  std::string value;
  for (std::size_t i = 1; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      text.remove_prefix(i + 1);
      return value;
    }
    if (c != '\\' || i + 1 == text.size()) {
      value += c;
      continue;
    }
    char escaped = text[++i];
    switch (escaped) {
    case '"':
    case '\\':
      value += escaped;
      break;
    case 'n':
      value += '\n';
      break;
    case 't':
      value += '\t';
      break;
    case 'r':
      value += '\r';
      break;
    case 'a':
      value += '\a';
      break;
    case 'b':
      value += '\b';
      break;
    case 'f':
      value += '\f';
      break;
    case 'v':
      value += '\v';
      break;
    default:
      value += '\\';
      value += escaped;
    }
  }
  return std::nullopt; // no closing quote: not a logrus line after all
}

// buildctl's own logging (logrus, no terminal): time="..." level=warning msg="..." key=value...
std::optional<ClientLog> parse_client_log(std::string_view line) {
  if (!line.starts_with("time=\"")) {
    return std::nullopt;
  }
  ClientLog log;
  bool has_level = false;
  bool has_message = false;
  while (!line.empty()) {
    std::size_t equals = line.find('=');
    if (equals == std::string_view::npos || equals == 0) {
      return std::nullopt;
    }
    std::string_view key = line.substr(0, equals);
    line.remove_prefix(equals + 1);
    auto value = read_logrus_value(line);
    if (!value) {
      return std::nullopt;
    }
    if (key == "level") {
      log.level = std::move(*value);
      has_level = true;
    } else if (key == "msg") {
      log.message = std::move(*value);
      has_message = true;
    }
    if (!line.empty()) {
      if (line.front() != ' ') {
        return std::nullopt;
      }
      line.remove_prefix(1);
    }
  }
  if (!has_level || !has_message) {
    return std::nullopt;
  }
  return log;
}

} // namespace

Vertex classify_vertex_name(std::string_view name) {
  Vertex vertex;
  vertex.name = std::string(name);
  // Only the first bracket group counts: an instruction such as RUN ["sh", "-c", "..."] brings
  // brackets of its own.
  if (!name.starts_with('[')) {
    return vertex;
  }
  std::size_t close = name.find(']');
  if (close == std::string_view::npos) {
    return vertex;
  }
  std::string_view inside = name.substr(1, close - 1);
  std::string_view after = name.substr(close + 1);
  if (!after.empty() && after.front() != ' ') {
    return vertex;
  }
  std::string_view tail = after.empty() ? after : after.substr(1);

  if (inside == "internal") {
    vertex.kind = VertexKind::internal;
    return vertex;
  }
  if (inside.starts_with("context ")) {
    std::string_view context = inside.substr(8);
    if (!context.empty() && context.find(' ') == std::string_view::npos) {
      vertex.kind = VertexKind::context;
      vertex.stage = std::string(context);
    }
    return vertex;
  }

  // "[<stage> <i>/<n>]" or "[<i>/<n>]"; the frontend pads <i> with spaces to the width of <n>.
  std::size_t last_space = inside.rfind(' ');
  std::string_view fraction =
      last_space == std::string_view::npos ? inside : inside.substr(last_space + 1);
  std::string_view stage =
      last_space == std::string_view::npos ? std::string_view{} : inside.substr(0, last_space);
  stage = trim_spaces(stage);
  std::size_t slash = fraction.find('/');
  if (slash == std::string_view::npos || stage.find(' ') != std::string_view::npos) {
    return vertex;
  }
  auto step = parse_number(fraction.substr(0, slash));
  auto steps = parse_number(fraction.substr(slash + 1));
  if (!step || !steps || *step < 1 || *steps < 1) {
    return vertex;
  }
  vertex.kind = VertexKind::step;
  vertex.stage = std::string(stage);
  vertex.step = *step;
  vertex.steps = *steps;
  vertex.instruction = std::string(tail);
  return vertex;
}

LineKind PlainProgress::feed(std::string_view line) {
  if (m_block == Block::replay) {
    if (line == k_replay_rule) {
      m_block = Block::none;
    }
    return LineKind::replay;
  }
  if (m_block == Block::excerpt_opening || m_block == Block::excerpt) {
    if (line == k_excerpt_rule) {
      // Several sources can be printed; the first is the one the failure points at.
      if (m_block == Block::excerpt_opening && m_dockerfile_line == 0) {
        m_dockerfile_line = m_excerpt_opening;
      }
      m_block = m_block == Block::excerpt_opening ? Block::excerpt : Block::none;
      return LineKind::excerpt;
    }
    if (m_block == Block::excerpt && is_excerpt_source_line(line)) {
      return LineKind::excerpt;
    }
    m_block = Block::none;
  }

  if (line.empty()) {
    m_header_due = true;
    return LineKind::blank;
  }
  if (line == k_replay_rule) {
    m_block = Block::replay;
    return LineKind::replay;
  }
  if (line.starts_with(k_error_prefix)) {
    if (m_solve_error.empty()) {
      m_solve_error = std::string(line.substr(k_error_prefix.size()));
    }
    return LineKind::solve_error;
  }
  if (line.starts_with('#')) {
    std::size_t space = line.find(' ');
    if (space != std::string_view::npos) {
      if (auto number = parse_number(line.substr(1, space - 1))) {
        return feed_vertex_line(*number, line.substr(space + 1));
      }
    }
    return LineKind::other;
  }
  if (auto log = parse_client_log(line)) {
    keep_tail(m_client_logs, std::move(*log));
    return LineKind::client_log;
  }
  if (auto first_line = excerpt_opening_line(line)) {
    m_excerpt_opening = *first_line;
    m_block = Block::excerpt_opening;
    return LineKind::excerpt;
  }
  return LineKind::other;
}

LineKind PlainProgress::feed_vertex_line(int number, std::string_view rest) {
  Vertex* current = m_current ? &m_vertices[*m_current] : nullptr;

  // A log line is formatted when it arrives, possibly before the printer has numbered its
  // vertex; it is still printed under that vertex's header.
  if (number == 0) {
    auto text = log_text(rest);
    if (!current || !text) {
      return LineKind::other;
    }
    m_header_due = false;
    return feed_event(*current, rest);
  }

  Vertex* known = find_mutable(number);
  if (known && rest == "...") {
    m_header_due = true;
    return LineKind::left;
  }

  bool is_current = current && current->number == number;
  bool header = m_header_due || !is_current;
  // A vertex keeps its name, so after a blank that only ended a log line cut short, a line of
  // the current vertex that is not its name reports on it rather than naming it again.
  if (header && is_current && rest != current->name) {
    header = false;
  }
  m_header_due = false;
  if (!header) {
    return feed_event(*current, rest);
  }
  if (!known) {
    Vertex vertex = classify_vertex_name(rest);
    vertex.number = number;
    m_by_number.emplace(number, m_vertices.size());
    m_vertices.push_back(std::move(vertex));
  }
  m_current = m_by_number.at(number);
  return LineKind::header;
}

LineKind PlainProgress::feed_event(Vertex& vertex, std::string_view rest) {
  if (auto text = log_text(rest)) {
    if (is_clip_marker(*text)) {
      vertex.clipped = true;
    } else {
      keep_tail(vertex.logs, std::string(*text));
      ++vertex.log_lines;
    }
    return LineKind::log;
  }
  if (rest == "DONE") {
    vertex.state = VertexState::done;
    return LineKind::done;
  }
  if (rest.starts_with("DONE ") && rest.ends_with('s')) {
    if (auto seconds = parse_seconds(rest.substr(5, rest.size() - 6))) {
      vertex.state = VertexState::done;
      vertex.seconds = seconds;
      return LineKind::done;
    }
  }
  if (rest == "CACHED") {
    vertex.state = VertexState::cached;
    return LineKind::cached;
  }
  if (rest == "CANCELED") {
    vertex.state = VertexState::canceled;
    return LineKind::canceled;
  }
  if (rest.starts_with("ERROR: ")) {
    vertex.state = VertexState::error;
    vertex.error = std::string(rest.substr(7));
    return LineKind::error;
  }
  if (rest.starts_with("WARN: ")) {
    keep_tail(vertex.warnings, std::string(rest.substr(6)));
    return LineKind::warning;
  }
  keep_tail(vertex.statuses, std::string(rest));
  return LineKind::status;
}

Vertex* PlainProgress::find_mutable(int number) {
  auto found = m_by_number.find(number);
  return found == m_by_number.end() ? nullptr : &m_vertices[found->second];
}

const Vertex* PlainProgress::find(int number) const {
  auto found = m_by_number.find(number);
  return found == m_by_number.end() ? nullptr : &m_vertices[found->second];
}

const Vertex* PlainProgress::current() const {
  return m_current ? &m_vertices[*m_current] : nullptr;
}

const Vertex* PlainProgress::failed() const {
  auto found = std::find_if(m_vertices.begin(), m_vertices.end(),
                            [](const Vertex& v) { return v.state == VertexState::error; });
  return found == m_vertices.end() ? nullptr : &*found;
}

int PlainProgress::steps() const {
  return static_cast<int>(std::count_if(m_vertices.begin(), m_vertices.end(), [](const Vertex& v) {
    return v.kind == VertexKind::step;
  }));
}

int PlainProgress::steps_cached() const {
  return static_cast<int>(std::count_if(m_vertices.begin(), m_vertices.end(), [](const Vertex& v) {
    return v.kind == VertexKind::step && v.state == VertexState::cached;
  }));
}

} // namespace kiln
