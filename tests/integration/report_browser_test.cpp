// `kiln report` on a real run of the demo chain, opened in headless Chromium: the DOM the browser
// built from the page holds a bar per stage, the critical path marked and the resources drawn.
#include <algorithm>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "html_elements.h"
#include "kiln_harness.h"
#include "resources/sampler.h"
#include "util/fs.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

TEST(ReportBrowser, TheDemoRunsReportRendersInHeadlessChromium) {
  if (!std::filesystem::exists(k_chromium)) {
    GTEST_SKIP() << k_chromium << " is not installed (scripts/install-deps installs it)";
  }
  ChainDir dir;
  dir.copy_demo();
  // A chain name of this test's own, so the tags it removes at the end are its own; the layer
  // cache of earlier demo runs still serves the builds.
  std::string chain = dir.read("chain.toml");
  chain.replace(chain.find("name = \"hello\""), 14, "name = \"hello-" + dir.nonce() + "\"");
  dir.write("chain.toml", chain);

  KilnResult run = dir.kiln({"run", "chain.toml", "--report"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  json manifest = dir.latest_manifest();
  const std::string run_id = manifest["run_id"];
  std::filesystem::path run_dir = dir.path() / "records" / "runs" / run_id;
  EXPECT_NE(run.output.find("kiln: report: " + (run_dir / "report.html").string()),
            std::string::npos)
      << run.output;
  EXPECT_TRUE(std::filesystem::exists(run_dir / "report.html")) << "kiln run --report wrote none";

  KilnResult report = dir.kiln({"report", run_id, "-o", "demo-report.html"});
  ASSERT_EQ(report.exit_code, 0) << report.output;
  std::string page = dir.read("demo-report.html");
  ASSERT_FALSE(page.empty());
  // The run's page, drawn from the analysis made for its history, is the page read afresh.
  EXPECT_EQ(dir.read("records/runs/" + run_id + "/report.html"), page);
  EXPECT_LT(page.size(), 2u << 20);
  // Self-contained: nothing to fetch, no script.
  for (const char* outside : {"http:", "https:", "<link", "<script", " src="}) {
    EXPECT_EQ(page.find(outside), std::string::npos) << outside;
  }

  std::string dom = rendered_dom(dir, dir.path() / "demo-report.html");
  ASSERT_NE(dom.find("</html>"), std::string::npos) << "Chromium printed no DOM:\n" << dom;

  // Exactly one bar per stage of the run, in run order.
  std::vector<std::string> stages;
  for (const auto& stage : manifest["stages"]) {
    stages.push_back(stage["name"]);
  }
  ASSERT_EQ(stages.size(), 5u);
  auto bars = html_elements(dom, "rect", "bar");
  std::vector<std::string> drawn;
  for (const auto& bar : bars) {
    drawn.push_back(bar.attribute("data-stage"));
    EXPECT_GT(std::stod(bar.attribute("width")), 0) << bar.attribute("data-stage");
  }
  EXPECT_EQ(drawn, stages);
  EXPECT_EQ(html_elements(dom, "g", "gantt").size(), 1u);

  // The critical class on exactly the manifest's critical path, and a legend naming it.
  std::set<std::string> path;
  for (const auto& name : manifest["critical_path"]["stages"]) {
    path.insert(name.get<std::string>());
  }
  ASSERT_FALSE(path.empty());
  std::set<std::string> critical;
  for (const auto& element : html_elements(dom, "rect", "critical")) {
    EXPECT_TRUE(element.has_class("bar"));
    critical.insert(element.attribute("data-stage"));
  }
  EXPECT_EQ(critical, path);
  EXPECT_EQ(html_elements(dom, "li", "legend-critical").size(), 1u);

  // The resource chart: a point per sample of resources.csv in each series.
  auto samples = read_resource_csv(run_dir / "resources.csv");
  ASSERT_TRUE(samples.has_value()) << samples.error();
  ASSERT_GE(samples->size(), 2u);
  auto charts = html_elements(dom, "svg", "resources");
  ASSERT_EQ(charts.size(), 1u);
  EXPECT_EQ(charts[0].attribute("data-samples"), std::to_string(samples->size()));
  for (const char* series : {"cpu", "ram", "disk"}) {
    auto lines = html_elements(dom, "polyline", series);
    ASSERT_EQ(lines.size(), 1u) << series;
    size_t points = points_of(lines[0]).size();
    EXPECT_GE(points, 2u) << series;
    EXPECT_EQ(points, samples->size()) << series;
    EXPECT_EQ(lines[0].attribute("data-points"), std::to_string(points)) << series;
  }
  EXPECT_EQ(html_elements(dom, "line", "boundary").size(), 2 * stages.size());

  // The run's logs were analysed and it is in the history: both sections are there.
  EXPECT_EQ(html_elements(dom, "table", "slowest-steps").size(), 1u);
  EXPECT_NE(dom.find("<section id=\"analysis\">"), std::string::npos);
  EXPECT_NE(dom.find("<section id=\"regressions\">"), std::string::npos);
}

TEST(ReportCli, AMissingRunOrAnUnreadableManifestIsOneErrorLineAndExitTwo) {
  ChainDir dir;
  KilnResult nowhere = dir.kiln({"report", "20261204-000000-0000"});
  EXPECT_EQ(nowhere.exit_code, 2) << nowhere.output;
  EXPECT_EQ(nowhere.output, "kiln: error: records holds no runs (no records/runs): name the "
                            "records folder with --records DIR or the chain with --chain FILE\n");
  std::filesystem::create_directories(dir.path() / "records/runs");
  KilnResult missing = dir.kiln({"report", "20261204-000000-0000"});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_EQ(missing.output,
            "kiln: error: no run folder records/runs/20261204-000000-0000 (20261204-000000-0000 "
            "is neither a folder nor a run under records/runs); name a run id from "
            "records/runs, `latest` or a run folder, and --records DIR when the records are "
            "elsewhere\n");

  dir.write("records/runs/20261204-000000-0000/manifest.json", "{\"schema\": 6,");
  KilnResult torn = dir.kiln({"report", "20261204-000000-0000"});
  EXPECT_EQ(torn.exit_code, 2) << torn.output;
  EXPECT_NE(torn.output.find("kiln: error: "), std::string::npos);
  EXPECT_NE(torn.output.find("records/runs/20261204-000000-0000/manifest.json is not a JSON "
                             "object: not a kiln manifest; nothing was written\n"),
            std::string::npos)
      << torn.output;
  EXPECT_EQ(std::count(torn.output.begin(), torn.output.end(), '\n'), 1) << torn.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "records/runs/20261204-000000-0000/"
                                                    "report.html"));
}

TEST(ReportCli, RunWithReportWritesItForAFailedRunToo) {
  ChainDir dir;
  write_two_stage_chain(dir, "RUN echo 'lib.c:3:1: error: expected ;' >&2; exit 1\n", 1);
  KilnResult run = dir.kiln({"run", "chain.toml", "--report"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  std::string page = dir.read("records/latest/report.html");
  auto bars = html_elements(page, "rect", "bar");
  ASSERT_EQ(bars.size(), 2u) << run.output;
  EXPECT_EQ(bars[1].attribute("data-stage"), "work");
  EXPECT_EQ(bars[1].attribute("data-outcome"), "failed");
  EXPECT_NE(page.find("class=\"verdict verdict-permanent\""), std::string::npos);
  EXPECT_NE(run.output.find("kiln: report: "), std::string::npos) << run.output;
}

} // namespace
} // namespace kiln::testing
