#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::forensics {

/// The line-time sidecar of an attempt log, `<log>.times` beside `<stage>.attempt-N.log`: one
/// line per mark, `<byte offset in the .log> <milliseconds since the attempt started>\n`. A line
/// of the log has the time of the last mark at or before its offset.
struct LineTimeMark {
  uint64_t offset = 0;
  uint64_t millis = 0;
};

/// Decides when kiln writes a mark: on the first chunk of output, on a chunk that arrives at
/// least k_mark_interval_ms after the last mark, and at the end of the attempt.
class LineTimesWriter {
public:
  static constexpr uint64_t k_mark_interval_ms = 100;

  /// The mark to write for a chunk starting at `offset` arriving `millis` after the start, or
  /// "" when the last mark is recent enough.
  std::string on_chunk(uint64_t offset, uint64_t millis);
  /// The final mark: the end of the log (`offset` = its size) at `millis`. Always written once.
  std::string on_end(uint64_t offset, uint64_t millis);

private:
  std::optional<uint64_t> m_last_millis;
  bool m_ended = false;
};

std::string format_mark(const LineTimeMark& mark);

/// The marks of a sidecar's text in file order. Lines that are not two decimal numbers, and
/// marks whose offset or time goes backwards, are passed over: a reader trusts only what can
/// be true of a log written front to back.
std::vector<LineTimeMark> parse_line_times(std::string_view text);

/// Answers "when did the byte at this offset arrive" for offsets asked in increasing order, as
/// a one-pass reader asks them.
class LineClock {
public:
  LineClock() = default;
  explicit LineClock(std::vector<LineTimeMark> marks) : m_marks(std::move(marks)) {}

  bool empty() const { return m_marks.empty(); }
  /// Seconds since the attempt started of the last mark at or before `offset`; nullopt before
  /// the first mark. `offset` may go back; a forward walk is the cheap case.
  std::optional<double> at(uint64_t offset);
  /// The time of the last mark (the end of the attempt when kiln finished writing it).
  std::optional<double> last() const;

private:
  std::vector<LineTimeMark> m_marks;
  size_t m_next = 0; // first mark past the last offset asked
};

} // namespace kiln::forensics
