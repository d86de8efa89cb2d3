#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include "resources/sampler.h"

namespace kiln {

/// Everything one run's report is drawn from. Only the manifest is required; every field of
/// every document is read defensively, so an old, partial or hand-edited record still renders.
struct ReportInput {
  nlohmann::json manifest;                // the run's manifest.json
  std::vector<ResourceRow> resources;     // its resources.csv; empty when there is none
  std::string resources_note;             // why `resources` is empty, shown in its place
  std::optional<nlohmann::json> analysis; // the log analysis (kiln logs analyze --format json)
  std::optional<nlohmann::json> history;  // {"regressions": [...], "eta_error": ...}
  /// Why each stage that built was not reused (explain/run_explain.h's explanation_json);
  /// absent for a run recorded before kiln kept causes.
  std::optional<nlohmann::json> explanation;
};

/// One self-contained HTML page: inline style and SVG, no script, nothing fetched to view it.
/// Every string taken from the input is HTML-escaped. The DOM hooks are listed in
/// docs/report.md.
std::string render_report(const ReportInput& in);

/// `text` with `&`, `<`, `>`, `"` and `'` replaced by entities: safe in element content and in
/// a quoted attribute.
std::string html_escape(std::string_view text);

/// A run's manifest.json and resources.csv, read from its folder, with the analysis of its logs
/// and, when its records hold a history, its regressions and ETA error. A missing or
/// unparsable manifest is an error naming the path; a missing or malformed resources.csv only
/// leaves the chart out, with the reason in `resources_note`. `log_analysis`, when given, is that
/// analysis already made (a run makes it for its history): the logs are not read again.
tl::expected<ReportInput, std::string>
read_run_record(const std::filesystem::path& run_dir, const nlohmann::json* log_analysis = nullptr);

/// Read the record in `run_dir` (as read_run_record), render it and write it atomically to `out`.
tl::expected<void, std::string> write_run_report(const std::filesystem::path& run_dir,
                                                 const std::filesystem::path& out,
                                                 const nlohmann::json* log_analysis = nullptr);

} // namespace kiln
