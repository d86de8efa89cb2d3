#include "lint/rules.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include <fmt/format.h>

#include "util/strings.h"

namespace kiln {

LintFinding make_finding(const LintContext& ctx, const Instruction& ins, int column,
                         std::string rule, std::string message) {
  return {ctx.file,        ins.start.line,     column > 0 ? column : ins.start.column,
          std::move(rule), std::move(message), ins.start.line,
          ins.end.line,    Severity::error};
}

int arg_column(const Instruction& ins, std::size_t i) {
  if (i >= ins.arg_pos.size() || ins.arg_pos[i].line != ins.start.line) {
    return 0;
  }
  return ins.arg_pos[i].column;
}

LineSearch::LineSearch(std::string_view line, int from, int to) {
  if (from < 1 || static_cast<std::size_t>(from) > line.size() + 1) {
    m_missed = true;
    return;
  }
  m_base = static_cast<std::size_t>(from - 1);
  std::size_t end = to > 0 ? std::min(static_cast<std::size_t>(to - 1), line.size()) : line.size();
  m_stretch = line.substr(m_base, end > m_base ? end - m_base : 0);
}

int LineSearch::find(std::string_view needle) {
  if (m_missed || needle.empty()) {
    return 0;
  }
  std::size_t at = m_stretch.find(needle, m_pos);
  if (at == std::string_view::npos) {
    m_missed = true;
    return 0;
  }
  m_pos = at + needle.size();
  return static_cast<int>(m_base + at) + 1;
}

bool NameSet::insert(std::string_view name) {
  if (contains(name)) {
    return false;
  }
  if (m_list.size() < k_list_size) {
    m_list.push_back(name);
    return true;
  }
  if (m_set.empty()) {
    m_set.insert(m_list.begin(), m_list.end());
  }
  m_set.insert(name);
  return true;
}

bool NameSet::contains(std::string_view name) const {
  if (!m_set.empty()) {
    return m_set.count(name) != 0;
  }
  return std::find(m_list.begin(), m_list.end(), name) != m_list.end();
}

namespace {

bool is_name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

} // namespace

ReferenceColumns::ReferenceColumns(std::string_view line) {
  for (std::size_t i = line.find('$'); i != std::string_view::npos; i = line.find('$', i + 1)) {
    bool braced = i + 1 < line.size() && line[i + 1] == '{';
    std::size_t begin = i + (braced ? 2 : 1);
    if (begin >= line.size() || !is_name_start(line[begin])) {
      continue;
    }
    std::size_t end = begin;
    while (end < line.size() && is_name_char(line[end])) {
      ++end;
    }
    (braced ? m_braced : m_plain).emplace(line.substr(begin, end - begin), static_cast<int>(i) + 1);
  }
}

int ReferenceColumns::column(std::string_view name) const {
  if (auto it = m_braced.find(name); it != m_braced.end()) {
    return it->second;
  }
  if (auto it = m_plain.find(name); it != m_plain.end()) {
    return it->second;
  }
  return 0;
}

std::vector<std::string> shell_variable_refs(std::string_view script) {
  std::vector<std::string> names;
  if (script.find('$') == std::string_view::npos) {
    return names; // most scripts expand nothing; memchr says so faster than the scan below
  }
  auto is_start = is_name_start;
  auto is_name = is_name_char;
  NameSet seen;
  bool in_double = false;
  for (std::size_t i = 0; i < script.size(); ++i) {
    char c = script[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (c == '"') {
      in_double = !in_double;
      continue;
    }
    if (c == '\'' && !in_double) {
      auto close = script.find('\'', i + 1);
      if (close == std::string_view::npos) {
        break;
      }
      i = close;
      continue;
    }
    if (c != '$' || i + 1 >= script.size()) {
      continue;
    }
    std::size_t begin = i + 1;
    if (script[begin] == '{') {
      ++begin;
    }
    if (begin >= script.size() || !is_start(script[begin])) {
      continue;
    }
    auto end = begin;
    while (end < script.size() && is_name(script[end])) {
      ++end;
    }
    auto name = script.substr(begin, end - begin);
    if (seen.insert(name)) {
      names.emplace_back(name);
    }
    i = end - 1;
  }
  return names;
}

std::vector<int> stage_parents(const std::vector<std::vector<const Instruction*>>& stages) {
  std::vector<int> parents(stages.size(), -1);
  std::unordered_map<std::string, int> by_name;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const Instruction& from = *stages[s].front();
    if (!from.args.empty()) {
      // BuildKit matches a base to a stage name ignoring case; a later stage of the same name
      // replaces the earlier one only for the stages after it.
      if (auto it = by_name.find(lower(from.args[0])); it != by_name.end()) {
        parents[s] = it->second;
      }
    }
    if (from.args.size() == 3) {
      by_name[lower(from.args[2])] = static_cast<int>(s);
    }
  }
  return parents;
}

std::string_view written_keyword(const Instruction& ins) {
  return std::string_view(ins.original).substr(0, ins.keyword.size());
}

bool is_lower(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

bool is_upper(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

std::string go_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto byte = static_cast<unsigned char>(c);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (byte < 0x20 || byte == 0x7F) {
        out += fmt::format("\\x{:02x}", byte);
      } else {
        out += c;
      }
    }
  }
  out += '"';
  return out;
}

namespace {

// Levenshtein distance of `a` and `b` when it is at most `limit`, else limit + 1: only the
// diagonal band of width 2 * limit + 1 can hold a smaller one, so each row costs O(limit).
std::size_t bounded_distance(std::string_view a, std::string_view b, std::size_t limit) {
  if (a.size() > b.size()) {
    std::swap(a, b);
  }
  if (b.size() - a.size() > limit) {
    return limit + 1;
  }
  constexpr std::size_t k_far = std::numeric_limits<std::size_t>::max() / 2;
  std::vector<std::size_t> row(b.size() + 1, k_far);
  std::vector<std::size_t> next(b.size() + 1, k_far);
  for (std::size_t j = 0; j <= std::min(b.size(), limit); ++j) {
    row[j] = j;
  }
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t lo = i > limit ? i - limit : 0;
    std::size_t hi = std::min(b.size(), i + limit);
    std::fill(next.begin(), next.end(), k_far);
    if (lo == 0) {
      next[0] = i;
    }
    std::size_t best = next[0];
    for (std::size_t j = std::max<std::size_t>(lo, 1); j <= hi; ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      next[j] = std::min({row[j] + 1, next[j - 1] + 1, row[j - 1] + cost});
      best = std::min(best, next[j]);
    }
    if (best > limit) {
      return limit + 1;
    }
    std::swap(row, next);
  }
  return std::min(row[b.size()], limit + 1);
}

} // namespace

std::string suggest_name(std::string_view name, const std::vector<std::string_view>& candidates,
                         long& budget) {
  // BuildKit keeps a candidate only when it is nearer than the best so far, starting from 3.
  std::size_t best = 3;
  std::string_view match;
  for (std::string_view candidate : candidates) {
    // Every candidate looked at is charged, compared or not: skipping 40,000 names of the
    // wrong length for each of 40,000 lookups is quadratic too.
    if (budget-- <= 0) {
      break;
    }
    if (candidate == name) {
      return {}; // the name is defined after all: nothing to suggest
    }
    std::size_t gap = candidate.size() > name.size() ? candidate.size() - name.size()
                                                     : name.size() - candidate.size();
    if (gap >= best) {
      continue; // cannot be nearer
    }
    std::size_t d = bounded_distance(name, candidate, best - 1);
    if (d < best) {
      best = d;
      match = candidate;
    }
  }
  return std::string(match);
}

std::vector<std::vector<const Instruction*>> split_stages(const Dockerfile& df) {
  std::vector<std::vector<const Instruction*>> stages;
  for (const auto& ins : df.instructions) {
    if (keyword_is(ins, "from")) {
      stages.emplace_back();
    }
    if (!stages.empty()) {
      stages.back().push_back(&ins);
    }
  }
  return stages;
}

} // namespace kiln
