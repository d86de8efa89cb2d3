#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace kiln {

/// Whether a finding stops a `kiln run`. `kiln lint` reports both and exits 1 on either.
enum class Severity {
  /// kiln's build-host rules, what a BuildKit build itself fails on, and findings under a
  /// `# check=error=true` directive: the run preflight refuses to start.
  error,
  /// BuildKit's warnings (style and likely mistakes): reported by `kiln lint`, never a reason
  /// to stop a run that BuildKit would carry out.
  warning,
};

struct RuleInfo {
  std::string_view id;          // kiln's kebab-case name
  std::string_view buildkit;    // BuildKit's CamelCase name, empty for kiln's own rules
  std::string_view description; // BuildKit's description for its rules
  std::string_view url;         // the rule's documentation, empty when there is none
  Severity severity;
};

/// Every rule, kiln's first, then BuildKit's in its ruleset's order, then the meta rules
/// (check-directive, suppression-without-reason, parse-error).
std::span<const RuleInfo> lint_rules();

/// The rule `name` names: its kebab id or its BuildKit name, case-sensitively as BuildKit
/// matches skip lists; nullptr for a name no rule has.
const RuleInfo* find_rule(std::string_view name);

/// find_rule for an id a rule of this linter put on a finding; never nullptr for those.
const RuleInfo& rule_info(std::string_view id);

} // namespace kiln
