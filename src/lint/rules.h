#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dockerfile/mounts.h"
#include "dockerfile/parser.h"
#include "lint/lint.h"

namespace kiln {

struct LintContext {
  const std::string& file;
  const Dockerfile& dockerfile;
  std::string_view text;
  const LintOptions& options;
  /// The first physical line of each instruction, in dockerfile.instructions' order, its line
  /// end dropped: a finding is placed on it.
  std::vector<std::string_view> start_lines;
  /// split_stages(dockerfile), computed once for the rules that walk stage by stage.
  std::vector<std::vector<const Instruction*>> stages;

  std::string_view start_line(const Instruction& ins) const {
    return start_lines[static_cast<std::size_t>(&ins - dockerfile.instructions.data())];
  }
};

/// A finding on `ins`'s start line at `column`, or at its keyword when `column` is 0:
/// suppressions bind to the start line, and continuation lines and heredocs have no single
/// column.
LintFinding make_finding(const LintContext& ctx, const Instruction& ins, int column,
                         std::string rule, std::string message);

/// The column of argument `i` of `ins` when it starts on the start line, else 0.
int arg_column(const Instruction& ins, std::size_t i);

/// Needles found one after another along one stretch of a line, each search going on from the
/// end of the last match: a line with 10,000 findings is read once, not once per finding.
class LineSearch {
public:
  /// Columns [from, to) of `line`, 1-based; `to` 0 is the line's end. `from` 0 finds nothing.
  LineSearch(std::string_view line, int from, int to = 0);
  /// The column of `needle` at or after the last match's end, 0 when absent. After a miss the
  /// rest of the stretch has been read: later needles are not searched for and get 0.
  int find(std::string_view needle);

private:
  std::string_view m_stretch;
  std::size_t m_base = 0; // column of m_stretch[0], less one
  std::size_t m_pos = 0;
  bool m_missed = false;
};

/// Where a line first references each variable, `${NAME` preferred to `$NAME` (a braced
/// reference is the unambiguous one): read once for an instruction that has findings.
class ReferenceColumns {
public:
  explicit ReferenceColumns(std::string_view line);
  /// The column of the `$`, 0 when the line does not reference `name`.
  int column(std::string_view name) const;

private:
  std::unordered_map<std::string_view, int> m_braced;
  std::unordered_map<std::string_view, int> m_plain;
};

/// A set of names that stays a list while it is small: most files have a handful of names, and
/// a hash set built for each stage cost more than the scans it saved; past a few dozen it hashes,
/// so 40,000 names stay linear. The names are views: what they point into must outlive the set.
class NameSet {
public:
  /// False when `name` was already in.
  bool insert(std::string_view name);
  bool contains(std::string_view name) const;
  bool empty() const { return m_list.empty(); }

private:
  static constexpr std::size_t k_list_size = 32;
  std::vector<std::string_view> m_list;
  std::unordered_set<std::string_view> m_set; // all of them, once m_list has filled
};

/// Names a shell script expands with `$NAME` or `${NAME...}`, first-seen order, unique.
/// Single-quoted text and `\$` expand nothing, so they are skipped.
std::vector<std::string> shell_variable_refs(std::string_view script);

/// Instructions grouped by stage; instructions before the first FROM are not in any stage.
std::vector<std::vector<const Instruction*>> split_stages(const Dockerfile& df);

void check_leak_env_name(const LintContext& ctx, std::vector<LintFinding>& out);
void check_leak_address(const LintContext& ctx, std::vector<LintFinding>& out);
void check_leak_env_expansion(const LintContext& ctx, std::vector<LintFinding>& out);
void check_arg_scope(const LintContext& ctx, std::vector<LintFinding>& out);
void check_cache_arg_missing(const LintContext& ctx, std::vector<LintFinding>& out);
void check_whole_dir_mount(const LintContext& ctx, std::vector<LintFinding>& out);

} // namespace kiln
