#include "forensics/line_times.h"

#include <charconv>

namespace kiln::forensics {

std::string format_mark(const LineTimeMark& mark) {
  return std::to_string(mark.offset) + ' ' + std::to_string(mark.millis) + '\n';
}

std::string LineTimesWriter::on_chunk(uint64_t offset, uint64_t millis) {
  if (m_ended || (m_last_millis && millis < *m_last_millis + k_mark_interval_ms)) {
    return {};
  }
  m_last_millis = millis;
  return format_mark({offset, millis});
}

std::string LineTimesWriter::on_end(uint64_t offset, uint64_t millis) {
  if (m_ended) {
    return {};
  }
  m_ended = true;
  m_last_millis = millis;
  return format_mark({offset, millis});
}

namespace {

std::optional<uint64_t> parse_u64(std::string_view text) {
  if (text.empty() || text.size() > 19) {
    return std::nullopt;
  }
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

} // namespace

std::vector<LineTimeMark> parse_line_times(std::string_view text) {
  std::vector<LineTimeMark> marks;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    size_t space = line.find(' ');
    if (space == std::string_view::npos) {
      continue;
    }
    auto offset = parse_u64(line.substr(0, space));
    auto millis = parse_u64(line.substr(space + 1));
    if (!offset || !millis) {
      continue;
    }
    if (!marks.empty() && (*offset < marks.back().offset || *millis < marks.back().millis)) {
      continue;
    }
    marks.push_back({*offset, *millis});
  }
  return marks;
}

std::optional<double> LineClock::at(uint64_t offset) {
  if (m_next > 0 && m_marks[m_next - 1].offset > offset) {
    m_next = 0; // asked out of order: walk again from the start
  }
  while (m_next < m_marks.size() && m_marks[m_next].offset <= offset) {
    ++m_next;
  }
  if (m_next == 0) {
    return std::nullopt;
  }
  return static_cast<double>(m_marks[m_next - 1].millis) / 1000.0;
}

std::optional<double> LineClock::last() const {
  if (m_marks.empty()) {
    return std::nullopt;
  }
  return static_cast<double>(m_marks.back().millis) / 1000.0;
}

} // namespace kiln::forensics
