#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace kiln {

/// BuildKit's lint configuration, `# check=skip=<rules|all>;error=<bool>` (linter.go's
/// ParseLintOptions): as the file's parser directive it applies to the whole file, as a comment
/// above an instruction to that instruction's findings only.
struct CheckConfig {
  bool skip_all = false;
  std::set<std::string> skip; // kiln rule ids; BuildKit's names and kiln's both accepted
  bool error = false;         // BuildKit fails the build on the findings it reports
};

/// The directive's value (`skip=A,B;error=true`, anything after a blank ignored, as BuildKit
/// cuts it there); the message is BuildKit's when the value does not parse, which fails a
/// BuildKit build. Names no rule has are ignored, as BuildKit ignores them.
struct CheckParse {
  std::optional<CheckConfig> config;
  std::string error;
};
CheckParse parse_check_value(std::string_view value);

/// The check directive in a comment line (`# check=...`, BuildKit's directive syntax: a name
/// of letters and digits, `=`, a value), nullopt when the line is no such comment.
std::optional<std::string_view> check_comment_value(std::string_view line);

} // namespace kiln
