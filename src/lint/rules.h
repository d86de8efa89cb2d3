#pragma once

#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dockerfile/mounts.h"
#include "dockerfile/parser.h"
#include "lint/lint.h"
#include "util/strings.h"

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
  /// For each stage, the earlier stage its FROM names (`FROM build AS test`), -1 for an image:
  /// what BuildKit carries from one to the other (ENV, ARG values, SHELL, WORKDIR).
  std::vector<int> parents;

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

/// stage_parents for `stages`: the index of the earlier stage each FROM names, else -1.
std::vector<int> stage_parents(const std::vector<std::vector<const Instruction*>>& stages);

/// The ARGs BuildKit defines before the first FROM (frontend/dockerfile2llb/platform.go), with
/// the values of an amd64 Linux builder: a FROM may use them undeclared, a stage only after
/// `ARG NAME`.
const std::map<std::string, std::string>& predefined_args();

/// How many candidate names one rule may look at on "did you mean" suggestions in one file.
constexpr long k_suggest_budget = 100'000;

/// The keyword as the file writes it (`ins.keyword` is lower-cased): BuildKit's messages name
/// an instruction so, and the casing rules judge it.
std::string_view written_keyword(const Instruction& ins);

/// Whether `s` has no upper-case (lower-case) ASCII letter: BuildKit's casing rules compare a
/// word to its strings.ToLower (ToUpper).
bool is_lower(std::string_view s);
bool is_upper(std::string_view s);

/// Go's `%q` of `s`, as BuildKit's messages quote names and paths.
std::string go_quote(std::string_view s);

/// BuildKit's "did you mean" search (util/suggest): the first of `candidates` nearest to
/// `name` by Levenshtein distance, at most 2 edits, none when one equals it. Each call may
/// look at most `budget` candidates, taken from it: a file with 40,000 undefined names and
/// 40,000 declared ones gets suggestions for as many as its budget covers, not a quadratic
/// search.
std::string suggest_name(std::string_view name, const std::vector<std::string_view>& candidates,
                         long& budget);

void check_leak_env_name(const LintContext& ctx, std::vector<LintFinding>& out);
void check_leak_address(const LintContext& ctx, std::vector<LintFinding>& out);
void check_leak_env_expansion(const LintContext& ctx, std::vector<LintFinding>& out);
void check_arg_scope(const LintContext& ctx, std::vector<LintFinding>& out);
void check_cache_arg_missing(const LintContext& ctx, std::vector<LintFinding>& out);
void check_compile_without_budget(const LintContext& ctx, std::vector<LintFinding>& out);
void check_arg_rekeys_steps(const LintContext& ctx, std::vector<LintFinding>& out);
void check_pins_in_one_env(const LintContext& ctx, std::vector<LintFinding>& out);
void check_unpinned_fetch(const LintContext& ctx, std::vector<LintFinding>& out);
void check_cache_mount_unkeyed(const LintContext& ctx, std::vector<LintFinding>& out);
void check_whole_dir_mount(const LintContext& ctx, std::vector<LintFinding>& out);
void check_wget_progress(const LintContext& ctx, std::vector<LintFinding>& out);

// BuildKit's checks (frontend/dockerfile/linter), one rule family a file.
void check_stage_names(const LintContext& ctx, std::vector<LintFinding>& out);
void check_instruction_casing(const LintContext& ctx, std::vector<LintFinding>& out);
void check_legacy_syntax(const LintContext& ctx, std::vector<LintFinding>& out);
void check_runtime_config(const LintContext& ctx, std::vector<LintFinding>& out);
void check_workdir_relative_path(const LintContext& ctx, std::vector<LintFinding>& out);
void check_secrets_in_arg_env(const LintContext& ctx, std::vector<LintFinding>& out);
void check_from_args(const LintContext& ctx, std::vector<LintFinding>& out);
void check_undefined_var(const LintContext& ctx, std::vector<LintFinding>& out);
void check_copy_ignored_file(const LintContext& ctx, std::string_view dockerignore,
                             std::vector<LintFinding>& out);
void check_expose(const LintContext& ctx, std::vector<LintFinding>& out);

} // namespace kiln
