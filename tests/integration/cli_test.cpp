// The kiln command line: diagnostics, dry runs, selection and overrides, as a user sees them.
#include <cstdlib>

#include <gtest/gtest.h>

#include "kiln_harness.h"
#include "util/sha256.h"

namespace kiln::testing {
namespace {

std::string fixture_chain(const std::string& name) {
  return std::string(KILN_TEST_FIXTURES) + "/chains/" + name + "/chain.toml";
}

TEST(Cli, ConfigErrorsNameFileLineColumnWithACaretAndExitTwo) {
  ChainDir dir;
  std::string chain = fixture_chain("unknown_keys");
  KilnResult result = dir.kiln({"run", chain});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find(chain + ":13:1: error: unknown key 'dockerfle' in [[stage]]\n"
                                       "  dockerfle = \"Dockerfile\"\n"
                                       "  ^\n"
                                       "  hint: did you mean 'dockerfile'?\n"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("nothing was built"), std::string::npos);
}

TEST(Cli, ABinaryNamedAsAChainFileIsRefusedWithoutTerminalControlsOrANulCut) {
  ChainDir dir;
  KilnResult result = dir.kiln({"run", "/bin/ls"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("/bin/ls:1:"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("hint: a chain file is UTF-8 text"), std::string::npos)
      << result.output;
  // The diagnostic goes on past the binary's NUL bytes to its end, and sends the terminal
  // nothing it would act on.
  EXPECT_NE(result.output.find("nothing was built"), std::string::npos) << result.output;
  for (char c : result.output) {
    unsigned char byte = static_cast<unsigned char>(c);
    EXPECT_TRUE(byte == '\n' || byte == '\t' || (byte >= 0x20 && byte != 0x7f))
        << "byte " << static_cast<int>(byte) << " in:\n"
        << result.output;
  }
}

TEST(Cli, JobsOutOfRangeNamesTheRange) {
  ChainDir dir;
  KilnResult result = dir.kiln({"run", fixture_chain("unknown_keys"), "--jobs", "0"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("not in range 1 to 4096"), std::string::npos) << result.output;
  EXPECT_LT(result.output.size(), 300u) << "the range printed in full: " << result.output;
}

TEST(Cli, DependencyCycleIsNamedInOrder) {
  ChainDir dir;
  std::string chain = fixture_chain("cycles");
  KilnResult result = dir.kiln({"run", chain, "--dry-run"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find(chain + ":17:18: error: dependency cycle: a -> b -> c -> a"),
            std::string::npos)
      << result.output;
}

TEST(Cli, MangledBuildArgKeyIsRefusedLoudly) {
  ChainDir dir;
  dir.write("Dockerfile", "FROM scratch\nARG FOO_BAR\n");
  dir.write("chain.toml", "[chain]\nname = \"t\"\n[[stage]]\nname = \"a\"\n"
                          "dockerfile = \"Dockerfile\"\nbuild_args = { \"FOO-BAR\" = \"1\" }\n");
  KilnResult result = dir.kiln({"run", "chain.toml", "--dry-run"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(
      result.output.find("chain.toml:6:16: error: build arg 'FOO-BAR' is not a valid ARG name"),
      std::string::npos)
      << result.output;
}

TEST(Cli, DryRunPrintsTheExactEngineCommandsWithOnlyDeclaredPins) {
  ChainDir dir;
  dir.copy_demo();
  std::string d = dir.path().string();
  KilnResult result = dir.kiln({"run", "chain.toml", "--dry-run"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::string common =
      "buildah build --isolation chroot --layers --force-rm --file " + d + "/stages/";
  // kiln-cc stands beside the kiln under test, so every stage is offered the kiln-tools context.
  std::string tools = "--build-context kiln-tools=" + d + "/records/tools ";
  // Every image is labelled with where it comes from and the pins it was built with, each
  // label set (empty when it has none) so none is inherited from a parent.
  auto labels = [](const std::string& stage, const std::string& pins = "") {
    return "--label dev.kiln.chain=hello --label dev.kiln.stage=" + stage +
           " --label dev.kiln.lane= --label dev.kiln.pins=" + pins + " ";
  };
  // Each stage is built under its work name: its tag with the records folder's key.
  const std::string k = ":latest-kiln-" + sha256_digest(d + "/records").substr(7, 8);
  EXPECT_EQ(result.output,
            "# [1/5] base\n" + common + "base.Dockerfile --tag localhost/hello-base" + k + " " +
                tools + "--build-arg BASE_RELEASE=2026.12 " +
                labels("base", "BASE_RELEASE=2026.12") + "-- " + d + "\n# [2/5] toolchain\n" +
                common + "toolchain.Dockerfile --tag localhost/hello-toolchain" + k +
                " --build-context "
                "'base=container-image://<base as built in this run>'" +
                " " + tools + "--build-arg TOOLCHAIN_VERSION=1.4.0 " +
                labels("toolchain", "TOOLCHAIN_VERSION=1.4.0") + "-- " + d + "\n# [3/5] libs\n" +
                common + "libs.Dockerfile --tag localhost/hello-libs" + k +
                " --build-context "
                "'toolchain=container-image://<toolchain as built in this run>'" +
                " " + tools + "--build-arg LIBGREET_VERSION=2.1.3 --build-arg LIB_FLAGS=-O2 " +
                labels("libs", "LIBGREET_VERSION=2.1.3") + "--secret id=kiln-budget,src=" + d +
                "/records/budget/libs.env " + "-- " + d + "\n# [4/5] final\n" + common +
                "final.Dockerfile --tag localhost/hello-final" + k +
                " --build-context "
                "'base=container-image://<base as built in this run>'" +
                " --build-context "
                "'libs=container-image://<libs as built in this run>'" +
                " " + tools + labels("final") + "-- " + d + "\n# [5/5] smoke\n" + common +
                // A smoke stage always runs its tests: never from the layer cache.
                "smoke.Dockerfile --tag localhost/hello-smoke" + k +
                " --no-cache --build-context "
                "'final=container-image://<final as built in this run>'" +
                " " + tools + labels("smoke") + "-- " + d + "\n");
  EXPECT_EQ(result.output.find("DOCS_THEME"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "records")) << "a dry run records nothing";
}

TEST(Cli, AHeredocMarkerInALabelDoesNotDropTheNextArgsPin) {
  // `<<EOF` in a LABEL value is text, not a heredoc: the ARG after it is declared, and the
  // versions file's pin for it reaches the engine.
  ChainDir dir;
  dir.write("Dockerfile", "FROM scratch\n"
                          "LABEL usage=\"pipe a script in with <<EOF\"\n"
                          "ARG VERSION\n"
                          "RUN [\"/bin/true\"]\n");
  dir.write("versions.env", "VERSION=1.2.3\n");
  dir.write("chain.toml", "[chain]\nname = \"label\"\nversions = \"versions.env\"\n"
                          "[[stage]]\nname = \"app\"\ndockerfile = \"Dockerfile\"\n");
  KilnResult result = dir.kiln({"run", "chain.toml", "--dry-run"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find(" --build-arg VERSION=1.2.3 "), std::string::npos) << result.output;
}

TEST(Cli, ADockerfileThatDoesNotParseStopsTheRunAtItsPosition) {
  ChainDir dir;
  dir.write("Dockerfile", "FROM scratch\nRUNN true\n");
  dir.write("chain.toml", "[chain]\nname = \"t\"\n[[stage]]\nname = \"a\"\n"
                          "dockerfile = \"Dockerfile\"\n");
  KilnResult result = dir.kiln({"run", "chain.toml", "--dry-run"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find((dir.path() / "Dockerfile").string() +
                               ":2:1: error: the Dockerfile does not parse: unknown "
                               "instruction: RUNN\n  RUNN true\n  ^\n"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("nothing was built"), std::string::npos) << result.output;
}

TEST(Cli, SubstitutionsNestedTooDeepStopTheRunInsteadOfCrashingIt) {
  // 25,000 nested `${A:-` overflowed the stack of the expander the run's stage scopes use.
  ChainDir dir;
  std::string value;
  for (int i = 0; i < 25'000; ++i) {
    value += "${A:-";
  }
  value += "x" + std::string(25'000, '}');
  dir.write("Dockerfile", "FROM scratch\nENV A=" + value + "\n");
  dir.write("chain.toml", "[chain]\nname = \"t\"\n[[stage]]\nname = \"a\"\n"
                          "dockerfile = \"Dockerfile\"\n");
  KilnResult result = dir.kiln({"run", "chain.toml", "--dry-run"});
  EXPECT_EQ(result.exit_code, 2) << result.output.substr(0, 2000);
  EXPECT_NE(result.output.find("Dockerfile:2:327: error: the Dockerfile does not parse: variable "
                               "substitutions nest deeper than 64 levels"),
            std::string::npos)
      << result.output.substr(0, 2000);
}

TEST(Cli, CommandLineBuildArgOverridesThePin) {
  ChainDir dir;
  dir.copy_demo();
  KilnResult result =
      dir.kiln({"run", "chain.toml", "--dry-run", "--only", "toolchain,libs", "--build-arg",
                "TOOLCHAIN_VERSION=9.9", "--build-arg", "LIB_FLAGS=-O3 -g"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("--build-arg TOOLCHAIN_VERSION=9.9 "), std::string::npos);
  EXPECT_NE(result.output.find("--build-arg 'LIB_FLAGS=-O3 -g' "), std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("TOOLCHAIN_VERSION=1.4.0"), std::string::npos);
  EXPECT_EQ(result.output.find("LIB_FLAGS=-O2"), std::string::npos);
}

TEST(Cli, BuildArgNoSelectedStageDeclaresIsRefused) {
  ChainDir dir;
  dir.copy_demo();
  KilnResult result =
      dir.kiln({"run", "chain.toml", "--dry-run", "--only", "base", "--build-arg", "LIB_FLAGS=1"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--build-arg LIB_FLAGS: no selected stage's Dockerfile declares "
                               "ARG LIB_FLAGS"),
            std::string::npos)
      << result.output;
  result = dir.kiln({"run", "chain.toml", "--dry-run", "--build-arg", "NOEQUALS"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--build-arg NOEQUALS: expected KEY=VALUE"), std::string::npos);
}

TEST(Cli, OnlyAndFromSelectInRunOrder) {
  ChainDir dir;
  dir.copy_demo();
  KilnResult only = dir.kiln({"run", "chain.toml", "--dry-run", "--only", "final,libs"});
  ASSERT_EQ(only.exit_code, 0) << only.output;
  EXPECT_NE(only.output.find("# [1/2] libs\n"), std::string::npos) << only.output;
  EXPECT_NE(only.output.find("# [2/2] final\n"), std::string::npos);
  KilnResult from = dir.kiln({"run", "chain.toml", "--dry-run", "--from", "final"});
  ASSERT_EQ(from.exit_code, 0) << from.output;
  EXPECT_NE(from.output.find("# [1/2] final\n"), std::string::npos) << from.output;
  EXPECT_NE(from.output.find("# [2/2] smoke\n"), std::string::npos);
  KilnResult unknown = dir.kiln({"run", "chain.toml", "--dry-run", "--only", "smok"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("unknown stage 'smok' in --only (did you mean 'smoke'?)"),
            std::string::npos)
      << unknown.output;
}

TEST(Cli, NeedThatIsNeitherBuiltNorInTheStoreStopsTheRunBeforeItStarts) {
  ChainDir dir;
  dir.write("base.Dockerfile", k_base_dockerfile);
  dir.write("work.Dockerfile", "FROM base\nRUN true\n");
  dir.write("chain.toml", "[chain]\nname = \"t" + dir.nonce() +
                              "\"\n[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n"
                              "[[stage]]\nname = \"work\"\ndockerfile = \"work.Dockerfile\"\n"
                              "needs = [\"base\"]\n");
  KilnResult result = dir.kiln({"run", "chain.toml", "--only", "work"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("stage 'work' needs 'base', which this run does not build, and "
                               "buildah has no image of it from an earlier run (localhost/t" +
                               dir.nonce() + "-base:latest-kiln-"),
            std::string::npos)
      << result.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "records"));

  // BuildKit looks for the need's layout and digest from an earlier run instead.
  KilnResult buildkit =
      dir.kiln({"run", "chain.toml", "--only", "work", "--engine", "buildkit"}, nullptr,
               {{"PATH", std::string(KILN_FAKE_BUILDCTL_DIR) + ":" + std::getenv("PATH")}});
  EXPECT_EQ(buildkit.exit_code, 2);
  EXPECT_NE(buildkit.output.find("and buildkit has no image of it from an earlier run (" +
                                 (dir.path() / "records/oci/base.metadata.json").string() + ")"),
            std::string::npos)
      << buildkit.output;
}

TEST(Cli, UsageErrorsExitTwo) {
  ChainDir dir;
  EXPECT_EQ(dir.kiln({}).exit_code, 2);
  EXPECT_EQ(dir.kiln({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(dir.kiln({"run"}).exit_code, 2);
  KilnResult missing = dir.kiln({"run", "no-such-chain.toml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("no-such-chain.toml"), std::string::npos) << missing.output;
}

TEST(Cli, ResourcesSummarizeRefusesANumberNoSamplerWrites) {
  ChainDir dir;
  dir.write("resources.csv", "time,phase,cpu_pct,free_ram_gb,committed_gb,free_disk_gb\n"
                             "2026-12-02T16:59:29Z,base,50.0,22.9,0.1,75.0\n"
                             "2026-12-02T16:59:49Z,base,50.0,22.9,0.1,1e308\n");
  KilnResult result = dir.kiln({"resources", "summarize", "resources.csv"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("resources.csv:3: free_disk_gb `1e308` is not a number from 0 to "
                               "1000000000"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("correct the line or delete it"), std::string::npos)
      << result.output;
}

/// Every command that reads a run finds it the same way: `--chain FILE` names the records
/// folder (the chain's `[chain] records`), the run is `latest` unless named.
TEST(Cli, EveryCommandThatReadsARunFindsItsRecordsThroughTheChain) {
  ChainDir dir;
  dir.copy_demo_for_replay();
  std::string chain = dir.read("chain.toml");
  chain.replace(chain.find("records = \"records\""), 19, "records = \"kept-records\"");
  dir.write("chain.toml", chain);
  FakeBuildkit fake(dir);
  KilnResult run = dir.kiln({"run", "--engine", "buildkit", "--only", "base", "chain.toml"},
                            nullptr, fake.env());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string id =
      nlohmann::json::parse(dir.read("kept-records/latest/manifest.json")).value("run_id", "");
  ASSERT_FALSE(id.empty());

  // Without --chain nothing says where the records are: ./records has none.
  KilnResult lost = dir.kiln({"report"});
  EXPECT_EQ(lost.exit_code, 2) << lost.output;
  EXPECT_NE(lost.output.find("--chain FILE"), std::string::npos) << lost.output;

  KilnResult report = dir.kiln({"report", "--chain", "chain.toml", "-o", "page.html"});
  EXPECT_EQ(report.exit_code, 0) << report.output;
  EXPECT_NE(dir.read("page.html").find(id), std::string::npos);
  KilnResult logs = dir.kiln({"logs", "analyze", "--chain", "chain.toml", "--format", "json"});
  EXPECT_EQ(logs.exit_code, 0) << logs.output;
  EXPECT_EQ(nlohmann::json::parse(logs.output, nullptr, false).value("run_id", ""), id)
      << logs.output;
  KilnResult explain = dir.kiln({"explain", id, "--chain", "chain.toml", "--format", "json"});
  EXPECT_EQ(explain.exit_code, 0) << explain.output;
  KilnResult trace = dir.kiln({"trace", "latest", "--chain", "chain.toml", "-o", "trace.json"});
  EXPECT_EQ(trace.exit_code, 0) << trace.output;
  EXPECT_NE(trace.output.find("of run " + id), std::string::npos) << trace.output;
  KilnResult replay = dir.kiln({"records", "replay", "--chain", "chain.toml", "--check"});
  EXPECT_EQ(replay.exit_code, 0) << replay.output;
  KilnResult resources = dir.kiln({"resources", "summarize", "--chain", "chain.toml"});
  EXPECT_EQ(resources.exit_code, 0) << resources.output;
  // --records names the same folder; a run folder needs neither.
  EXPECT_EQ(dir.kiln({"trace", id, "--records", "kept-records", "-o", "t2.json"}).exit_code, 0);
  EXPECT_EQ(dir.kiln({"records", "replay", "kept-records/runs/" + id, "--check"}).exit_code, 0);
}

TEST(Cli, HelpGroupsTheCommandsByWhatTheyAreFor) {
  ChainDir dir;
  KilnResult help = dir.kiln({"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.output;
  size_t last = 0;
  for (const char* heading :
       {"\nStart a chain:\n  init", "\nBuild:\n  run", "\nInspect a run:\n  report",
        "\nRecords:\n  records", "\nImages and gates:\n  gate", "\nCache and disk:\n  cache"}) {
    size_t at = help.output.find(heading);
    ASSERT_NE(at, std::string::npos) << heading << "\n" << help.output;
    EXPECT_GT(at, last) << heading << " is out of order\n" << help.output;
    last = at;
  }
}

TEST(Cli, AMistypedCommandOrOptionNamesTheClosestOne) {
  ChainDir dir;
  KilnResult command = dir.kiln({"reprot"});
  EXPECT_EQ(command.exit_code, 2);
  EXPECT_EQ(command.output, "kiln: 'reprot' is not a kiln command; did you mean 'report'?\n");
  KilnResult sub = dir.kiln({"records", "prnue", "--keep", "1"});
  EXPECT_EQ(sub.exit_code, 2);
  EXPECT_EQ(sub.output, "kiln: 'prnue' is not a kiln records command; did you mean 'prune'?\n");
  KilnResult option = dir.kiln({"report", "--chian", "chain.toml"});
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_EQ(option.output,
            "kiln: '--chian' is not an option of kiln report; did you mean '--chain'?\n");
  KilnResult far = dir.kiln({"frobnicate"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_NE(far.output.find(
                "kiln: 'frobnicate' is not a kiln command; its commands: init, import, run, lint"),
            std::string::npos)
      << far.output;
}

} // namespace
} // namespace kiln::testing
