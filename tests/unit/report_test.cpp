// The HTML report of a run: drawn from real run records (tests/fixtures/report), read back
// through its DOM hooks.
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/records_folder.h"
#include "driver/records.h"
#include "forensics/report.h"
#include "html_elements.h"
#include "temp_dir.h"
#include "util/fs.h"
#include "util/time.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

const std::string k_fixtures = std::string(KILN_TEST_FIXTURES) + "/report/";

ReportInput fixture(const std::string& name) {
  auto in = read_run_record(k_fixtures + name);
  EXPECT_TRUE(in.has_value()) << (in ? "" : in.error());
  return in ? *in : ReportInput{};
}

json read_json(const std::string& path) {
  auto text = read_file(path);
  EXPECT_TRUE(text.has_value()) << path;
  return json::parse(text.value_or("{}"));
}

std::vector<std::string> stage_names(const json& manifest) {
  std::vector<std::string> names;
  for (const auto& stage : manifest["stages"]) {
    names.push_back(stage["name"].get<std::string>());
  }
  return names;
}

std::set<std::string> critical_path(const json& manifest) {
  std::set<std::string> names;
  for (const auto& name : manifest["critical_path"]["stages"]) {
    names.insert(name.get<std::string>());
  }
  return names;
}

/// The bars must name every stage once, and be critical exactly on the manifest's path.
void expect_bars_match(const std::string& html, const json& manifest) {
  auto bars = html_elements(html, "rect", "bar");
  std::vector<std::string> drawn;
  for (const auto& bar : bars) {
    drawn.push_back(bar.attribute("data-stage"));
    EXPECT_EQ(bar.has_class("critical"), critical_path(manifest).count(bar.attribute("data-stage")))
        << bar.attribute("data-stage");
  }
  EXPECT_EQ(drawn, stage_names(manifest));
  EXPECT_EQ(html_elements(html, "rect", "critical").size(), critical_path(manifest).size());
}

TEST(ReportRender, DemoRunDrawsOneCriticalBarPerStageInNeedOrder) {
  ReportInput in = fixture("hello");
  std::string html = render_report(in);
  expect_bars_match(html, in.manifest);
  auto bars = html_elements(html, "rect", "bar");
  ASSERT_EQ(bars.size(), 5u);
  // Each stage of the demo needs the one before: its bar starts where that one ended, though
  // the manifest's start times are whole seconds.
  for (size_t i = 1; i < bars.size(); ++i) {
    double previous_end = std::stod(bars[i - 1].attribute("data-start")) +
                          std::stod(bars[i - 1].attribute("data-seconds"));
    EXPECT_GE(std::stod(bars[i].attribute("data-start")) + 1e-3, previous_end)
        << bars[i].attribute("data-stage");
    EXPECT_GT(std::stod(bars[i].attribute("x")), std::stod(bars[i - 1].attribute("x")));
  }
  for (const auto& bar : bars) {
    EXPECT_EQ(bar.attribute("data-lane"), "");
    EXPECT_EQ(bar.attribute("data-outcome"), "built");
    EXPECT_GT(std::stod(bar.attribute("width")), 0);
  }
  // One row per stage without lanes; the legend names the path and its seconds.
  EXPECT_EQ(html_elements(html, "g", "gantt").at(0).attribute("data-rows"), "5");
  EXPECT_NE(html.find("critical path: base → toolchain → libs → final → smoke (6.2s)"),
            std::string::npos);
  EXPECT_EQ(html_elements(html, "li", "legend-critical").size(), 1u);
  // Every bar carries its tooltip.
  EXPECT_NE(html.find("<title>base: built, 1.935 s, 1 attempt (#1 ok)"), std::string::npos);
}

TEST(ReportRender, WideRunMarksOnlyTheCriticalPath) {
  ReportInput in = fixture("wide");
  std::string html = render_report(in);
  expect_bars_match(html, in.manifest);
  ASSERT_EQ(critical_path(in.manifest), (std::set<std::string>{"base", "png", "image"}));
  std::set<std::string> critical;
  for (const auto& bar : html_elements(html, "rect", "critical")) {
    critical.insert(bar.attribute("data-stage"));
  }
  EXPECT_EQ(critical, critical_path(in.manifest));
  // Three libraries built at once, three later: the bars overlap in time as the stages did.
  auto bars = html_elements(html, "rect", "bar");
  ASSERT_EQ(bars.size(), 8u);
  EXPECT_EQ(bars[1].attribute("data-start"), bars[2].attribute("data-start"));
}

TEST(ReportRender, FailedRunShowsVerdictsMatchedLinesAndTheSkippedStage) {
  ReportInput in = fixture("failed");
  std::string html = render_report(in);
  expect_bars_match(html, in.manifest);
  auto after = html_elements(html, "rect", "unstarted");
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].attribute("data-stage"), "after");
  EXPECT_EQ(after[0].attribute("data-outcome"), "skipped:flaky");
  EXPECT_EQ(after[0].attribute("width"), "0.0");
  EXPECT_TRUE(after[0].has_class("outcome-skipped"));

  auto rows = html_elements(html, "tr");
  std::vector<std::string> attempts;
  for (const auto& row : rows) {
    if (!row.attribute("data-attempt").empty()) {
      attempts.push_back(row.attribute("data-stage") + "#" + row.attribute("data-attempt"));
    }
  }
  EXPECT_EQ(attempts, (std::vector<std::string>{"base#1", "branch#1", "flaky#1", "flaky#2"}));
  EXPECT_EQ(html_elements(html, "td", "verdict-retry").size(), 1u);
  EXPECT_EQ(html_elements(html, "td", "verdict-refused-identical").size(), 1u);
  const std::string matched = in.manifest["stages"][2]["attempts"][0]["matched_line"];
  ASSERT_FALSE(matched.empty());
  const std::string shown = "<code class=\"matched-line\">" + html_escape(matched) + "</code>";
  size_t lines = 0;
  for (size_t at = html.find(shown); at != std::string::npos; at = html.find(shown, at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 2u) << "both failed attempts show the line that made their verdict";
  // One strip per attempt, coloured by its verdict.
  auto strips = html_elements(html, "rect", "attempt");
  ASSERT_EQ(strips.size(), 4u);
  EXPECT_EQ(strips[2].attribute("data-verdict"), "retry");
  EXPECT_EQ(strips[3].attribute("data-verdict"), "refused-identical");
  EXPECT_GE(std::stod(strips[3].attribute("x")),
            std::stod(strips[2].attribute("x")) + std::stod(strips[2].attribute("width")) - 0.1);
}

TEST(ReportRender, HostileStageNameAndLogLinesAreEscapedEverywhere) {
  ReportInput in = fixture("hello");
  const std::string hostile = "<script>alert(\"x\")</script>&'";
  json& m = in.manifest;
  m["stages"][0]["name"] = hostile;
  m["stages"][1]["needs"][0] = hostile;
  m["critical_path"]["stages"][0] = hostile;
  m["stages"][0]["attempts"][0]["matched_line"] = "</code><script>alert(1)</script>";
  m["stages"][0]["failure"] = "<img src=x onerror=alert(1)>";
  m["chain"]["name"] = "<b>chain</b>";
  in.resources[0].phase = "<script>";
  in.analysis = read_json(k_fixtures + "analysis.json");
  in.history = json{{"regressions",
                     {{{"stage", "<script>"},
                       {"lane", "\"q\""},
                       {"seconds", 2.0},
                       {"median_seconds", 1.0},
                       {"runs", 4}}}}};
  std::string html = render_report(in);

  std::string lower = html;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  EXPECT_EQ(lower.find("<script"), std::string::npos);
  EXPECT_EQ(lower.find("<img"), std::string::npos);
  EXPECT_EQ(lower.find("<b>chain"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"),
            std::string::npos);
  EXPECT_NE(html.find("&lt;/code&gt;&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("&lt;/pre&gt;&lt;script&gt;alert(&#39;analysis&#39;)"), std::string::npos);
  // Escaped, the name survives as it was: a reader of the DOM gets the stage back.
  auto bars = html_elements(html, "rect", "bar");
  ASSERT_EQ(bars.size(), 5u);
  EXPECT_EQ(bars[0].attribute("data-stage"), hostile);
  EXPECT_TRUE(bars[0].has_class("critical"));
}

TEST(ReportRender, ResourceSeriesHaveAPointPerSample) {
  ReportInput in = fixture("hello");
  ASSERT_EQ(in.resources.size(), 13u);
  std::string html = render_report(in);
  auto charts = html_elements(html, "svg", "resources");
  ASSERT_EQ(charts.size(), 1u);
  EXPECT_EQ(charts[0].attribute("data-samples"), "13");
  auto series = html_elements(html, "polyline", "series");
  std::vector<std::string> names;
  for (const auto& line : series) {
    for (const char* name : {"cpu", "ram", "committed", "disk"}) {
      if (line.has_class(name)) {
        names.push_back(name);
      }
    }
    EXPECT_EQ(line.attribute("data-points"), "13");
    auto points = points_of(line);
    ASSERT_EQ(points.size(), 13u);
    EXPECT_TRUE(std::is_sorted(points.begin(), points.end(), [](const auto& a, const auto& b) {
      return a.first < b.first;
    })) << "time runs left to right";
  }
  EXPECT_EQ(names, (std::vector<std::string>{"cpu", "ram", "committed", "disk"}));
  // The CPU panel is 0..100 %: the highest sample (82.8 %) is the highest point.
  auto cpu = points_of(html_elements(html, "polyline", "cpu").at(0));
  auto top = std::min_element(cpu.begin(), cpu.end(),
                              [](const auto& a, const auto& b) { return a.second < b.second; });
  EXPECT_EQ(top - cpu.begin(), 2) << "the row of 82.8 %";
  // A start and an end line per stage.
  EXPECT_EQ(html_elements(html, "line", "boundary").size(), 10u);
}

TEST(ReportRender, ALongRunsSamplesAreThinnedKeepingTheLast) {
  ReportInput in = fixture("hello");
  ResourceRow row = in.resources.front();
  in.resources.clear();
  for (int i = 0; i < 5001; ++i) {
    int at = 3600 + 38 * 60 + i; // from 01:38:00, just after the run started
    row.time = fmt::format("2026-12-04T{:02}:{:02}:{:02}Z", at / 3600, at / 60 % 60, at % 60);
    row.cpu_pct = i % 100;
    in.resources.push_back(row);
  }
  std::string html = render_report(in);
  auto cpu = html_elements(html, "polyline", "cpu").at(0);
  auto points = points_of(cpu);
  EXPECT_EQ(cpu.attribute("data-points"), std::to_string(points.size()));
  EXPECT_LE(points.size(), 2001u);
  EXPECT_GE(points.size(), 1000u);
  EXPECT_NE(html.find("5001 samples from resources.csv, " + std::to_string(points.size()) +
                      " of them drawn"),
            std::string::npos);
}

TEST(ReportRender, SizeStaysSmallWhateverTheLinesHold) {
  ReportInput in = fixture("hello");
  EXPECT_LT(render_report(in).size(), 64u * 1024) << "the demo's report";
  // A matched line or a failure can be megabytes (a minified line): each is clipped.
  std::string huge(1u << 20, 'x');
  for (auto& stage : in.manifest["stages"]) {
    stage["failure"] = huge;
    stage["attempts"][0]["matched_line"] = huge;
    stage["attempts"][0]["reason"] = huge;
  }
  in.analysis = read_json(k_fixtures + "analysis.json");
  (*in.analysis)["errors"][0]["lines"] = json::array();
  for (int i = 0; i < 1000; ++i) {
    (*in.analysis)["errors"][0]["lines"].push_back(huge.substr(0, 1000));
  }
  std::string html = render_report(in);
  EXPECT_LT(html.size(), 2u << 20);
  EXPECT_NE(html.find("… (1048576 bytes in all)"), std::string::npos);
  EXPECT_NE(html.find("… 980 more line(s)"), std::string::npos);
}

TEST(ReportRender, LanesShareARowUnlessTheirStagesOverlap) {
  ReportInput in = fixture("wide");
  for (auto& stage : in.manifest["stages"]) {
    stage["lane"] = "amd64";
    stage["name"] = "amd64/" + stage["name"].get<std::string>();
  }
  for (auto& name : in.manifest["critical_path"]["stages"]) {
    name = "amd64/" + name.get<std::string>();
  }
  for (auto& stage : in.manifest["stages"]) {
    for (auto& need : stage["needs"]) {
      need = "amd64/" + need.get<std::string>();
    }
  }
  std::string html = render_report(in);
  expect_bars_match(html, in.manifest);
  // --parallel 3: at least three rows hold the lane (more where whole-second start times make
  // a stage seem to start before the one whose slot it took ended), and no two bars of a row
  // overlap.
  std::map<std::string, std::vector<std::pair<double, double>>> rows;
  for (const auto& bar : html_elements(html, "rect", "bar")) {
    EXPECT_EQ(bar.attribute("data-lane"), "amd64");
    double x = std::stod(bar.attribute("x"));
    rows[bar.attribute("y")].emplace_back(x, x + std::stod(bar.attribute("width")));
  }
  EXPECT_GE(rows.size(), 3u);
  EXPECT_EQ(html_elements(html, "g", "gantt").at(0).attribute("data-rows"),
            std::to_string(rows.size()));
  for (auto& [y, spans] : rows) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) {
      EXPECT_LE(spans[i - 1].second, spans[i].first + 2.1) << "row at y=" << y;
    }
  }
  EXPECT_NE(html.find(">amd64</text>"), std::string::npos) << "the lane labels its first row";
  EXPECT_NE(html.find(">png 5.3s</text>"), std::string::npos) << "a bar names its stage";
}

TEST(ReportRender, ThePublishHasARowOfItsOwnAndNoLabelRunsIntoABar) {
  ReportInput in = fixture("wide");
  for (auto& stage : in.manifest["stages"]) {
    stage["lane"] = "amd64";
  }
  // The publish took the last 3.5 s of the run, after every stage.
  double wall = in.manifest["wall_seconds"].get<double>();
  auto started = parse_utc(in.manifest["started"].get<std::string>());
  ASSERT_TRUE(started);
  in.manifest["wall_seconds"] = wall + 3.5;
  in.manifest["publish"] =
      json::array({{{"ref", "127.0.0.1:5000/hello:1"},
                    {"status", "failed"},
                    {"started", utc_iso8601(SystemTime(std::chrono::seconds(
                                    static_cast<long>(*started + std::ceil(wall)))))},
                    {"seconds", 3.5},
                    {"failure", "skopeo copy: connection refused"}}});
  std::string html = render_report(in);
  auto publishes = html_elements(html, "rect", "publish-bar");
  ASSERT_EQ(publishes.size(), 1u);
  EXPECT_EQ(publishes[0].attribute("data-status"), "failed");
  EXPECT_TRUE(publishes[0].has_class("outcome-failed"));
  // It ends where the run ended: the time axis spans the whole run, publish included.
  double end = std::stod(publishes[0].attribute("data-start")) +
               std::stod(publishes[0].attribute("data-seconds"));
  EXPECT_NEAR(end, wall + 3.5, 1.0);
  double publish_y = std::stod(publishes[0].attribute("y"));
  std::vector<HtmlElement> bars = html_elements(html, "rect", "bar");
  for (const auto& bar : bars) {
    EXPECT_LT(std::stod(bar.attribute("y")), publish_y) << "the publish row is the last";
  }
  EXPECT_NE(html.find(">publish</text>"), std::string::npos);
  EXPECT_EQ(labels_running_into_bars(html), std::vector<std::string>{});
}

TEST(ReportRender, AnalysisAndHistorySectionsWhenGiven) {
  ReportInput in = fixture("hello");
  std::string plain = render_report(in);
  EXPECT_EQ(plain.find("id=\"analysis\""), std::string::npos);
  EXPECT_EQ(plain.find("id=\"regressions\""), std::string::npos);

  in.analysis = read_json(k_fixtures + "analysis.json");
  in.history = json{{"regressions",
                     {{{"stage", "lib"},
                       {"lane", ""},
                       {"seconds", 95.2},
                       {"median_seconds", 60.1},
                       {"runs", 10}}}},
                    {"eta_error", {{"median_seconds", 3.5}}}};
  std::string html = render_report(in);
  auto rows_in = [&html](const std::string& table) {
    size_t begin = html.find("<table class=\"" + table + "\"");
    if (begin == std::string::npos) {
      return size_t{0};
    }
    std::string body = html.substr(begin, html.find("</table>", begin) - begin);
    return html_elements(body, "tr").size() - 1; // the header row
  };
  EXPECT_EQ(rows_in("slowest-steps"), 3u);
  EXPECT_EQ(rows_in("idle-tails"), 1u);
  EXPECT_EQ(rows_in("clips"), 1u);
  EXPECT_EQ(rows_in("retries"), 1u);
  EXPECT_EQ(rows_in("warnings"), 2u);
  EXPECT_EQ(rows_in("regressions"), 1u);
  EXPECT_LT(html.find("data-class=\"-Wunused-parameter\""),
            html.find("data-class=\"-Wreturn-type\""))
      << "the most frequent class first";
  EXPECT_EQ(html_elements(html, "div", "error").size(), 1u);
  EXPECT_NE(html.find("greet.c:3:1: error: expected &#39;;&#39; before &#39;}&#39; token"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">1.58x</td>"), std::string::npos) << "95.2 / 60.1";
  EXPECT_NE(html.find("<dt>ETA error, median_seconds</dt><dd>3.500</dd>"), std::string::npos);
}

TEST(ReportRender, MissingResourcesLeaveANoteInsteadOfTheChart) {
  ReportInput in = fixture("hello");
  in.resources.clear();
  in.resources_note = "This run has no resources.csv.";
  std::string html = render_report(in);
  EXPECT_TRUE(html_elements(html, "svg", "resources").empty());
  EXPECT_NE(html.find("This run has no resources.csv."), std::string::npos);
  EXPECT_EQ(html_elements(html, "rect", "bar").size(), 5u);
}

TEST(ReportRender, FieldsOfTheWrongTypeAreLeftOutNotThrown) {
  ReportInput in;
  in.manifest =
      json{{"run_id", 7},
           {"critical_path", "base"},
           {"stages",
            {{{"name", "a"}, {"attempts", "none"}, {"gates", {1, 2}}},
             {{"name", "b"}, {"attempts", {{{"started", 3}, {"seconds", "long"}, {"compile", 1}}}}},
             "not a stage"}}};
  in.analysis = json{{"slowest_steps", "x"}, {"errors", {{{"lines", 5}}}}, {"warnings", 1}};
  in.history = json{{"regressions", {1}}, {"eta_error", 2.5}};
  std::string html;
  ASSERT_NO_THROW(html = render_report(in));
  EXPECT_EQ(html_elements(html, "rect", "bar").size(), 3u);
  EXPECT_NE(html.find("This manifest has schema none; this report reads schema " +
                      std::to_string(k_manifest_schema)),
            std::string::npos);
}

TEST(ReportInputs, ARunFolderWithoutAManifestIsAnErrorNamingIt) {
  TempDir dir;
  auto missing = read_run_record(dir.path());
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().find((dir.path() / "manifest.json").string()), std::string::npos)
      << missing.error();
  dir.write("manifest.json", "{\"schema\": 6, ");
  auto torn = read_run_record(dir.path());
  ASSERT_FALSE(torn.has_value());
  EXPECT_NE(torn.error().find("not a JSON object"), std::string::npos) << torn.error();
}

TEST(ReportInputs, AMalformedResourcesCsvOnlyLeavesTheChartOut) {
  TempDir dir;
  dir.write("manifest.json", read_file(k_fixtures + "hello/manifest.json").value());
  auto none = read_run_record(dir.path());
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->resources.empty());
  EXPECT_NE(none->resources_note.find("no resources.csv"), std::string::npos);
  dir.write("resources.csv", "time,phase\n");
  auto bad = read_run_record(dir.path());
  ASSERT_TRUE(bad.has_value());
  EXPECT_NE(bad->resources_note.find("resources.csv:1: expected the header"), std::string::npos)
      << bad->resources_note;
}

TEST(ReportRunFolder, ARunIdLatestOrAFolder) {
  TempDir dir;
  std::string records = (dir.path() / "records").string();
  dir.write("records/runs/20261204-013728-7c8a/manifest.json", "{}");
  std::filesystem::create_directory_symlink("runs/20261204-013728-7c8a",
                                            dir.path() / "records" / "latest");
  auto real = std::filesystem::canonical(dir.path() / "records/runs/20261204-013728-7c8a");
  EXPECT_EQ(resolve_run_folder("20261204-013728-7c8a", records).value(), real);
  EXPECT_EQ(resolve_run_folder("latest", records).value(), real);
  EXPECT_EQ(resolve_run_folder(real.string(), "elsewhere").value(), real);

  auto unknown = resolve_run_folder("20261204-000000-0000", records);
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().find(records + "/runs/20261204-000000-0000"), std::string::npos)
      << unknown.error();
  EXPECT_NE(unknown.error().find("--records DIR"), std::string::npos);
  auto not_a_run = resolve_run_folder(records, records);
  ASSERT_FALSE(not_a_run.has_value());
  EXPECT_NE(not_a_run.error().find("holds no manifest.json"), std::string::npos);
}

} // namespace
} // namespace kiln::testing
