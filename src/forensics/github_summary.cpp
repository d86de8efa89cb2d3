#include "forensics/github_summary.h"

#include <cctype>
#include <iterator>
#include <optional>

#include <fmt/format.h>

#include "util/json_field.h"
#include "util/strings.h"
#include "util/time.h"

namespace kiln {

namespace {

using Json = nlohmann::json;

std::string str(const Json& object, const char* key) {
  return json_field(object, key, std::string());
}

std::string md(const Json& object, const char* key) {
  return markdown_text(str(object, key));
}

/// Cached or built: what the engine's layer cache did for the stage's build.
std::string cache_column(const Json& stage) {
  std::string outcome = str(stage, "outcome");
  if (outcome == "reused") {
    return "cached";
  }
  const Json& attempts = json_array(stage, "attempts");
  if (str(stage, "status") != "ok" || attempts.empty()) {
    return "-"; // no image came of it
  }
  long run = json_field(attempts.back(), "steps_run", 0L);
  long cached = json_field(attempts.back(), "steps_cached", 0L);
  return cached > 0 ? fmt::format("built ({} of {} steps cached)", cached, run) : "built";
}

void stage_table(std::string& out, const Json& manifest) {
  out += "| Stage | Lane | Result | Time | Cache | Cause |\n"
         "| --- | --- | --- | ---: | --- | --- |\n";
  for (const auto& stage : json_array(manifest, "stages")) {
    std::string result =
        str(stage, "outcome").empty() ? str(stage, "status") : str(stage, "outcome");
    std::string cause;
    if (const Json& c = json_member(stage, "cause"); c.is_object()) {
      cause = md(c, "summary");
    } else if (!str(stage, "failure").empty()) {
      cause = md(stage, "failure");
    }
    fmt::format_to(std::back_inserter(out), "| {} | {} | {} | {:.1f}s | {} | {} |\n",
                   md(stage, "name"), md(stage, "lane"), markdown_text(result),
                   json_field(stage, "seconds", 0.0), cache_column(stage), cause);
  }
}

void gate_lines(std::string& out, const Json& manifest) {
  std::string lines;
  for (const auto& stage : json_array(manifest, "stages")) {
    for (const auto& gate : json_array(stage, "gates")) {
      std::string findings;
      for (const auto& finding : json_array(gate, "findings")) {
        findings += (findings.empty() ? ": " : "; ") +
                    markdown_text(finding.is_string() ? finding.get<std::string>() : "");
      }
      fmt::format_to(std::back_inserter(lines), "- {} {} gate on {}: **{}**{}\n", md(stage, "name"),
                     md(gate, "gate"), md(gate, "subject"), md(gate, "verdict"), findings);
    }
    if (const Json& smoke = json_member(stage, "smoke"); smoke.is_object()) {
      fmt::format_to(std::back_inserter(lines),
                     "- {} smoke floors: **{}**: {} passed, {} failed, {} skipped (min_passed "
                     "{}, max_skipped {}){}\n",
                     md(stage, "name"), md(smoke, "verdict"), json_field(smoke, "passed", 0L),
                     json_field(smoke, "failed", 0L), json_field(smoke, "skipped", 0L),
                     json_field(smoke, "min_passed", 0L), json_field(smoke, "max_skipped", 0L),
                     str(smoke, "reason").empty() ? "" : ": " + md(smoke, "reason"));
    }
    std::string not_run;
    for (const auto& gate : json_array(stage, "gates_not_run")) {
      not_run += (not_run.empty() ? "" : ", ") +
                 markdown_text(gate.is_string() ? gate.get<std::string>() : "");
    }
    if (!not_run.empty()) {
      fmt::format_to(std::back_inserter(lines), "- {} not run (the stage was skipped): {}\n",
                     md(stage, "name"), not_run);
    }
  }
  for (const auto& publish : json_array(manifest, "publish")) {
    for (const auto& gate : json_array(publish, "gates")) {
      fmt::format_to(std::back_inserter(lines), "- publish {} {} gate: **{}**\n",
                     md(publish, "ref"), md(gate, "gate"), md(gate, "verdict"));
    }
    fmt::format_to(std::back_inserter(lines), "- publish {}: **{}**{}\n", md(publish, "ref"),
                   md(publish, "status"),
                   str(publish, "failure").empty() ? "" : ": " + md(publish, "failure"));
  }
  out += "\n**Gates**\n\n";
  out += lines.empty() ? "No gate judged this run.\n" : lines;
}

void regression_lines(std::string& out, const std::optional<Json>& history) {
  if (!history) {
    return; // no run history in these records: nothing to compare with
  }
  out += "\n**Regressions**\n\n";
  const Json& rows = json_array(*history, "regressions");
  if (rows.empty()) {
    out += "No stage was slower than its history.\n";
    return;
  }
  for (const auto& r : rows) {
    double seconds = json_field(r, "seconds", 0.0);
    double median = json_field(r, "median_seconds", 0.0);
    fmt::format_to(std::back_inserter(out),
                   "- {}{}: {:.1f}s against a median of {:.1f}s over {} earlier {} build(s){}\n",
                   md(r, "stage"), str(r, "lane").empty() ? "" : " (" + md(r, "lane") + ")",
                   seconds, median, json_field(r, "runs", 0L), md(r, "kind"),
                   median > 0 ? fmt::format(", {:.2f}x", seconds / median) : "");
  }
}

} // namespace

std::string markdown_text(std::string_view text, size_t limit) {
  std::string out;
  size_t cut = utf8_cut(text, limit);
  for (char c : text.substr(0, cut)) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) {
      out += ' ';
    } else if (byte < 0x80 && std::ispunct(byte) != 0) {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  if (cut < text.size()) {
    out += "…";
  }
  return out;
}

std::string render_step_summary(const ReportInput& in) {
  const Json& manifest = in.manifest;
  const Json& engine = json_member(manifest, "engine");
  std::string out =
      fmt::format("### kiln run {}: {}\n\n", md(manifest, "run_id"), md(manifest, "status"));
  fmt::format_to(std::back_inserter(out), "Chain {} on {} {}, {} wall time.\n\n",
                 md(json_member(manifest, "chain"), "name"), md(engine, "name"),
                 md(engine, "version"), human_duration(json_field(manifest, "wall_seconds", 0.0)));
  stage_table(out, manifest);
  const Json& path = json_member(manifest, "critical_path");
  std::string stages;
  for (const auto& stage : json_array(path, "stages")) {
    stages += (stages.empty() ? "" : " → ") +
              markdown_text(stage.is_string() ? stage.get<std::string>() : "");
  }
  if (!stages.empty()) {
    fmt::format_to(std::back_inserter(out), "\n**Critical path**: {} ({} of builds)\n", stages,
                   human_duration(json_field(path, "seconds", 0.0)));
  }
  regression_lines(out, in.history);
  gate_lines(out, manifest);
  return out + "\n";
}

} // namespace kiln
