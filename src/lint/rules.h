#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockerfile/parser.h"
#include "lint/lint.h"

namespace kiln {

struct LintContext {
  const std::string& file;
  const Dockerfile& dockerfile;
  std::string_view text;
  const LintOptions& options;
  /// `text` split once, `\r\n` and `\n` endings dropped: findings look up their line here.
  std::vector<std::string_view> lines;
  /// split_stages(dockerfile), computed once for the rules that walk stage by stage.
  std::vector<std::vector<const Instruction*>> stages;
};

/// A finding on `ins`'s start line, at the first `needle` on that line (searched from
/// `from_column`), else at the keyword: continuation lines and heredocs have no single column.
LintFinding make_finding(const LintContext& ctx, const Instruction& ins, std::string_view needle,
                         std::string rule, std::string message, int from_column = 1);

/// Names a shell script expands with `$NAME` or `${NAME...}`, first-seen order, unique.
/// Single-quoted text and `\$` expand nothing, so they are skipped.
std::vector<std::string> shell_variable_refs(std::string_view script);

/// One option of a `--mount=type=cache,target=/x` value, under the first of `keys` (an option
/// and its aliases, lower-case; compared ignoring case) that any item names: the value of the
/// last such item, "" for an item without `=`, nullopt when no item names any of them.
std::optional<std::string_view> mount_option(std::string_view value,
                                             std::initializer_list<std::string_view> keys);

/// Instructions grouped by stage; instructions before the first FROM are not in any stage.
std::vector<std::vector<const Instruction*>> split_stages(const Dockerfile& df);

void check_leak_env_name(const LintContext& ctx, std::vector<LintFinding>& out);
void check_leak_address(const LintContext& ctx, std::vector<LintFinding>& out);
void check_leak_env_expansion(const LintContext& ctx, std::vector<LintFinding>& out);
void check_arg_scope(const LintContext& ctx, std::vector<LintFinding>& out);
void check_cache_arg_missing(const LintContext& ctx, std::vector<LintFinding>& out);
void check_whole_dir_mount(const LintContext& ctx, std::vector<LintFinding>& out);

} // namespace kiln
