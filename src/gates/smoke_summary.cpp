#include "gates/smoke_summary.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "util/process.h"

namespace kiln {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_space(char c) {
  return c == ' ' || c == '\t';
}

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && is_space(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && is_space(s.back())) {
    s.remove_suffix(1);
  }
  return s;
}

std::size_t skip_digits(std::string_view s, std::size_t i) {
  while (i < s.size() && is_digit(s[i])) {
    ++i;
  }
  return i;
}

// The length of a `#12 0.345 ` prefix at the start of `line`, 0 when there is none. An empty
// log line keeps the space after the seconds; a caller that trimmed it leaves none.
std::size_t buildkit_prefix_length(std::string_view line) {
  if (line.empty() || line[0] != '#') {
    return 0;
  }
  auto i = skip_digits(line, 1);
  if (i == 1 || i >= line.size() || line[i] != ' ') {
    return 0;
  }
  auto seconds = i + 1;
  i = skip_digits(line, seconds);
  if (i == seconds || i >= line.size() || line[i] != '.') {
    return 0;
  }
  auto fraction = i + 1;
  i = skip_digits(line, fraction);
  if (i == fraction) {
    return 0;
  }
  if (i == line.size()) {
    return i;
  }
  return line[i] == ' ' ? i + 1 : 0;
}

// Both at most k_max_test_count, so the sum cannot overflow before it is held there.
int add_counts(int a, int b) {
  return std::min(a + b, k_max_test_count);
}

TestSummary summary_of(std::string format, int passed = 0, int failed = 0, int skipped = 0) {
  TestSummary summary;
  summary.format = std::move(format);
  summary.passed = passed;
  summary.failed = failed;
  summary.skipped = skipped;
  return summary;
}

// Plain digits only: no sign, no spaces, and small enough for an int.
std::optional<int> parse_count(std::string_view s) {
  if (s.empty() || s.size() > 9 || skip_digits(s, 0) != s.size()) {
    return std::nullopt;
  }
  int value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return std::nullopt;
  }
  return value;
}

// `<count> <word>`, split at the single space.
std::optional<std::pair<int, std::string_view>> count_item(std::string_view item) {
  auto space = item.find(' ');
  if (space == std::string_view::npos) {
    return std::nullopt;
  }
  auto count = parse_count(item.substr(0, space));
  auto word = item.substr(space + 1);
  if (!count || word.empty() || word.find(' ') != std::string_view::npos) {
    return std::nullopt;
  }
  return std::pair{*count, word};
}

// Items separated by `,` and optional spaces; an empty item makes the list unreadable.
std::optional<std::vector<std::string_view>> comma_items(std::string_view s) {
  std::vector<std::string_view> items;
  while (true) {
    auto comma = s.find(',');
    auto item = trim_spaces(s.substr(0, comma));
    if (item.empty()) {
      return std::nullopt;
    }
    items.push_back(item);
    if (comma == std::string_view::npos) {
      return items;
    }
    s.remove_prefix(comma + 1);
  }
}

// One noun a runner counts and the TestSummary count it adds to (none: counted nowhere).
struct CountWord {
  std::string_view word;
  int TestSummary::*count;
};

// `<count> <word>, ...` where every word is one of `words`, each named at most once.
std::optional<TestSummary> sum_counts(std::string_view s, std::span<const CountWord> words,
                                      std::string format) {
  auto items = comma_items(s);
  if (!items) {
    return std::nullopt;
  }
  auto summary = summary_of(std::move(format));
  std::vector<bool> seen(words.size());
  for (auto item : *items) {
    auto counted = count_item(item);
    if (!counted) {
      return std::nullopt;
    }
    // Named copies, not a structured binding: clang 14 cannot capture one in a lambda.
    int count = counted->first;
    std::string_view word = counted->second;
    auto known = std::find_if(words.begin(), words.end(),
                              [&](const CountWord& entry) { return entry.word == word; });
    auto which = static_cast<std::size_t>(known - words.begin());
    if (known == words.end() || seen[which]) {
      return std::nullopt;
    }
    seen[which] = true;
    if (known->count) {
      summary.*(known->count) = add_counts(summary.*(known->count), count);
    }
  }
  return summary;
}

std::optional<TestSummary> parse_plain(std::string_view s) {
  constexpr std::array<CountWord, 3> k_words = {{{"passed", &TestSummary::passed},
                                                 {"failed", &TestSummary::failed},
                                                 {"skipped", &TestSummary::skipped}}};
  return sum_counts(s, k_words, "plain");
}

// `0.12s`, `61.01s (0:01:01)` past a minute, or `0.12 seconds` (older pytest).
bool is_pytest_duration(std::string_view s) {
  auto whole = skip_digits(s, 0);
  if (whole == 0 || whole >= s.size() || s[whole] != '.') {
    return false;
  }
  auto end = skip_digits(s, whole + 1);
  if (end == whole + 1) {
    return false;
  }
  auto rest = s.substr(end);
  if (rest == "s" || rest == " seconds") {
    return true;
  }
  return rest.size() > 4 && rest.starts_with("s (") && rest.back() == ')';
}

// pytest's `write_sep("=", msg)` pads with at least one `=` a side, one more on the right when
// the width leaves room for it.
std::string_view without_pytest_rule(std::string_view s) {
  if (s.empty() || s.front() != '=') {
    return s;
  }
  auto left = s.find_first_not_of('=');
  auto right = s.find_last_not_of('=');
  if (left == std::string_view::npos || s[left] != ' ' || s[right] != ' ' || right <= left) {
    return {};
  }
  return s.substr(left + 1, right - left - 1);
}

std::optional<TestSummary> parse_pytest(std::string_view s) {
  auto body = without_pytest_rule(s);
  auto in = body.find(" in ");
  if (in == std::string_view::npos || !is_pytest_duration(body.substr(in + 4))) {
    return std::nullopt;
  }
  auto counts = body.substr(0, in);
  if (counts == "no tests ran") {
    return summary_of("pytest");
  }
  // pytest's terminal reporter names each kind once. Older pytest printed its stat keys as they
  // are (`2 error`, `1 warnings`), so either number of those two nouns is read. An unexpected
  // pass still passed, an expected failure is a known skip, an error is a failure.
  constexpr std::array<CountWord, 11> k_words = {{{"passed", &TestSummary::passed},
                                                  {"failed", &TestSummary::failed},
                                                  {"skipped", &TestSummary::skipped},
                                                  {"xfailed", &TestSummary::skipped},
                                                  {"xpassed", &TestSummary::passed},
                                                  {"error", &TestSummary::failed},
                                                  {"errors", &TestSummary::failed},
                                                  {"warning", nullptr},
                                                  {"warnings", nullptr},
                                                  {"rerun", nullptr},
                                                  {"deselected", nullptr}}};
  return sum_counts(counts, k_words, "pytest");
}

// `75% tests passed, 1 tests failed out of 4`; what the did-not-run list adds is read apart.
struct CtestTotals {
  int failed = 0;
  int total = 0;
};

std::optional<CtestTotals> parse_ctest_totals(std::string_view s) {
  auto percent = skip_digits(s, 0);
  constexpr std::string_view k_passed = "% tests passed, ";
  if (percent == 0 || s.substr(percent, k_passed.size()) != k_passed) {
    return std::nullopt;
  }
  auto rest = s.substr(percent + k_passed.size());
  auto failed_end = skip_digits(rest, 0);
  constexpr std::string_view k_failed = " tests failed out of ";
  if (rest.substr(failed_end, k_failed.size()) != k_failed) {
    return std::nullopt;
  }
  auto failed = parse_count(rest.substr(0, failed_end));
  auto total = parse_count(rest.substr(failed_end + k_failed.size()));
  if (!failed || !total || *failed > *total) {
    return std::nullopt;
  }
  return CtestTotals{*failed, *total};
}

enum class NotRun { none, skipped, disabled };

// `\t  4 - name (Skipped)` or `(Disabled)`, under "The following tests did not run:".
NotRun not_run_entry(std::string_view s) {
  auto number = skip_digits(s, 0);
  if (number == 0 || s.substr(number, 3) != " - ") {
    return NotRun::none;
  }
  if (s.ends_with(" (Skipped)")) {
    return NotRun::skipped;
  }
  if (s.ends_with(" (Disabled)")) {
    return NotRun::disabled;
  }
  return NotRun::none;
}

} // namespace

std::string printed_text(std::string_view line) {
  while (!line.empty() && line.back() == '\r') {
    line.remove_suffix(1);
  }
  line.remove_prefix(buildkit_prefix_length(line));
  std::string out;
  out.reserve(line.size());
  for (std::size_t i = 0; i < line.size(); ++i) {
    // SGR only (ESC [ digits and semicolons m): the colour pytest and ctest print when forced.
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      auto end = line.find_first_not_of("0123456789;", i + 2);
      if (end != std::string_view::npos && line[end] == 'm') {
        i = end;
        continue;
      }
    }
    out.push_back(line[i]);
  }
  return out;
}

namespace {

std::string_view without_cr(std::string_view s) {
  while (!s.empty() && s.back() == '\r') {
    s.remove_suffix(1);
  }
  return s;
}

bool is_rule(std::string_view line) {
  return without_cr(line) == "------";
}

} // namespace

void SummaryReader::line(std::string_view text) {
  m_window.emplace_back(text.substr(0, k_summary_line_limit));
  while (m_window.size() >= 3) {
    step();
  }
}

SmokeCounts SummaryReader::finish() {
  while (!m_window.empty()) {
    step();
  }
  end_ctest_list();
  return std::move(m_counts);
}

// BuildKit's replay of a failed step's last log lines: `------`, ` > <vertex name>:`, the lines
// with their prefixes, `------`. buildctl prints the frame itself, so its lines carry no prefix;
// a replayed output line that reads `------` keeps its prefix and does not end the replay.
bool SummaryReader::replay_starts() const {
  if (m_window.size() < 3 || !is_rule(m_window[0])) {
    return false;
  }
  std::string_view title = without_cr(m_window[1]);
  // The replayed lines keep their `#N 0.123 ` prefix: output that merely looks like the frame
  // is not skipped.
  return title.starts_with(" > ") && title.ends_with(':') &&
         (is_rule(m_window[2]) || buildkit_prefix_length(m_window[2]) != 0);
}

void SummaryReader::step() {
  if (!m_in_replay && replay_starts()) {
    // The rule and the title; then everything up to and with the closing rule.
    for (int frame = 0; frame < 2; ++frame) {
      ++m_number;
      ctest_list_line(m_window.front());
      m_window.pop_front();
    }
    m_in_replay = true;
    return;
  }
  ++m_number;
  std::string front = std::move(m_window.front());
  m_window.pop_front();
  // The list after a ctest summary is read from the lines as printed, replay or not.
  ctest_list_line(front);
  if (m_in_replay) {
    m_in_replay = !is_rule(front);
    return;
  }
  summary_line(front);
}

void SummaryReader::summary_line(std::string_view raw) {
  auto printed = printed_text(raw);
  auto text = trim_spaces(printed);
  std::optional<TestSummary> found;
  if (text == "No tests were found!!!") {
    found = summary_of("ctest");
  } else if (auto totals = parse_ctest_totals(text)) {
    // Its counts wait for the list of tests that did not run, in the lines that follow.
    TestSummary ctest = summary_of("ctest");
    ctest.line = static_cast<int>(m_number);
    ctest.text = std::string(text);
    m_ctest = CtestList{std::move(ctest), totals->failed, totals->total};
    return;
  } else if (auto pytest = parse_pytest(text)) {
    found = pytest;
  } else if (auto plain = parse_plain(text)) {
    found = plain;
  }
  if (found) {
    found->line = static_cast<int>(m_number);
    found->text = std::string(text);
    add(std::move(*found));
  }
}

void SummaryReader::ctest_list_line(std::string_view raw) {
  if (!m_ctest) {
    return;
  }
  auto printed = printed_text(raw);
  auto next = trim_spaces(printed);
  CtestList& list = *m_ctest;
  if (!list.in_list) {
    // The list follows the summary after a blank line, the total time and another blank.
    if (next.empty() || (!list.total_time_seen && next.starts_with("Total Test time"))) {
      list.total_time_seen = list.total_time_seen || !next.empty();
      return;
    }
    if (next == "The following tests did not run:") {
      list.in_list = true;
      return;
    }
    end_ctest_list();
    return;
  }
  NotRun entry = not_run_entry(next);
  if (entry == NotRun::none) {
    end_ctest_list();
    return;
  }
  int& listed = entry == NotRun::skipped ? list.skipped : list.disabled;
  listed = add_counts(listed, 1);
}

void SummaryReader::end_ctest_list() {
  if (!m_ctest) {
    return;
  }
  CtestList list = std::move(*m_ctest);
  m_ctest.reset();
  // More skipped tests than the total leaves room for cannot be this run's list.
  if (list.skipped > list.total - list.failed) {
    list.skipped = 0;
    list.disabled = 0;
  }
  list.summary.passed = list.total - list.failed - list.skipped;
  list.summary.failed = list.failed;
  list.summary.skipped = add_counts(list.skipped, list.disabled);
  add(std::move(list.summary));
}

void SummaryReader::add(TestSummary summary) {
  m_counts.passed = add_counts(m_counts.passed, summary.passed);
  m_counts.failed = add_counts(m_counts.failed, summary.failed);
  m_counts.skipped = add_counts(m_counts.skipped, summary.skipped);
  m_counts.summaries.push_back(std::move(summary));
}

SmokeCounts find_test_summaries(const std::vector<std::string>& lines) {
  SummaryReader reader;
  for (const std::string& line : lines) {
    reader.line(line);
  }
  return reader.finish();
}

tl::expected<SmokeCounts, std::string> find_test_summaries_in(const std::filesystem::path& log) {
  std::FILE* file = std::fopen(log.c_str(), "rb");
  if (file == nullptr) {
    return tl::unexpected(fmt::format("cannot read {}: {}", log.string(), std::strerror(errno)));
  }
  SummaryReader reader;
  LineSplitter lines([&](std::string_view line) { reader.line(line); }, k_summary_line_limit);
  std::string chunk(1 << 20, '\0');
  for (size_t n; (n = std::fread(chunk.data(), 1, chunk.size(), file)) > 0;) {
    lines.feed(std::string_view(chunk.data(), n));
  }
  bool failed = std::ferror(file) != 0;
  int error = errno;
  std::fclose(file);
  if (failed) {
    return tl::unexpected(fmt::format("cannot read {}: {}", log.string(), std::strerror(error)));
  }
  lines.finish();
  return reader.finish();
}

} // namespace kiln
