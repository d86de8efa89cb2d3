// `kiln import bake` as a user runs it: a bake file imported, the chain it writes checked by
// `kiln run --dry-run`, and the three-target chain built for real with buildah.
#include <filesystem>

#include <gtest/gtest.h>

#include "kiln_harness.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

/// The bake fixture `name` copied into `dir`, beside the busybox it holds. The chain takes its
/// name from the folder, which is this test's own: so are its tags and its layer cache keys.
void copy_fixture(const ChainDir& dir, const std::string& name) {
  fs::copy(fs::path(KILN_TEST_FIXTURES) / "bake" / name, dir.path(),
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
}

TEST(ImportBake, ThreeTargetsBuildOnBuildah) {
  ChainDir dir;
  copy_fixture(dir, "three");
  KilnResult imported = dir.kiln({"import", "bake", "bake.json", "-o", "chain.toml"});
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_NE(imported.output.find("kiln: could not carry over: target app: tags "
                                 "registry.example/bake-app:latest"),
            std::string::npos)
      << imported.output;
  KilnResult dry = dir.kiln({"run", "chain.toml", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.output << dir.read("chain.toml");
  EXPECT_NE(dry.output.find("# [3/3] test"), std::string::npos) << dry.output;
  EXPECT_NE(dry.output.find("--build-context 'base=container-image://"), std::string::npos)
      << dry.output;
  KilnResult run = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(run.exit_code, 0) << run.output << dir.read("chain.toml");
}

TEST(ImportBake, MatrixPlatformsAndGroups) {
  ChainDir dir;
  copy_fixture(dir, "matrix");
  KilnResult all = dir.kiln({"import", "bake", "docker-bake.json", "-o", "all.toml"});
  ASSERT_EQ(all.exit_code, 0) << all.output;
  std::string chain = dir.read("all.toml");
  EXPECT_NE(chain.find("matrix = { flavor = [\"small\", \"full\"] }"), std::string::npos) << chain;
  for (const char* line :
       {"kiln: could not carry over: target runtime: output type=registry (kiln keeps the image in "
        "the engine's store; see docs/publish.md)",
        "target toolchain: ssh default", "target toolchain: args.UNUSED",
        "target runtime: context assets = docker-image://busybox:1.36",
        "target docs: dockerfile-inline", "target toolchain: cache-to type=gha,mode=max"}) {
    EXPECT_NE(all.output.find(line), std::string::npos) << line << "\n" << all.output;
  }
  // The matrix expands when the chain loads: both flavors in both lanes, the runtime in amd64.
  KilnResult plan = dir.kiln({"run", "all.toml", "--dry-run"}, nullptr, {{"API_TOKEN", "x"}});
  EXPECT_EQ(plan.exit_code, 0) << plan.output << chain;
  for (const char* stage : {"] amd64/lib-small\n", "] amd64/lib-full\n", "] arm64/lib-small\n",
                            "] arm64/lib-full\n", "] amd64/runtime\n", "/7] "}) {
    EXPECT_NE(plan.output.find(stage), std::string::npos) << stage << "\n" << plan.output;
  }
  EXPECT_NE(plan.output.find("--build-arg FLAVOR=full "), std::string::npos)
      << plan.output;
  // A group picks its targets and those they build on.
  KilnResult release =
      dir.kiln({"import", "bake", "docker-bake.json", "--group", "release", "-o", "release.toml"});
  ASSERT_EQ(release.exit_code, 0) << release.output;
  KilnResult dry =
      dir.kiln({"run", "release.toml", "--dry-run"}, nullptr, {{"API_TOKEN", "not-a-token"}});
  EXPECT_EQ(dry.exit_code, 0) << dry.output << dir.read("release.toml");
  EXPECT_NE(dry.output.find("arm64/toolchain"), std::string::npos) << dry.output;
  EXPECT_EQ(dry.output.find("arm64/runtime"), std::string::npos) << dry.output;
}

TEST(ImportBake, RefusesToOverwriteAndNamesWhereTheJsonIsWrong) {
  ChainDir dir;
  copy_fixture(dir, "three");
  ASSERT_EQ(dir.kiln({"import", "bake", "bake.json"}).exit_code, 0);
  std::string first = dir.read("chain.toml");
  KilnResult again = dir.kiln({"import", "bake", "bake.json"});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.output.find("chain.toml already exists"), std::string::npos) << again.output;
  EXPECT_EQ(dir.read("chain.toml"), first);

  KilnResult out = dir.kiln({"import", "bake", "bake.json", "-o", "-"});
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_NE(out.output.find("[[stage]]\nname = \"base\""), std::string::npos) << out.output;

  dir.write("bad.json", "{\n  \"target\": {\n    \"app\": {\"tags\": \"app:dev\"}\n  }\n}\n");
  KilnResult bad = dir.kiln({"import", "bake", "bad.json", "-o", "bad.toml"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("bad.json:3:21: error: 'target.app.tags' must be an array of "
                            "strings, not a string"),
            std::string::npos)
      << bad.output;
  EXPECT_FALSE(fs::exists(dir.path() / "bad.toml"));
  dir.write("broken.json", "{\"target\": {\n\"app\": {}\n");
  KilnResult broken = dir.kiln({"import", "bake", "broken.json", "-o", "-"});
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.output.find("broken.json:3:1: error: not valid JSON"), std::string::npos)
      << broken.output;
}

} // namespace
} // namespace kiln::testing
