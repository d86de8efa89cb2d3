// `kiln lint` as a user runs it: findings with their position and a caret, exit codes, formats.
#include <gtest/gtest.h>

#include "kiln_harness.h"

namespace kiln::testing {
namespace {

std::string lint_fixture(const std::string& name) {
  return std::string(KILN_TEST_FIXTURES) + "/lint/" + name;
}

TEST(LintCli, TheDemoChainIsCleanAndABadFileNamesEachFinding) {
  ChainDir dir;
  std::string stages = std::string(KILN_SOURCE_DIR) + "/examples/hello/stages/";
  KilnResult clean = dir.kiln({"lint", stages + "base.Dockerfile", stages + "toolchain.Dockerfile",
                               stages + "libs.Dockerfile", stages + "final.Dockerfile",
                               stages + "smoke.Dockerfile"});
  EXPECT_EQ(clean.exit_code, 0) << clean.output;
  KilnResult chain =
      dir.kiln({"lint", "--chain", std::string(KILN_SOURCE_DIR) + "/examples/hello/chain.toml"});
  EXPECT_EQ(chain.exit_code, 0) << chain.output;

  std::string bad = lint_fixture("leak-env-name-bad.Dockerfile");
  KilnResult found = dir.kiln({"lint", bad});
  EXPECT_EQ(found.exit_code, 1);
  EXPECT_NE(found.output.find(bad + ":2:5: leak-env-name: SCCACHE_WEBDAV_ENDPOINT"),
            std::string::npos)
      << found.output;
  EXPECT_NE(found.output.find("\n      ^\n"), std::string::npos) << found.output;

  KilnResult sarif = dir.kiln({"lint", "--format", "sarif", bad});
  EXPECT_EQ(sarif.exit_code, 1);
  auto doc = nlohmann::json::parse(sarif.output);
  EXPECT_EQ(doc["version"], "2.1.0");
  EXPECT_EQ(doc["runs"][0]["results"][0]["ruleId"], "leak-env-name");
  EXPECT_EQ(doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"],
            2);

  KilnResult json = dir.kiln({"lint", "--format", "json", bad});
  EXPECT_EQ(nlohmann::json::parse(json.output)[0]["rule"], "leak-env-name");

  // A chain's own build-host names.
  dir.write("mine.Dockerfile", "FROM scratch\nENV MYCORP_CACHE_URL=https://cache.example\n");
  EXPECT_EQ(dir.kiln({"lint", "mine.Dockerfile"}).exit_code, 0);
  EXPECT_EQ(dir.kiln({"lint", "mine.Dockerfile", "--name", "MYCORP_CACHE_*"}).exit_code, 1);
  // Each repeatable option takes one value: the files after it are still files.
  KilnResult before = dir.kiln({"lint", "--name", "MYCORP_CACHE_*", "--per-file-dir", "scripts",
                                "--cache-target", "/cache", "mine.Dockerfile"});
  EXPECT_EQ(before.exit_code, 1) << before.output;
  EXPECT_NE(before.output.find("mine.Dockerfile:2:5: leak-env-name"), std::string::npos)
      << before.output;
}

TEST(LintCli, BuildKitsWarningsAreReportedButOnlyErrorsStopARun) {
  ChainDir dir;
  dir.write("style.Dockerfile", "FROM alpine as build\nCMD run\n");
  KilnResult all = dir.kiln({"lint", "style.Dockerfile"});
  EXPECT_EQ(all.exit_code, 1) << all.output;
  EXPECT_NE(all.output.find("style.Dockerfile:1:13: from-as-casing: 'as' and 'FROM' keywords' "
                            "casing do not match"),
            std::string::npos)
      << all.output;
  KilnResult errors = dir.kiln({"lint", "--errors-only", "style.Dockerfile"});
  EXPECT_EQ(errors.exit_code, 0) << errors.output;

  KilnResult github = dir.kiln({"lint", "--format", "github", "style.Dockerfile"});
  EXPECT_EQ(github.exit_code, 1);
  EXPECT_EQ(github.output,
            "::warning file=style.Dockerfile,line=1,col=13,title=from-as-casing::'as' and 'FROM' "
            "keywords' casing do not match\n"
            "::warning file=style.Dockerfile,line=2,col=1,title=json-args-recommended::JSON "
            "arguments recommended for CMD to prevent unintended behavior related to OS signals\n");

  KilnResult buildkit = dir.kiln({"lint", "--format", "buildkit-json", "style.Dockerfile"});
  EXPECT_EQ(buildkit.exit_code, 1);
  auto doc = nlohmann::json::parse(buildkit.output);
  EXPECT_EQ(doc["warnings"][0]["ruleName"], "FromAsCasing");
  EXPECT_EQ(doc["warnings"][1]["url"],
            "https://docs.docker.com/go/dockerfile/rule/json-args-recommended/");
  EXPECT_EQ(doc["sources"][0]["filename"], "style.Dockerfile");

  // The build context's .dockerignore: a COPY of what it excludes fails the build, so it is an
  // error even with --errors-only.
  dir.write("ctx/.dockerignore", "build/\n");
  dir.write("app.Dockerfile", "FROM alpine\nCOPY build/app /app\n");
  EXPECT_EQ(dir.kiln({"lint", "--errors-only", "app.Dockerfile"}).exit_code, 0);
  KilnResult ignored = dir.kiln({"lint", "--errors-only", "--context", "ctx", "app.Dockerfile"});
  EXPECT_EQ(ignored.exit_code, 1);
  EXPECT_NE(ignored.output.find("app.Dockerfile:2:6: copy-ignored-file: Attempting to Copy file "
                                "\"build/app\" that is excluded by .dockerignore"),
            std::string::npos)
      << ignored.output;
}

TEST(LintCli, AParseErrorOrAMissingFileIsExitTwo) {
  ChainDir dir;
  dir.write("broken.Dockerfile", "FROM scratch\nFOO bar\n");
  KilnResult broken = dir.kiln({"lint", "broken.Dockerfile"});
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.output.find("broken.Dockerfile:2:1: parse-error: unknown instruction: FOO"),
            std::string::npos)
      << broken.output;
  KilnResult missing = dir.kiln({"lint", "nowhere.Dockerfile"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("cannot read nowhere.Dockerfile"), std::string::npos)
      << missing.output;
}

TEST(LintCli, SarifOfBytesThatAreNotUtf8IsValidJson) {
  // One 0x81 byte used to abort `--format sarif` (exit 134) in nlohmann's strict dump.
  ChainDir dir;
  dir.write("odd.Dockerfile", "FROM scratch\n\x81\n");
  KilnResult sarif = dir.kiln({"lint", "--format", "sarif", "odd.Dockerfile"});
  EXPECT_EQ(sarif.exit_code, 2) << sarif.output;
  auto doc = nlohmann::json::parse(sarif.output, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << sarif.output;
  const auto& result = doc["runs"][0]["results"][0];
  EXPECT_EQ(result["ruleId"], "parse-error");
  EXPECT_EQ(result["message"]["text"], "unknown instruction: \xEF\xBF\xBD");
  // The terminal is shown the byte, not sent it.
  KilnResult tty = dir.kiln({"lint", "odd.Dockerfile"});
  EXPECT_EQ(tty.exit_code, 2);
  EXPECT_NE(tty.output.find("odd.Dockerfile:2:1: parse-error: unknown instruction: \\x81\n"
                            "  \\x81\n  ^\n"),
            std::string::npos)
      << tty.output;
}

TEST(LintCli, SubstitutionsNestedTooDeepAreAParseErrorNotACrash) {
  ChainDir dir;
  std::string value;
  for (int i = 0; i < 25'000; ++i) {
    value += "${A:-";
  }
  value += "x" + std::string(25'000, '}');
  dir.write("deep.Dockerfile", "FROM scratch\nENV A=" + value + "\n");
  KilnResult result = dir.kiln({"lint", "deep.Dockerfile"});
  EXPECT_EQ(result.exit_code, 2) << result.output.substr(0, 2000);
  EXPECT_NE(result.output.find("deep.Dockerfile:2:327: parse-error: variable substitutions nest "
                               "deeper than 64 levels"),
            std::string::npos)
      << result.output.substr(0, 2000);
}

} // namespace
} // namespace kiln::testing
