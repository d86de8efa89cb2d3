#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chain/chain.h"
#include "dockerfile/parser.h"

namespace kiln {

struct LintOptions {
  /// More build-host name patterns (exact or `PREFIX*`) on top of the image-env gate's own.
  std::vector<std::string> extra_names;
  /// Compile-cache mount targets that only pay off when the stage can reach the remote cache:
  /// sccache's and ccache's cache folders for root. ccache 4 uses $XDG_CACHE_HOME/ccache, which
  /// is ~/.cache/ccache when XDG_CACHE_HOME is unset, unless the legacy ~/.ccache exists.
  std::vector<std::string> cache_targets = {"/root/.cache/sccache", "/var/cache/sccache",
                                            "/root/.cache/ccache", "/root/.ccache",
                                            "/var/cache/ccache"};
  std::string cache_endpoint_arg = "SCCACHE_WEBDAV_ENDPOINT";
  /// Directories whose files must be mounted or copied one by one, never whole.
  std::vector<std::string> per_file_dirs;
  /// Names that are set without an ARG (by the shell, the image or BuildKit itself).
  std::vector<std::string> known_names = {
      "PATH",          "HOME",      "HOSTNAME",   "TERM",          "PWD",
      "SHELL",         "USER",      "TARGETARCH", "TARGETOS",      "TARGETPLATFORM",
      "TARGETVARIANT", "BUILDARCH", "BUILDOS",    "BUILDPLATFORM", "BUILDVARIANT"};
};

/// The built-in options with what a chain's [gates] table adds or replaces.
LintOptions lint_options(const GateSettings& gates);

struct LintFinding {
  std::string file;
  int line = 0;
  int column = 0;
  std::string rule;
  std::string message;
};

struct LintResult {
  std::vector<LintFinding> findings;
  std::optional<LintFinding> parse_error; // rule "parse-error"
  int suppressed = 0;
};

/// Parses `text` and runs every rule; a file that does not parse yields only parse_error.
/// `# kiln-lint ignore=<id>[,<id>] reason=<text>` on the line directly above an instruction
/// suppresses those rules there; without a reason it suppresses nothing and is itself a
/// `suppression-without-reason` finding, so every silenced finding carries its justification.
LintResult lint_dockerfile(const std::string& file_name, std::string_view text,
                           const LintOptions& options);

/// lint_dockerfile for a file already parsed: `df` is parse_dockerfile(text).
LintResult lint_parsed(const std::string& file_name, std::string_view text, const Dockerfile& df,
                       const LintOptions& options);

/// `file:line:col: rule-id: message`, then the source line and a caret under the column: the
/// line clipped around the caret, and bytes a terminal would act on shown as `\xNN`.
std::string render_tty(const LintResult& result, std::string_view text);

/// One JSON array of {file, line, column, rule, message}, parse errors included.
std::string render_json(const std::vector<LintResult>& results);

/// render_json's array elements for one file, `,\n`-separated; empty when it has no finding.
std::string render_json_elements(const LintResult& result);
/// The array render_json returns, from each file's render_json_elements (rendered apart, on
/// worker threads), written to `out` in chunks: never joined whole in memory.
void write_json_elements(std::FILE* out, const std::vector<std::string>& parts);

/// SARIF 2.1.0, one run, every finding at level "error".
std::string render_sarif(const std::vector<LintResult>& results);

/// 2 when any file failed to parse, else 1 when any finding, else 0.
int lint_exit_code(const std::vector<LintResult>& results);

} // namespace kiln
