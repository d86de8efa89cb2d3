#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chain/chain.h"
#include "dockerfile/parser.h"
#include "lint/catalog.h"

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
  /// Also run the rules of Severity::warning (BuildKit's style and likely-mistake checks).
  /// `kiln lint` turns this on; the `kiln run` preflight leaves it off and so stops only on
  /// errors, and on a file's warnings when its `# check=error=true` directive makes BuildKit
  /// fail the build on them.
  bool warnings = false;
  /// The build context's `.dockerignore`, for copy-ignored-file: its text when the caller has
  /// it, else (with read_dockerignore) read as BuildKit does: `<Dockerfile>.dockerignore`
  /// beside the Dockerfile, else `.dockerignore` in context_dir (empty: the Dockerfile's
  /// folder).
  std::optional<std::string> dockerignore;
  bool read_dockerignore = true;
  std::string context_dir;
  /// How many platforms a chain builds the file for (its lanes'): a cache mount they share
  /// mixes what each platform's toolchain wrote (cache-mount-unkeyed).
  int platforms = 1;
};

/// The built-in options with what a chain's [gates] table adds or replaces.
LintOptions lint_options(const GateSettings& gates);

struct LintFinding {
  std::string file;
  int line = 0;
  int column = 0;
  std::string rule;
  std::string message;
  /// The start line of the instruction the finding is about, where suppressions and `# check=`
  /// comments bind; 0 for `line`. BuildKit places a few findings elsewhere (an empty
  /// continuation on the instruction's last line).
  int anchor = 0;
  /// The instruction's last line, for formats that show a range; 0 for `line`.
  int end_line = 0;
  Severity severity = Severity::error;
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

/// SARIF 2.1.0, one run, each finding at its severity's level ("error" or "warning").
std::string render_sarif(const std::vector<LintResult>& results);

/// BuildKit's lint result JSON (its frontend.lint subrequest's `result.json`, what
/// `docker buildx build --call=check,format=json` prints): `warnings` with BuildKit's rule
/// names, descriptions and URLs (kiln's own rules under their ids), `sources` holding every
/// file linted (its text base64),
/// and `buildError` for the first file that does not parse. `sources` name each file and hold
/// its text, parallel to `results`; they are BuildKit's `sources`, without the build
/// definition BuildKit adds, which a lint without a build does not have.
struct LintSource {
  std::string_view file;
  std::string_view text;
};
std::string render_buildkit_json(const std::vector<LintResult>& results,
                                 const std::vector<LintSource>& sources);

/// GitHub Actions workflow commands, one line per finding:
/// `::error file=F,line=L,col=C,title=RULE::message` (`::warning` for a warning), with
/// GitHub's escaping of `%`, CR and LF everywhere and of `:` and `,` in the properties.
std::string render_github(const std::vector<LintResult>& results);

/// 2 when any file failed to parse, else 1 when any finding, else 0.
int lint_exit_code(const std::vector<LintResult>& results);

} // namespace kiln
