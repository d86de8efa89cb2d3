#include "lint/rules.h"

#include <algorithm>
#include <cctype>

namespace kiln {

LintFinding make_finding(const LintContext& ctx, const Instruction& ins, int column,
                         std::string rule, std::string message) {
  return {ctx.file, ins.start.line, column > 0 ? column : ins.start.column, std::move(rule),
          std::move(message)};
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
