#include "lint/catalog.h"

#include <array>
#include <stdexcept>
#include <string>

namespace kiln {
namespace {

// BuildKit's own rules carry its name, description and documentation address
// (frontend/dockerfile/linter/ruleset.go), so a `--format buildkit-json` report reads as
// BuildKit's would.
#define KILN_BUILDKIT_RULE(id, name, description, severity)                                        \
  RuleInfo {                                                                                       \
    id, name, description, "https://docs.docker.com/go/dockerfile/rule/" id "/", severity          \
  }

constexpr std::array k_rules = {
    RuleInfo{"leak-env-name", "", "ENV sets a build-host cache or credential variable", "",
             Severity::error},
    RuleInfo{"leak-address", "",
             "ENV value or ARG default points at a private or link-local address", "",
             Severity::error},
    RuleInfo{"leak-env-expansion", "", "ENV copies a build-host variable under another name", "",
             Severity::error},
    RuleInfo{"arg-scope", "",
             "variable is declared by ARG only outside this stage and expands empty", "",
             Severity::error},
    RuleInfo{"cache-arg-missing", "",
             "compile-cache mount in a stage without the cache endpoint ARG", "", Severity::error},
    RuleInfo{"whole-dir-mount", "", "a per-file-only directory is mounted or copied whole", "",
             Severity::error},
    RuleInfo{"wget-without-progress", "",
             "wget without --progress or -q/-nv fills the build log with a progress bar",
             "https://github.com/hadolint/hadolint/wiki/DL3047", Severity::warning},
    RuleInfo{"compile-without-budget", "",
             "a RUN compiles without mounting the kiln-budget secret: its job count ignores the "
             "run's budget",
             "", Severity::warning},
    RuleInfo{"arg-rekeys-steps", "",
             "a version pin is declared (ARG or ENV) above RUNs that never read it: each bump "
             "rebuilds them",
             "", Severity::warning},
    RuleInfo{"pins-in-one-env", "",
             "several version pins set in one ENV: a bump of any rebuilds the steps of all", "",
             Severity::warning},
    RuleInfo{"cache-mount-unkeyed", "",
             "a cache mount keyed by a fixed id in a file built for several platforms: they "
             "share it",
             "", Severity::warning},
    RuleInfo{"unpinned-fetch", "",
             "a RUN fetches a moving ref (a latest release, a branch head): the same line can "
             "build differently",
             "", Severity::warning},
    KILN_BUILDKIT_RULE("stage-name-casing", "StageNameCasing", "Stage names should be lowercase",
                       Severity::warning),
    KILN_BUILDKIT_RULE("from-as-casing", "FromAsCasing",
                       "The 'as' keyword should match the case of the 'from' keyword",
                       Severity::warning),
    KILN_BUILDKIT_RULE("no-empty-continuation", "NoEmptyContinuation",
                       "Empty continuation lines will become errors in a future release",
                       Severity::warning),
    KILN_BUILDKIT_RULE("consistent-instruction-casing", "ConsistentInstructionCasing",
                       "All commands within the Dockerfile should use the same casing (either "
                       "upper or lower)",
                       Severity::warning),
    KILN_BUILDKIT_RULE("duplicate-stage-name", "DuplicateStageName", "Stage names should be unique",
                       Severity::warning),
    KILN_BUILDKIT_RULE("reserved-stage-name", "ReservedStageName",
                       "Reserved words should not be used as stage names", Severity::warning),
    KILN_BUILDKIT_RULE("json-args-recommended", "JSONArgsRecommended",
                       "JSON arguments recommended for ENTRYPOINT/CMD to prevent unintended "
                       "behavior related to OS signals",
                       Severity::warning),
    KILN_BUILDKIT_RULE("maintainer-deprecated", "MaintainerDeprecated",
                       "The MAINTAINER instruction is deprecated, use a label instead to define "
                       "an image author",
                       Severity::warning),
    KILN_BUILDKIT_RULE("undefined-arg-in-from", "UndefinedArgInFrom",
                       "FROM command must use declared ARGs", Severity::warning),
    KILN_BUILDKIT_RULE("workdir-relative-path", "WorkdirRelativePath",
                       "Relative workdir without an absolute workdir declared within the build "
                       "can have unexpected results if the base image changes",
                       Severity::warning),
    KILN_BUILDKIT_RULE("undefined-var", "UndefinedVar",
                       "Variables should be defined before their use", Severity::warning),
    KILN_BUILDKIT_RULE("multiple-instructions-disallowed", "MultipleInstructionsDisallowed",
                       "Multiple instructions of the same type should not be used in the same "
                       "stage",
                       Severity::warning),
    KILN_BUILDKIT_RULE("legacy-key-value-format", "LegacyKeyValueFormat",
                       "Legacy key/value format with whitespace separator should not be used",
                       Severity::warning),
    KILN_BUILDKIT_RULE("redundant-target-platform", "RedundantTargetPlatform",
                       "Setting platform to predefined $TARGETPLATFORM in FROM is redundant as "
                       "this is the default behavior",
                       Severity::warning),
    KILN_BUILDKIT_RULE("secrets-used-in-arg-or-env", "SecretsUsedInArgOrEnv",
                       "Sensitive data should not be used in the ARG or ENV commands",
                       Severity::warning),
    KILN_BUILDKIT_RULE("invalid-default-arg-in-from", "InvalidDefaultArgInFrom",
                       "Default value for global ARG results in an empty or invalid base image "
                       "name",
                       Severity::warning),
    KILN_BUILDKIT_RULE("from-platform-flag-const-disallowed", "FromPlatformFlagConstDisallowed",
                       "FROM --platform flag should not use a constant value", Severity::warning),
    // The build fails on it ("failed to compute cache key"), so a run stops on it too.
    KILN_BUILDKIT_RULE("copy-ignored-file", "CopyIgnoredFile",
                       "Attempting to Copy file that is excluded by .dockerignore",
                       Severity::error),
    KILN_BUILDKIT_RULE("expose-proto-casing", "ExposeProtoCasing",
                       "Protocol in EXPOSE instruction should be lowercase", Severity::warning),
    KILN_BUILDKIT_RULE("expose-invalid-format", "ExposeInvalidFormat",
                       "IP address and host-port mapping should not be used in EXPOSE "
                       "instruction. This will become an error in a future release",
                       Severity::warning),
    RuleInfo{"check-directive", "",
             "the `# check=` directive does not parse, so BuildKit refuses the file", "",
             Severity::error},
    RuleInfo{"suppression-without-reason", "", "kiln-lint suppression without a reason", "",
             Severity::error},
    RuleInfo{"parse-error", "", "the Dockerfile does not parse", "", Severity::error},
};

#undef KILN_BUILDKIT_RULE

} // namespace

std::span<const RuleInfo> lint_rules() {
  return k_rules;
}

const RuleInfo* find_rule(std::string_view name) {
  for (const auto& rule : k_rules) {
    if (rule.id == name || (!rule.buildkit.empty() && rule.buildkit == name)) {
      return &rule;
    }
  }
  return nullptr;
}

const RuleInfo& rule_info(std::string_view id) {
  if (const RuleInfo* rule = find_rule(id)) {
    return *rule;
  }
  throw std::logic_error("lint finding under an unknown rule: " + std::string(id));
}

} // namespace kiln
