// What kiln gives a CI server, against real buildah: `kiln report --format junit` validated
// with xmllint against tests/fixtures/junit/junit.xsd, and on GitHub Actions the step summary
// and the workflow-command annotations of `kiln run` and `kiln lint`. One run serves the
// suite: a base, a smoke stage that passes, a stage that fails with a compiler's error line
// and a stage that needs it (skipped).
#include <gtest/gtest.h>

#include "kiln_harness.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

const char* k_error_line = "lib.c:3:1: error: expected ; before }";

class CiOutputs : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    s_dir = new ChainDir();
    const ChainDir& dir = *s_dir;
    dir.write("base.Dockerfile", k_base_dockerfile);
    dir.write("smoke.Dockerfile", "FROM base\nRUN printf '3 passed, 0 failed, 1 skipped\\n'\n");
    dir.write("broken.Dockerfile",
              "FROM base\nRUN true\nRUN echo '" + std::string(k_error_line) + "' >&2; exit 1\n");
    dir.write("after.Dockerfile", "FROM broken\nRUN true\n");
    dir.write("chain.toml", "[chain]\nname = \"ci" + dir.nonce() +
                                "\"\n[defaults]\ncooldown_s = 0\nattempts = 1\n"
                                "[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n"
                                "[[stage]]\nname = \"smoke\"\ndockerfile = \"smoke.Dockerfile\"\n"
                                "needs = [\"base\"]\nkind = \"smoke\"\nmax_skipped = 1\n"
                                "[[stage]]\nname = \"broken\"\ndockerfile = \"broken.Dockerfile\"\n"
                                "needs = [\"base\"]\n"
                                "[[stage]]\nname = \"after\"\ndockerfile = \"after.Dockerfile\"\n"
                                "needs = [\"broken\"]\n");
    dir.write("summary.md", "## an earlier step's summary\n");
    s_run = dir.kiln({"run", "chain.toml", "--progress", "plain"}, nullptr,
                     {{"GITHUB_ACTIONS", "true"},
                      {"GITHUB_STEP_SUMMARY", (dir.path() / "summary.md").string()}});
  }
  static void TearDownTestSuite() {
    delete s_dir;
    s_dir = nullptr;
  }

  static inline ChainDir* s_dir = nullptr;
  static inline KilnResult s_run;
};

TEST_F(CiOutputs, TheRunFailedAsTheChainSays) {
  EXPECT_EQ(s_run.exit_code, 1) << s_run.output;
  json manifest = s_dir->latest_manifest();
  EXPECT_EQ(manifest["status"], "failed:broken") << s_run.output;
}

TEST_F(CiOutputs, JUnitValidatesAndCarriesTheRealErrorTheLogAndTheSmokeCounts) {
  const ChainDir& dir = *s_dir;
  KilnResult report = dir.kiln({"report", "latest", "--format", "junit", "-o", "junit.xml"});
  ASSERT_EQ(report.exit_code, 0) << report.output;
  std::string xsd = std::string(KILN_TEST_FIXTURES) + "/junit/junit.xsd";
  CapturedRun lint =
      run_captured({"xmllint", "--noout", "--schema", xsd, (dir.path() / "junit.xml").string()});
  EXPECT_TRUE(lint.exit.ok()) << lint.output;

  std::string xml = dir.read("junit.xml");
  std::string run_id = dir.latest_manifest()["run_id"];
  auto broken = xml.find("<testcase name=\"broken\"");
  ASSERT_NE(broken, std::string::npos) << xml;
  auto failure = xml.find("<failure message=", broken);
  ASSERT_NE(failure, std::string::npos) << xml;
  std::string text = xml.substr(failure, xml.find("</failure>", failure) - failure);
  EXPECT_NE(text.find(k_error_line), std::string::npos) << text;
  EXPECT_NE(
      text.find("log: " +
                (std::filesystem::canonical(dir.path()) / "records" / "runs" / run_id).string() +
                "/stages/broken.attempt-1.log"),
      std::string::npos)
      << text;
  auto after = xml.find("<testcase name=\"after\"");
  ASSERT_NE(after, std::string::npos) << xml;
  EXPECT_NE(
      xml.find("<skipped message=\"not built: it needs broken, which ended failed\"/>", after),
      std::string::npos)
      << xml;
  auto smoke = xml.find("<testcase name=\"smoke\"");
  ASSERT_NE(smoke, std::string::npos) << xml;
  for (const char* property : {"<property name=\"smoke.passed\" value=\"3\"/>",
                               "<property name=\"smoke.failed\" value=\"0\"/>",
                               "<property name=\"smoke.skipped\" value=\"1\"/>"}) {
    EXPECT_NE(xml.find(property, smoke), std::string::npos) << property << "\n" << xml;
  }
  EXPECT_EQ(xml.find("<failure", smoke), failure) << "the smoke stage passed";
}

TEST_F(CiOutputs, StepSummaryIsAppendedWithTheTableThePathAndTheGates) {
  std::string md = s_dir->read("summary.md");
  EXPECT_TRUE(md.starts_with("## an earlier step's summary\n### kiln run ")) << md;
  EXPECT_NE(md.find(": failed\\:broken\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| Stage | Lane | Result | Time | Cache | Cause |"), std::string::npos) << md;
  EXPECT_NE(md.find("| broken |  | failed | "), std::string::npos) << md;
  EXPECT_NE(md.find("| after |  | skipped\\:broken | 0.0s | - |"), std::string::npos) << md;
  EXPECT_NE(md.find("| smoke |  | built | "), std::string::npos) << md;
  EXPECT_NE(md.find("**Critical path**: base → "), std::string::npos) << md;
  EXPECT_NE(md.find("- smoke smoke floors: **pass**: 3 passed, 0 failed, 1 skipped (min_passed 1, "
                    "max_skipped 1)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- after not run (the stage was skipped)"), std::string::npos) << md;
}

TEST_F(CiOutputs, AFailedStageIsAnErrorAnnotationOnItsDockerfileAtTheFailingLine) {
  std::string expected =
      "broken.Dockerfile,line=3,title=kiln%3A stage broken failed::" + std::string(k_error_line) +
      "\n";
  auto at = s_run.output.find(expected);
  ASSERT_NE(at, std::string::npos) << s_run.output;
  EXPECT_EQ(s_run.output.rfind("::error file=", at), s_run.output.rfind('\n', at) + 1)
      << s_run.output;
}

TEST(CiOutputsLint, LintFindingsAreAnnotationsOnGitHubActions) {
  ChainDir dir;
  dir.write("base.Dockerfile", k_base_dockerfile);
  dir.write("work.Dockerfile", "FROM base\nENV SCCACHE_BUCKET=team-cache\nrun true\n");
  dir.write("chain.toml", "[chain]\nname = \"cl" + dir.nonce() +
                              "\"\n[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n"
                              "[[stage]]\nname = \"work\"\ndockerfile = \"work.Dockerfile\"\n"
                              "needs = [\"base\"]\n");
  const std::vector<std::pair<std::string, std::string>> github = {{"GITHUB_ACTIONS", "true"}};

  // The run's lint preflight refuses it; its finding is an annotation too.
  KilnResult run = dir.kiln({"run", "chain.toml"}, nullptr, github);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("work.Dockerfile,line=2,col=5,title=leak-env-name::"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("::error file="), std::string::npos) << run.output;

  // kiln lint: the tty text, then each finding as a command, warnings as ::warning.
  KilnResult lint = dir.kiln({"lint", "work.Dockerfile"}, nullptr, github);
  EXPECT_EQ(lint.exit_code, 1) << lint.output;
  EXPECT_NE(lint.output.find("work.Dockerfile:2:5: leak-env-name"), std::string::npos)
      << lint.output;
  EXPECT_NE(lint.output.find("::error file=work.Dockerfile,line=2,col=5,title=leak-env-name::"),
            std::string::npos)
      << lint.output;
  EXPECT_NE(lint.output.find("::warning file=work.Dockerfile,line=3,"), std::string::npos)
      << lint.output;

  // Off GitHub Actions nothing changes.
  KilnResult plain = dir.kiln({"lint", "work.Dockerfile"});
  EXPECT_EQ(plain.output.find("::error"), std::string::npos) << plain.output;
}

} // namespace
} // namespace kiln::testing
