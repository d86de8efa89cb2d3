#include "dockerfile/parser.h"

#include <algorithm>
#include <array>
#include <optional>
#include <set>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/strings.h"

namespace kiln {
namespace {

using namespace std::string_view_literals;

// A switch on the length first: every instruction of every file goes through this test.
bool is_known_keyword(std::string_view kw) {
  switch (kw.size()) {
  case 3:
    return kw == "add"sv || kw == "arg"sv || kw == "cmd"sv || kw == "env"sv || kw == "run"sv;
  case 4:
    return kw == "copy"sv || kw == "from"sv || kw == "user"sv;
  case 5:
    return kw == "label"sv || kw == "shell"sv;
  case 6:
    return kw == "expose"sv || kw == "volume"sv;
  case 7:
    return kw == "onbuild"sv || kw == "workdir"sv;
  case 10:
    return kw == "entrypoint"sv || kw == "maintainer"sv || kw == "stopsignal"sv;
  case 11:
    return kw == "healthcheck"sv;
  default:
    return false;
  }
}
// BuildKit tries JSON on these only; the rest take their arguments verbatim.
constexpr std::array k_maybe_json = {"add"sv, "cmd"sv,   "copy"sv,  "entrypoint"sv,
                                     "run"sv, "shell"sv, "volume"sv};
constexpr std::array k_heredoc_keywords = {"add"sv, "copy"sv, "run"sv};

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& set, std::string_view word) {
  return std::find(set.begin(), set.end(), word) != set.end();
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// BuildKit splits commands on [\t\v\f\r ]+, which excludes '\n'; the joined line has none.
bool is_split_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && is_space(s.front())) {
    s.remove_prefix(1);
  }
  return s;
}

std::string_view trim_newline(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

bool is_comment(std::string_view line) {
  line = trim_left(line);
  return !line.empty() && line.front() == '#';
}

std::vector<std::string_view> split_whitespace(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_split_space(s[i])) {
      ++i;
    }
    std::size_t begin = i;
    while (i < s.size() && !is_split_space(s[i])) {
      ++i;
    }
    if (i > begin) {
      out.push_back(s.substr(begin, i - begin));
    }
  }
  return out;
}

// Parser directives live in leading comments; the first line that is not one ends them for
// good, so a `# escape=` after a blank line or a plain comment is just a comment.
class DirectiveParser {
public:
  struct Directive {
    std::string name;
    std::string value;
  };

  tl::expected<std::optional<Directive>, std::string> parse_line(std::string_view line) {
    if (m_done) {
      return std::nullopt;
    }
    if (line.empty() || line.front() != '#') {
      m_done = true;
      return std::nullopt;
    }
    line = trim_left(line.substr(1));
    std::size_t i = 0;
    if (i >= line.size() || !std::isalpha(static_cast<unsigned char>(line[i]))) {
      m_done = true;
      return std::nullopt;
    }
    while (i < line.size() && std::isalnum(static_cast<unsigned char>(line[i]))) {
      ++i;
    }
    std::string name = lower(line.substr(0, i));
    std::string_view rest = trim_left(line.substr(i));
    if (rest.empty() || rest.front() != '=') {
      m_done = true;
      return std::nullopt;
    }
    std::string_view value = trim_space(rest.substr(1));
    if (value.empty() || (name != "escape" && name != "syntax" && name != "check")) {
      m_done = true;
      return std::nullopt;
    }
    if (!m_seen.insert(name).second) {
      return tl::unexpected(fmt::format("only one {} parser directive can be used", name));
    }
    return Directive{name, std::string(value)};
  }

private:
  bool m_done = false;
  std::set<std::string> m_seen;
};

// The escape character continues a line when it is the last non-blank character and is not
// itself escaped (BuildKit's regex cannot see past one preceding escape, and neither do we).
bool trim_continuation(std::string_view& line, char escape) {
  std::size_t end = line.size();
  while (end > 0 && (line[end - 1] == ' ' || line[end - 1] == '\t')) {
    --end;
  }
  if (end == 0 || line[end - 1] != escape) {
    return false;
  }
  if (end >= 2 && line[end - 2] == escape) {
    return false;
  }
  line = line.substr(0, end - 1);
  return true;
}

// Where each piece of a joined logical line came from, to give flags real positions.
struct Segment {
  std::size_t offset;
  int line;
  int column;
  std::size_t line_offset; // of its physical line in the text
};

// Segments are in offset order: a binary search keeps a 200,000-line RUN with a flag on every
// line linear (a scan per flag took 20 s).
const Segment& segment_at(const std::vector<Segment>& segments, std::size_t offset) {
  auto after = std::upper_bound(segments.begin() + 1, segments.end(), offset,
                                [](std::size_t o, const Segment& s) { return o < s.offset; });
  return *(after - 1);
}

Position position_of(const std::vector<Segment>& segments, std::size_t offset) {
  const Segment& at = segment_at(segments, offset);
  return {at.line, at.column + static_cast<int>(offset - at.offset)};
}

struct RawFlag {
  std::string word;
  std::size_t offset;
};

// BuildKit's extractBuilderFlags: leading `--words` with quotes and escapes removed; a bare
// `--` ends them.
std::string_view extract_flags(std::string_view line, std::size_t base, char escape,
                               std::vector<RawFlag>& flags) {
  std::size_t pos = 0;
  while (true) {
    while (pos < line.size() && is_space(line[pos])) {
      ++pos;
    }
    if (pos + 1 >= line.size() || line[pos] != '-' || line[pos + 1] != '-') {
      return line.substr(std::min(pos, line.size()));
    }
    std::size_t start = pos;
    std::string word;
    char quote = 0;
    bool blank_ok = false;
    // Most flag words hold no quote and no escape: then the word is the text up to a blank.
    std::size_t end = pos;
    while (end < line.size() && !is_space(line[end]) && line[end] != '\'' && line[end] != '"' &&
           line[end] != escape) {
      ++end;
    }
    if (end == line.size() || is_space(line[end])) {
      word.assign(line.substr(pos, end - pos));
      pos = end;
    }
    for (; pos < line.size(); ++pos) {
      char ch = line[pos];
      if (quote == 0 && is_space(ch)) {
        break;
      }
      if (quote == 0 && (ch == '\'' || ch == '"')) {
        quote = ch;
        blank_ok = true;
        continue;
      }
      if (quote != 0 && ch == quote) {
        quote = 0;
        continue;
      }
      if (ch == escape) {
        if (pos + 1 == line.size()) {
          continue;
        }
        ch = line[++pos];
      }
      word += ch;
    }
    if (word == "--") {
      return line.substr(pos);
    }
    if (blank_ok || !word.empty()) {
      flags.push_back({word, base + start});
    }
  }
}

// BuildKit's parseWords: whitespace-separated words with quotes and escapes kept verbatim, so
// each word is the text of `rest` where it stands (less an escape that ends `rest`).
std::vector<std::string_view> parse_words(std::string_view rest, char escape) {
  std::vector<std::string_view> words;
  std::size_t begin = 0;
  std::size_t length = 0;
  bool in_word = false;
  bool blank_ok = false;
  char quote = 0;
  auto word = [&] { return rest.substr(begin, length); };
  for (std::size_t pos = 0; pos < rest.size(); ++pos) {
    char ch = rest[pos];
    if (quote == 0) {
      if (is_space(ch)) {
        if (in_word && (blank_ok || length > 0)) {
          words.push_back(word());
        }
        in_word = false;
        blank_ok = false;
        continue;
      }
      if (!in_word) {
        begin = pos;
        length = 0;
        in_word = true;
      }
      if (ch == '\'' || ch == '"') {
        quote = ch;
        blank_ok = true;
      } else if (ch == escape) {
        if (pos + 1 == rest.size()) {
          continue;
        }
        ++pos;
      }
      length = pos + 1 - begin;
      continue;
    }
    if (ch == escape && quote != '\'') {
      if (pos + 1 == rest.size()) {
        continue;
      }
      ++pos;
    } else if (ch == quote) {
      quote = 0;
    }
    length = pos + 1 - begin;
  }
  if (in_word && (blank_ok || length > 0)) {
    words.push_back(word());
  }
  return words;
}

struct JsonArgs {
  bool is_json = false;
  bool not_strings = false;
  std::vector<std::string> values;
};

bool is_json_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// The usual shape, an array of ASCII strings with the short escapes, read directly; nullopt
// for anything else (other values, nesting, \u escapes, bytes past ASCII, any syntax error),
// which nlohmann then decides, so the result is always nlohmann's.
std::optional<std::vector<std::string>> plain_string_array(std::string_view s) {
  std::size_t i = 1; // past the '['
  auto skip_space = [&] {
    while (i < s.size() && is_json_space(s[i])) {
      ++i;
    }
  };
  std::vector<std::string> values;
  skip_space();
  if (i < s.size() && s[i] == ']') {
    ++i;
  } else {
    while (true) {
      skip_space();
      if (i >= s.size() || s[i] != '"') {
        return std::nullopt;
      }
      ++i;
      std::string value;
      while (true) {
        std::size_t run = i;
        while (i < s.size()) {
          auto c = static_cast<unsigned char>(s[i]);
          if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) {
            break;
          }
          ++i;
        }
        value.append(s.data() + run, i - run);
        if (i >= s.size()) {
          return std::nullopt;
        }
        char c = s[i];
        if (c == '"') {
          ++i;
          break;
        }
        if (c != '\\' || i + 1 >= s.size()) {
          return std::nullopt;
        }
        switch (s[i + 1]) {
        case '"':
          value += '"';
          break;
        case '\\':
          value += '\\';
          break;
        case '/':
          value += '/';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'n':
          value += '\n';
          break;
        case 'r':
          value += '\r';
          break;
        case 't':
          value += '\t';
          break;
        default:
          return std::nullopt;
        }
        i += 2;
      }
      values.push_back(std::move(value));
      skip_space();
      if (i < s.size() && s[i] == ',') {
        ++i;
        continue;
      }
      if (i < s.size() && s[i] == ']') {
        ++i;
        break;
      }
      return std::nullopt;
    }
  }
  skip_space();
  if (i != s.size()) {
    return std::nullopt;
  }
  return values;
}

JsonArgs parse_json_array(std::string_view rest) {
  JsonArgs out;
  rest = trim_left(rest);
  if (rest.empty() || rest.front() != '[') {
    return out;
  }
  if (auto values = plain_string_array(rest)) {
    out.values = std::move(*values);
    out.is_json = true;
    return out;
  }
  auto parsed = nlohmann::json::parse(rest, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_array()) {
    return out;
  }
  for (const auto& element : parsed) {
    if (!element.is_string()) {
      out.not_strings = true;
      return out;
    }
    out.values.push_back(element.get<std::string>());
  }
  out.is_json = true;
  return out;
}

// The lexer BuildKit uses on heredoc words: escape is always `\` there, `$` stays literal
// because no variables are set. raw_quotes keeps the quote characters.
std::vector<std::string> heredoc_lex(std::string_view s, bool raw_quotes, bool raw_escapes) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  auto flush = [&] {
    if (in_word && !word.empty()) {
      words.push_back(std::move(word));
    }
    word.clear();
    in_word = false;
  };
  std::size_t i = 0;
  while (i < s.size()) {
    char ch = s[i];
    if (ch == '\'' || ch == '"') {
      std::size_t close = s.find(ch, i + 1);
      std::string body;
      if (ch == '\'') {
        body =
            std::string(s.substr(i + 1, close == std::string_view::npos ? close : close - i - 1));
      } else {
        std::size_t j = i + 1;
        for (; j < s.size() && s[j] != '"'; ++j) {
          if (s[j] == '\\' && j + 1 < s.size() &&
              (s[j + 1] == '"' || s[j + 1] == '$' || s[j + 1] == '\\')) {
            if (raw_escapes) {
              body += '\\';
            }
            ++j;
          }
          body += s[j];
        }
        close = j < s.size() ? j : std::string_view::npos;
      }
      if (raw_quotes) {
        word += ch;
      }
      word += body;
      if (raw_quotes && close != std::string_view::npos) {
        word += ch;
      }
      in_word = true;
      i = close == std::string_view::npos ? s.size() : close + 1;
      continue;
    }
    if (ch == '<' && i + 1 < s.size() && s[i + 1] == '<') {
      // `<< EOF` is one word: the blanks after `<<` belong to the heredoc operator.
      word += "<<";
      i += 2;
      while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) {
        word += s[i++];
      }
      in_word = true;
      continue;
    }
    if (ch == '\\') {
      if (raw_escapes) {
        word += ch;
      }
      if (++i >= s.size()) {
        break;
      }
      word += s[i++];
      in_word = true;
      continue;
    }
    if (is_space(ch)) {
      flush();
    } else {
      word += ch;
      in_word = true;
    }
    ++i;
  }
  flush();
  return words;
}

std::optional<Heredoc> heredoc_from_word(std::string_view word) {
  std::size_t i = 0;
  while (i < word.size() && std::isdigit(static_cast<unsigned char>(word[i]))) {
    ++i;
  }
  if (word.substr(i, 2) != "<<") {
    return std::nullopt;
  }
  i += 2;
  bool chomp = false;
  if (i < word.size() && word[i] == '-') {
    chomp = true;
    ++i;
  }
  std::string_view rest = trim_left(word.substr(i));
  if (rest.empty() || rest.find('<') != std::string_view::npos) {
    return std::nullopt;
  }
  auto words = heredoc_lex(rest, false, false);
  if (words.size() != 1) {
    return std::nullopt;
  }
  auto raw = heredoc_lex(rest, true, false);
  auto quotes = [](const std::string& w) {
    return std::count(w.begin(), w.end(), '\'') + std::count(w.begin(), w.end(), '"');
  };
  // Quotes that vanish when processed were quoting part of the word: no expansion then.
  bool expand = raw.size() == 1 && quotes(words[0]) == quotes(raw[0]);
  return Heredoc{words[0], "", expand, chomp};
}

// Physical lines one at a time, each with its '\n'. Splitting the file up front cost 16 bytes
// per line before the first instruction was read: 2 GB for 130 MB of blank lines.
class LineCursor {
public:
  explicit LineCursor(std::string_view text) : m_text(text) {
    if (m_text.starts_with("\xEF\xBB\xBF")) {
      m_next = 3;
    }
  }
  bool done() const { return m_next >= m_text.size(); }
  std::string_view next() {
    m_offset = m_next;
    std::size_t nl = m_text.find('\n', m_next);
    m_next = nl == std::string_view::npos ? m_text.size() : nl + 1;
    ++m_number;
    return m_text.substr(m_offset, m_next - m_offset);
  }
  /// Of the line next() returned last; 0 before the first.
  int number() const { return m_number; }
  std::size_t offset() const { return m_offset; }

private:
  std::string_view m_text;
  std::size_t m_next = 0;
  std::size_t m_offset = 0;
  int m_number = 0;
};

// Whether kiln expands the arguments of `keyword` with expand_words: not RUN's (a shell expands
// those) nor the runtime-only instructions' (the container does).
bool args_are_expanded(std::string_view keyword) {
  return keyword != "run" && keyword != "cmd" && keyword != "entrypoint" &&
         keyword != "healthcheck" && keyword != "shell" && keyword != "onbuild" &&
         keyword != "maintainer";
}

// Where expand_words would pass k_max_substitution_depth in `word`, or nullopt.
std::optional<std::size_t> too_deep_at(std::string_view word, char escape);

ParseError too_deep_error(Position pos) {
  return {pos, fmt::format("variable substitutions nest deeper than {} levels here: kiln does not "
                           "expand them; flatten the `${{VAR:-...}}` nesting",
                           k_max_substitution_depth)};
}

// Sets ins.args and ins.arg_pos from `rest`, the text after the flags, which starts at byte
// `rest_offset` of the logical line that `segments` places.
tl::expected<void, ParseError> fill_args(Instruction& ins, std::string_view rest,
                                         std::size_t rest_offset,
                                         const std::vector<Segment>& segments, char escape) {
  auto fail = [&](std::string message) {
    return tl::unexpected(ParseError{ins.start, std::move(message)});
  };
  const bool expanded = args_are_expanded(ins.keyword);
  std::optional<ParseError> too_deep;
  // `piece` is a view into `rest`.
  auto add = [&](std::string_view piece) {
    std::size_t offset = rest_offset + static_cast<std::size_t>(piece.data() - rest.data());
    if (expanded && !too_deep && piece.find("${") != std::string_view::npos) {
      if (auto at = too_deep_at(piece, escape)) {
        too_deep = too_deep_error(position_of(segments, offset + *at));
      }
    }
    ins.args.emplace_back(piece);
    ins.arg_pos.push_back(position_of(segments, offset));
  };
  auto done = [&]() -> tl::expected<void, ParseError> {
    if (too_deep) {
      return tl::unexpected(*too_deep);
    }
    return {};
  };
  // A view: std::string == "literal" is an out-of-line compare, a view's is inlined.
  std::string_view kw = ins.keyword;
  if (kw == "env" || kw == "label") {
    auto words = parse_words(rest, escape);
    if (words.empty()) {
      return {};
    }
    if (words[0].find('=') == std::string_view::npos) {
      // Legacy `ENV key value with spaces`: the value is everything after the first blank.
      std::size_t i = 0;
      while (i < rest.size() && !is_split_space(rest[i])) {
        ++i;
      }
      std::size_t j = i;
      while (j < rest.size() && is_split_space(rest[j])) {
        ++j;
      }
      if (i == rest.size()) {
        return fail(fmt::format("{} must have two arguments", kw == "env" ? "ENV" : "LABEL"));
      }
      ins.args.reserve(2);
      add(rest.substr(0, i));
      add(rest.substr(j));
      return done();
    }
    ins.args.reserve(words.size() * 2);
    ins.arg_pos.reserve(words.size() * 2);
    for (auto word : words) {
      std::size_t eq = word.find('=');
      if (eq == std::string_view::npos) {
        return fail(fmt::format(
            "Syntax error - can't find = in \"{}\". Must be of the form: name=value", word));
      }
      add(word.substr(0, eq));
      add(word.substr(eq + 1));
    }
    return done();
  }
  if (kw == "arg") {
    for (auto word : parse_words(rest, escape)) {
      std::size_t eq = word.find('=');
      add(word.substr(0, eq));
      add(eq == std::string_view::npos ? word.substr(word.size()) : word.substr(eq + 1));
      ins.arg_has_value.push_back(eq != std::string_view::npos);
    }
    return done();
  }
  if (kw == "from") {
    for (auto word : split_whitespace(rest)) {
      add(word);
    }
    if (ins.args.size() != 1 && ins.args.size() != 3) {
      return fail("FROM requires either one or three arguments");
    }
    if (ins.args.size() == 3 && lower(ins.args[1]) != "as") {
      return fail("When using FROM with AS, the second argument must be AS");
    }
    return done();
  }
  if (rest.empty()) {
    return {};
  }
  if (contains(k_maybe_json, kw)) {
    auto json = parse_json_array(rest);
    if (json.not_strings) {
      return fail("when using JSON array syntax, arrays must be comprised of strings only");
    }
    if (json.is_json) {
      ins.args = std::move(json.values);
      ins.arg_pos.assign(ins.args.size(), position_of(segments, rest_offset));
      ins.json_form = true;
      for (const auto& value : ins.args) {
        if (expanded && value.find("${") != std::string::npos && too_deep_at(value, escape)) {
          // A JSON element is decoded: its text is not the file's, so the array is the place.
          return tl::unexpected(too_deep_error(ins.arg_pos.front()));
        }
      }
      return {};
    }
  }
  add(rest);
  return done();
}

bool can_contain_heredoc(const Instruction& ins) {
  if (keyword_is(ins, "onbuild")) {
    // ONBUILD RUN <<EOF carries its heredoc for the triggered instruction.
    auto words = split_whitespace(ins.args.empty() ? std::string_view() : ins.args[0]);
    if (words.empty() || !contains(k_heredoc_keywords, lower(words[0]))) {
      return false;
    }
    std::string_view sub = ins.args[0];
    return !parse_json_array(sub.substr(sub.find(words[0]) + words[0].size())).is_json;
  }
  return contains(k_heredoc_keywords, ins.keyword) && !ins.json_form;
}

std::string_view strip_leading_tabs(std::string_view line) {
  std::size_t i = 0;
  while (i < line.size() && line[i] == '\t') {
    ++i;
  }
  return line.substr(i);
}

} // namespace

tl::expected<Dockerfile, ParseError> parse_dockerfile(std::string_view text) {
  Dockerfile df;
  DirectiveParser directives;
  LineCursor lines(text);
  auto directive_at = [&](std::string_view line, int line_no) -> tl::expected<bool, ParseError> {
    auto directive = directives.parse_line(line);
    if (!directive) {
      return tl::unexpected(ParseError{{line_no, 1}, directive.error()});
    }
    if (!*directive) {
      return false;
    }
    if ((*directive)->name == "escape") {
      if ((*directive)->value != "\\" && (*directive)->value != "`") {
        return tl::unexpected(ParseError{
            {line_no, 1},
            fmt::format("invalid escape token '{}' does not match ` or \\", (*directive)->value)});
      }
      df.escape = (*directive)->value[0];
    } else if ((*directive)->name == "syntax") {
      df.syntax = (*directive)->value;
    } else if ((*directive)->name == "check") {
      df.check = (*directive)->value;
      df.check_line = line_no;
    }
    return true;
  };

  // Reused from one instruction to the next: their buffers are the parser's hottest allocations.
  std::string line;
  std::vector<Segment> segments;
  std::vector<RawFlag> raw_flags;
  // Room for a usual file's instructions (a line is some 30 bytes) saves the vector's regrowth,
  // capped: reserving one per line made 130 MB of blank lines fail to allocate.
  df.instructions.reserve(std::min<std::size_t>(text.size() / 32, 1024));

  while (!lines.done()) {
    std::string_view raw = trim_newline(lines.next());
    int start_line = lines.number();
    std::string_view first = trim_left(raw);
    int lead = static_cast<int>(raw.size() - first.size());
    if (auto d = directive_at(first, start_line); !d) {
      return tl::unexpected(d.error());
    }
    if (is_comment(first)) {
      first = {};
    }
    bool continued = trim_continuation(first, df.escape);
    if (!continued && first.empty()) {
      continue;
    }
    line.assign(first);
    segments.assign(1, Segment{0, start_line, lead + 1, lines.offset()});
    bool empty_continuation = false;
    std::string_view last_line = raw;
    while (continued && !lines.done()) {
      std::string_view piece = trim_newline(lines.next());
      int line_no = lines.number();
      last_line = piece;
      if (auto d = directive_at(piece, line_no); !d) {
        return tl::unexpected(d.error());
      }
      if (is_comment(piece)) {
        continue;
      }
      if (trim_left(piece).empty()) {
        empty_continuation = true;
        continue;
      }
      continued = trim_continuation(piece, df.escape);
      segments.push_back({line.size(), line_no, 1, lines.offset()});
      line += piece;
    }
    if (empty_continuation) {
      df.warnings.push_back("Empty continuation line found in: " + line);
      df.empty_continuation_lines.push_back(lines.number());
    }

    // splitCommand: keyword, flags, then the trimmed rest.
    std::size_t kw_begin = 0;
    while (kw_begin < line.size() && is_space(line[kw_begin])) {
      ++kw_begin;
    }
    std::size_t kw_end = kw_begin;
    while (kw_end < line.size() && !is_split_space(line[kw_end])) {
      ++kw_end;
    }
    if (kw_begin == kw_end) {
      continue; // only escapes and blanks, such as a lone continuation at the end of the file
    }
    // Built in place: a finished Instruction moved into the vector would cost a dozen moves.
    Instruction& ins = df.instructions.emplace_back();
    ins.keyword = lower(std::string_view(line).substr(kw_begin, kw_end - kw_begin));
    ins.original = trim_space(line);
    ins.start = position_of(segments, kw_begin);
    // The keyword's line, which is not the first when the instruction opens with `\` alone.
    ins.line_offset = segment_at(segments, kw_begin).line_offset;
    auto fail = [&](std::string message) {
      return tl::unexpected(ParseError{ins.start, std::move(message)});
    };
    if (!is_known_keyword(ins.keyword)) {
      return fail(fmt::format("unknown instruction: {}",
                              std::string_view(line).substr(kw_begin, kw_end - kw_begin)));
    }
    std::size_t args_begin = kw_end;
    while (args_begin < line.size() && is_split_space(line[args_begin])) {
      ++args_begin;
    }
    raw_flags.clear();
    std::string_view after_flags =
        extract_flags(std::string_view(line).substr(args_begin), args_begin, df.escape, raw_flags);
    std::string_view rest = trim_space(after_flags);
    for (const auto& f : raw_flags) {
      std::string_view word = std::string_view(f.word).substr(2);
      std::size_t eq = word.find('=');
      ins.flags.push_back({std::string(word.substr(0, eq)),
                           eq == std::string_view::npos ? "" : std::string(word.substr(eq + 1)),
                           position_of(segments, f.offset)});
      const Flag& flag = ins.flags.back();
      if (flag.value.find("${") != std::string::npos && too_deep_at(flag.value, df.escape)) {
        // Quotes are gone from a flag's value: its text is not the file's, so the flag is the
        // place.
        return tl::unexpected(too_deep_error(flag.pos));
      }
    }
    std::size_t rest_offset = static_cast<std::size_t>(rest.data() - line.data());
    if (auto filled = fill_args(ins, rest, rest_offset, segments, df.escape); !filled) {
      return tl::unexpected(filled.error());
    }

    if (can_contain_heredoc(ins) && line.find("<<") != std::string::npos) {
      for (const auto& word : heredoc_lex(line, true, true)) {
        auto heredoc = heredoc_from_word(word);
        if (!heredoc) {
          continue;
        }
        bool terminated = false;
        while (!lines.done()) {
          std::string_view body = lines.next();
          last_line = trim_newline(body);
          std::string_view candidate = last_line;
          if (heredoc->chomp) {
            candidate = strip_leading_tabs(candidate);
          }
          if (candidate == heredoc->name) {
            terminated = true;
            break;
          }
          heredoc->content += heredoc->chomp ? strip_leading_tabs(body) : body;
        }
        if (!terminated) {
          return fail("unterminated heredoc");
        }
        ins.heredocs.push_back(std::move(*heredoc));
      }
    }
    ins.end = {lines.number(), static_cast<int>(last_line.size())};
  }
  if (df.instructions.empty()) {
    return tl::unexpected(
        ParseError{{std::max(1, lines.number()), 1}, "file with no instructions"});
  }
  return df;
}

namespace {

bool is_special_param(char c) {
  return c == '@' || c == '*' || c == '#' || c == '?' || c == '-' || c == '$' || c == '!' ||
         c == '0';
}

using VarMap = std::map<std::string, std::string>;

// What an expansion sees: `first` shadows `second`, as a stage's ENV shadows its ARGs, without
// merging them into a copy per instruction (a copy per ARG made 40,000 ARGs quadratic).
struct Vars {
  const VarMap* first = nullptr;
  const VarMap* second = nullptr;

  const std::string* find(const std::string& name) const {
    for (const VarMap* map : {first, second}) {
      if (map != nullptr) {
        if (auto it = map->find(name); it != map->end()) {
          return &it->second;
        }
      }
    }
    return nullptr;
  }
};

class Expander {
public:
  Expander(std::string_view text, Vars vars, char escape)
      : m_text(text), m_vars(vars), m_escape(escape) {}

  ExpandResult run() {
    bool closed = false;
    std::string value = until('\0', closed);
    return {std::move(value), std::move(m_unset)};
  }

  /// After run(): where a substitution first nested past k_max_substitution_depth.
  std::optional<std::size_t> too_deep_at() const { return m_too_deep_at; }

private:
  // Processes up to `stop` (consumed; '\0' means the end). `closed` tells whether it was seen.
  std::string until(char stop, bool& closed) {
    std::string out;
    closed = false;
    while (m_pos < m_text.size()) {
      char ch = m_text[m_pos];
      if (stop != '\0' && ch == stop) {
        ++m_pos;
        closed = true;
        return out;
      }
      if (ch == '$') {
        out += dollar();
      } else if (ch == '\'') {
        out += single_quoted();
      } else if (ch == '"') {
        out += double_quoted();
      } else if (ch == m_escape) {
        if (++m_pos >= m_text.size()) {
          break; // an escape at the very end escapes nothing and vanishes
        }
        out += m_text[m_pos++];
      } else {
        out += ch;
        ++m_pos;
      }
    }
    return out;
  }

  std::string single_quoted() {
    std::size_t close = m_text.find('\'', m_pos + 1);
    std::size_t end = close == std::string_view::npos ? m_text.size() : close;
    std::string out(m_text.substr(m_pos + 1, end - m_pos - 1));
    m_pos = close == std::string_view::npos ? m_text.size() : close + 1;
    return out;
  }

  std::string double_quoted() {
    std::string out;
    ++m_pos;
    while (m_pos < m_text.size()) {
      char ch = m_text[m_pos];
      if (ch == '"') {
        ++m_pos;
        return out;
      }
      if (ch == '$') {
        out += dollar();
        continue;
      }
      ++m_pos;
      // Inside double quotes the escape only quotes `"`, `$` and itself, as in sh.
      if (ch == m_escape && m_pos < m_text.size() &&
          (m_text[m_pos] == '"' || m_text[m_pos] == '$' || m_text[m_pos] == m_escape)) {
        ch = m_text[m_pos++];
      } else if (ch == m_escape && m_pos >= m_text.size()) {
        continue;
      }
      out += ch;
    }
    return out;
  }

  std::string name() {
    std::size_t begin = m_pos;
    if (m_pos < m_text.size() && std::isdigit(static_cast<unsigned char>(m_text[m_pos]))) {
      while (m_pos < m_text.size() && std::isdigit(static_cast<unsigned char>(m_text[m_pos]))) {
        ++m_pos;
      }
    } else if (m_pos < m_text.size() && is_special_param(m_text[m_pos])) {
      ++m_pos;
    } else {
      while (m_pos < m_text.size() &&
             (std::isalnum(static_cast<unsigned char>(m_text[m_pos])) || m_text[m_pos] == '_')) {
        ++m_pos;
      }
    }
    return std::string(m_text.substr(begin, m_pos - begin));
  }

  const std::string* lookup(const std::string& var) {
    if (const std::string* value = m_vars.find(var)) {
      return value;
    }
    // A few names are searched in place; past that a set keeps 40,000 names in one word linear.
    constexpr std::size_t k_linear = 16;
    if (m_unset.size() < k_linear) {
      if (std::find(m_unset.begin(), m_unset.end(), var) == m_unset.end()) {
        m_unset.push_back(var);
      }
      return nullptr;
    }
    if (m_unset_seen.empty()) {
      m_unset_seen.insert(m_unset.begin(), m_unset.end());
    }
    if (m_unset_seen.insert(var).second) {
      m_unset.push_back(var);
    }
    return nullptr;
  }

  std::string literal_from(std::size_t start) {
    m_pos = m_text.size();
    return std::string(m_text.substr(start));
  }

  std::string dollar() {
    std::size_t start = m_pos++;
    if (m_pos >= m_text.size() || m_text[m_pos] != '{') {
      std::string var = name();
      if (var.empty()) {
        return "$";
      }
      const std::string* value = lookup(var);
      return value ? *value : "";
    }
    ++m_pos;
    if (m_pos >= m_text.size() || m_text[m_pos] == '{' || m_text[m_pos] == '}' ||
        m_text[m_pos] == ':') {
      return literal_from(start); // bad substitution
    }
    std::string var = name();
    if (m_pos >= m_text.size()) {
      return literal_from(start);
    }
    char op = m_text[m_pos++];
    if (op == '}') {
      const std::string* value = lookup(var);
      return value ? *value : "";
    }
    bool null_is_unset = false;
    if (op == ':') {
      null_is_unset = true;
      if (m_pos >= m_text.size()) {
        return literal_from(start);
      }
      op = m_text[m_pos++];
    }
    if (op != '-' && op != '+' && op != '?') {
      return literal_from(start); // patterns and replacements: not needed by kiln
    }
    if (m_depth == k_max_substitution_depth) {
      m_too_deep_at = m_too_deep_at.value_or(start);
      return literal_from(start);
    }
    bool closed = false;
    ++m_depth;
    std::string word = until('}', closed);
    --m_depth;
    if (!closed) {
      return literal_from(start);
    }
    const std::string* value = lookup(var);
    bool empty = !value || (null_is_unset && value->empty());
    switch (op) {
    case '-':
      return empty ? word : *value;
    case '+':
      return empty ? "" : word;
    default:
      // `?` would fail the build when unset; the name is already reported in `unset`.
      return value ? *value : "";
    }
  }

  std::string_view m_text;
  Vars m_vars;
  char m_escape;
  std::size_t m_pos = 0;
  int m_depth = 0;
  std::optional<std::size_t> m_too_deep_at;
  std::vector<std::string> m_unset;
  std::unordered_set<std::string> m_unset_seen; // m_unset's names once it outgrows k_linear
};

bool needs_processing(std::string_view text, char escape) {
  // Without a `$`, a quote or the escape there is nothing to process: the text is the value.
  return std::any_of(text.begin(), text.end(),
                     [escape](char c) { return c == '$' || c == '\'' || c == '"' || c == escape; });
}

ExpandResult expand(std::string_view text, Vars vars, char escape) {
  if (!needs_processing(text, escape)) {
    return {std::string(text), {}};
  }
  return Expander(text, vars, escape).run();
}

std::optional<std::size_t> too_deep_at(std::string_view word, char escape) {
  Expander expander(word, {}, escape);
  expander.run();
  return expander.too_deep_at();
}

} // namespace

ExpandResult expand_words(std::string_view text, const std::map<std::string, std::string>& vars,
                          char escape) {
  return expand(text, {&vars, nullptr}, escape);
}

std::vector<StageScope> stage_scopes(const Dockerfile& df,
                                     const std::map<std::string, std::string>& build_args) {
  std::vector<StageScope> stages;
  // Global ARGs: a name declared without default and not passed has no value at all.
  VarMap globals;
  // The current stage's ARG values; ENV is in stages.back().env and wins over them.
  VarMap stage_args;
  std::unordered_set<std::string> declared; // stages.back().args, to look names up
  std::map<std::string, std::size_t> named; // the last stage of each name so far
  std::vector<std::string> values;
  for (const auto& ins : df.instructions) {
    if (keyword_is(ins, "from")) {
      StageScope stage;
      stage.index = static_cast<int>(stages.size());
      if (ins.args.size() == 3) {
        stage.name = lower(ins.args[2]);
      }
      stage.from = ins.start;
      stage.base = ins.args.empty() ? "" : expand(ins.args[0], {&globals}, df.escape).value;
      if (auto earlier = named.find(lower(stage.base)); earlier != named.end()) {
        stage.env = stages[earlier->second].env;
      }
      if (!stage.name.empty()) {
        named[stage.name] = stages.size();
      }
      stages.push_back(std::move(stage));
      stage_args.clear();
      declared.clear();
      continue;
    }
    if (keyword_is(ins, "arg")) {
      for (std::size_t i = 0; i + 1 < ins.args.size(); i += 2) {
        const std::string& key = ins.args[i];
        bool has_value = i / 2 < ins.arg_has_value.size() && ins.arg_has_value[i / 2];
        std::optional<std::string> value;
        if (auto passed = build_args.find(key); passed != build_args.end()) {
          value = passed->second;
        } else if (has_value) {
          Vars vars = stages.empty() ? Vars{&globals} : Vars{&stages.back().env, &stage_args};
          value = expand(ins.args[i + 1], vars, df.escape).value;
        } else if (!stages.empty()) {
          if (auto global = globals.find(key); global != globals.end()) {
            value = global->second;
          }
        }
        if (stages.empty()) {
          if (value) {
            globals[key] = *value;
          }
          continue;
        }
        if (declared.insert(key).second) {
          stages.back().args.push_back(key);
        }
        if (value) {
          stage_args[key] = *value;
        }
      }
      continue;
    }
    if (keyword_is(ins, "env") && !stages.empty()) {
      // All pairs of one ENV see the variables as they were before it, as in BuildKit:
      // `ENV A=1 B=$A` gives B the A from before the line.
      auto& env = stages.back().env;
      values.clear();
      for (std::size_t i = 0; i + 1 < ins.args.size(); i += 2) {
        values.push_back(expand(ins.args[i + 1], {&env, &stage_args}, df.escape).value);
      }
      for (std::size_t i = 0; i + 1 < ins.args.size(); i += 2) {
        env[ins.args[i]] = std::move(values[i / 2]);
      }
    }
  }
  return stages;
}

} // namespace kiln
