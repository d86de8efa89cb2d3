// What kiln writes for a CI server: the JUnit XML of a run, the GitHub Actions step summary and
// workflow-command annotations. Drawn from a real run record (tests/fixtures/report/failed) with
// a log analysis written here; the end-to-end checks, xmllint's schema validation included, are
// in tests/integration/ci_outputs_test.cpp.
#include <gtest/gtest.h>

#include "dockerfile/parser.h"
#include "forensics/github_summary.h"
#include "forensics/junit.h"
#include "forensics/report.h"
#include "forensics/stage_annotations.h"
#include "forensics/stage_error.h"
#include "util/workflow_command.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

const std::string k_failed = std::string(KILN_TEST_FIXTURES) + "/report/failed";

/// The `failed` record (base reused, branch built, flaky failed on attempt 2, after skipped)
/// with an analysis that names flaky's failing step and its error lines.
ReportInput failed_run() {
  auto in = read_run_record(k_failed);
  EXPECT_TRUE(in.has_value()) << (in ? "" : in.error());
  ReportInput record = in ? *in : ReportInput{};
  record.analysis =
      json{{"errors",
            {{{"stage", "flaky"},
              {"lane", ""},
              {"attempt", 1},
              {"id", "STEP 2/2"},
              {"name", "RUN fetch --first"},
              {"lines", {"an earlier attempt's line"}}},
             {{"stage", "flaky"},
              {"lane", ""},
              {"attempt", 2},
              {"id", "STEP 2/2"},
              {"name", "RUN  fetch   --all"},
              {"lines", {"fetch: connection reset by peer <&> \x1b[31mred\x1b[0m", "second line"}},
              {"from_tail", false}}}}};
  return record;
}

TEST(XmlEscape, EntitiesInContentAndAttributes) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(xml_escape("one\ntwo\tthree"), "one\ntwo\tthree");
  // A parser turns LF and TAB in an attribute into spaces, and any bare CR into LF.
  EXPECT_EQ(xml_escape("one\ntwo\tthree\r", true), "one&#10;two&#9;three&#13;");
  EXPECT_EQ(xml_escape("cr\r\nlf"), "cr&#13;\nlf");
}

TEST(XmlEscape, DropsWhatXmlForbidsAndReplacesBytesThatAreNotUtf8) {
  // The control bytes a log holds (ESC, BEL, NUL, backspace) cannot be written in XML 1.0.
  EXPECT_EQ(xml_escape(std::string("\x1b[31mred\x1b[0m\a\b", 12) + std::string(1, '\0') + "end"),
            "[31mred[0mend");
  EXPECT_EQ(xml_escape("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");
  EXPECT_EQ(xml_escape("bad \xff\xc3 byte"), "bad \xEF\xBF\xBD\xEF\xBF\xBD byte");
  EXPECT_EQ(xml_escape("\xEF\xBF\xBE\xEF\xBF\xBFok"), "ok");                     // U+FFFE, U+FFFF
  EXPECT_EQ(xml_escape("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); // a surrogate
}

TEST(JUnit, OneTestcasePerStageWithTheFailureTheSkipAndTheReuse) {
  std::string xml = render_junit(failed_run(), "records/runs/20261204-014906-08d2");
  EXPECT_NE(xml.find("<testsuites name=\"rptfail\" tests=\"4\" failures=\"1\" errors=\"0\""),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<testsuite name=\"rptfail\" id=\"0\" tests=\"4\" failures=\"1\" "
                     "errors=\"0\" skipped=\"1\" time=\"6.251\" "
                     "timestamp=\"2026-12-04T01:49:06Z\" hostname=\"vm\">"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<testcase name=\"base\" classname=\"rptfail\" time=\"0.497\">"),
            std::string::npos);
  EXPECT_NE(xml.find("<property name=\"outcome\" value=\"reused\"/>"), std::string::npos);
  EXPECT_NE(xml.find("<system-out>reused: every step came from the layer cache</system-out>"),
            std::string::npos);
  // The failure quotes the last attempt's error lines, escaped, and names its log.
  EXPECT_NE(xml.find("<failure message=\"failed exactly as attempt 1 did (class "
                     "&apos;registry-network&apos;); a flake changes between attempts, this did "
                     "not\" type=\"failed\">"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("STEP 2/2 RUN  fetch   --all: printed these error lines:\n"
                     "  fetch: connection reset by peer &lt;&amp;&gt; [31mred[0m\n"
                     "  second line\n"
                     "log: records/runs/20261204-014906-08d2/stages/flaky.attempt-2.log\n"
                     "</failure>"),
            std::string::npos)
      << xml;
  EXPECT_EQ(xml.find("an earlier attempt's line"), std::string::npos);
  EXPECT_NE(xml.find("<skipped message=\"not built: it needs flaky, which ended failed\"/>"),
            std::string::npos)
      << xml;
}

TEST(JUnit, LanesAreSuitesAndSmokeCountsAreProperties) {
  ReportInput in;
  in.manifest = json::parse(R"({
    "chain": {"name": "c"}, "run_id": "r", "status": "ok", "started": "",
    "stages": [
      {"name": "amd64/base", "lane": "amd64", "status": "ok", "outcome": "built", "seconds": 2,
       "attempts": [{"number": 1, "log": "stages/amd64/base.attempt-1.log"}], "smoke": null},
      {"name": "arm64/base", "lane": "arm64", "status": "ok", "outcome": "built", "seconds": 3,
       "attempts": [], "smoke": null},
      {"name": "amd64/smoke", "lane": "amd64", "status": "ok", "outcome": "built", "seconds": 1,
       "attempts": [], "smoke": {"passed": 7, "failed": 0, "skipped": 2, "min_passed": 1,
                                 "max_skipped": 2, "verdict": "pass"}},
      "not a stage"
    ]})");
  std::string xml = render_junit(in, "run");
  EXPECT_NE(xml.find("<testsuite name=\"amd64\" id=\"0\" tests=\"2\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<testsuite name=\"arm64\" id=\"1\" tests=\"1\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<testcase name=\"smoke\" classname=\"amd64\" time=\"1.000\">"),
            std::string::npos);
  for (const char* property : {"<property name=\"smoke.passed\" value=\"7\"/>",
                               "<property name=\"smoke.failed\" value=\"0\"/>",
                               "<property name=\"smoke.skipped\" value=\"2\"/>",
                               "<property name=\"smoke.verdict\" value=\"pass\"/>"}) {
    EXPECT_NE(xml.find(property), std::string::npos) << property;
  }
  EXPECT_EQ(xml.find("timestamp="), std::string::npos); // no start recorded: none written
}

TEST(WorkflowCommand, EscapesTheMessageAndTheProperties) {
  EXPECT_EQ(workflow_escape_data("100% a:b,c\r\nd"), "100%25 a:b,c%0D%0Ad");
  EXPECT_EQ(workflow_escape_property("100% a:b,c\r\nd"), "100%25 a%3Ab%2Cc%0D%0Ad");
  EXPECT_EQ(workflow_command("error", {{"file", "dir,a:b/Dockerfile"}, {"line", "3"}}, "x: y%"),
            "::error file=dir%2Ca%3Ab/Dockerfile,line=3::x: y%25\n");
  EXPECT_EQ(workflow_command("warning", {}, "two\nlines"), "::warning::two%0Alines\n");
}

TEST(StepLine, FindsTheInstructionTheEnginePrinted) {
  auto df = parse_dockerfile("FROM base AS build\nRUN make \\\n    all\nRUN  fetch --all\n"
                             "COPY a b\nCOPY a b\n");
  ASSERT_TRUE(df.has_value());
  EXPECT_EQ(step_line(*df, "RUN fetch --all"), 4);
  EXPECT_EQ(step_line(*df, "run fetch   --all"), 4);
  EXPECT_EQ(step_line(*df, "[build 2/3] RUN fetch --all"), 4); // BuildKit's vertex name
  EXPECT_EQ(step_line(*df, "RUN make     all"), 2);
  EXPECT_EQ(step_line(*df, "COPY a b"), 0); // twice in the file: not known which
  EXPECT_EQ(step_line(*df, "RUN something else"), 0);
  EXPECT_EQ(step_line(*df, ""), 0);
}

TEST(StageAnnotations, OneErrorPerFailedStageOnItsDockerfileAtTheFailingLine) {
  auto df = parse_dockerfile("FROM base\nRUN true\nRUN fetch --all\n");
  ASSERT_TRUE(df.has_value());
  std::string out = stage_annotations(failed_run(), [&](const std::string& name) {
    EXPECT_EQ(name, "flaky"); // only a stage that failed is asked about
    return StageDockerfile{"stages/flaky,1.Dockerfile", &*df};
  });
  EXPECT_EQ(out, "::error file=stages/flaky%2C1.Dockerfile,line=3,title=kiln%3A stage flaky "
                 "failed::fetch: connection reset by peer <&> \x1b[31mred\x1b[0m\n");
  // Without an analysis the stage's recorded failure is the message, and no line is known.
  ReportInput bare = failed_run();
  bare.analysis.reset();
  out = stage_annotations(bare, [](const std::string&) { return StageDockerfile{"f", nullptr}; });
  EXPECT_EQ(out, "::error file=f,title=kiln%3A stage flaky failed::failed exactly as attempt 1 "
                 "did (class 'registry-network'); a flake changes between attempts, this did "
                 "not\n");
}

TEST(MarkdownText, EscapesPunctuationAndFlattensLines) {
  EXPECT_EQ(markdown_text("a|b *c* `d` <e>\nf\tg"), "a\\|b \\*c\\* \\`d\\` \\<e\\> f g");
  EXPECT_EQ(markdown_text("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(markdown_text("abcdef", 3), "abc…");
}

TEST(StepSummary, TableCriticalPathAndGates) {
  ReportInput in = failed_run();
  in.history = json{{"regressions",
                     {{{"stage", "branch"},
                       {"lane", ""},
                       {"seconds", 3.198},
                       {"median_seconds", 1.5},
                       {"runs", 3},
                       {"kind", "full"}}}}};
  in.manifest["stages"][1]["gates"] = json::array({{{"gate", "image-env"},
                                                    {"subject", "image of stage branch"},
                                                    {"verdict", "pass"},
                                                    {"findings", json::array()}}});
  in.manifest["stages"][1]["cause"] = {{"kind", "step"}, {"summary", "RUN make | tee changed"}};
  std::string md = render_step_summary(in);
  EXPECT_NE(md.find("### kiln run 20261204\\-014906\\-08d2: failed\\:flaky\n"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| Stage | Lane | Result | Time | Cache | Cause |\n"), std::string::npos);
  EXPECT_NE(md.find("| base |  | reused | 0.5s | cached |  |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| branch |  | built | 3.2s | built | RUN make \\| tee changed |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| flaky |  | failed | 2.6s | - | failed exactly as attempt 1 did"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| after |  | skipped\\:flaky | 0.0s | - |  |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("**Critical path**: base → branch ("), std::string::npos) << md;
  EXPECT_NE(md.find("- branch: 3.2s against a median of 1.5s over 3 earlier full build(s), "
                    "2.13x\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- branch image\\-env gate on image of stage branch: **pass**\n"),
            std::string::npos)
      << md;
}

} // namespace
} // namespace kiln::testing
