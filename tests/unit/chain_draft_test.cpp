// kiln init's draft: which files make which stages, their order, contexts, targets and pins.
#include "init/chain_draft.h"

#include <gtest/gtest.h>

#include "chain/chain_loader.h"
#include "temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> names(const ChainDraft& draft) {
  std::vector<std::string> out;
  for (const auto& stage : draft.stages) {
    out.push_back(stage.name);
  }
  return out;
}

const DraftStage& stage(const ChainDraft& draft, const std::string& name) {
  for (const auto& each : draft.stages) {
    if (each.name == name) {
      return each;
    }
  }
  ADD_FAILURE() << "no stage " << name;
  return draft.stages.front();
}

TEST(ChainDraft, EachKindOfFileNameMakesAStageAfterWhatItNames) {
  testing::TempDir dir;
  // Named in reverse of the order they build in: the draft follows the references.
  dir.write("a-app.Dockerfile", "FROM z-base\nARG APP_VERSION=2.0\nARG FLAGS\nCOPY x /x\n");
  dir.write("Dockerfile.z-base",
            "FROM scratch\nARG BASE_RELEASE=\"2026.12\"\nARG BASE_TAG=v${BASE_RELEASE}\n");
  dir.write("service/Dockerfile", "FROM a-app\nARG APP_VERSION\n");
  dir.write("checks/smoke.Dockerfile", "FROM service\nRUN true\n");
  dir.write(".git/Dockerfile", "FROM scratch\n");
  dir.write("records/runs/Dockerfile", "FROM scratch\n");
  auto draft = draft_chain(dir.path(), {});
  ASSERT_TRUE(draft) << draft.error();
  EXPECT_EQ(names(*draft), (std::vector<std::string>{"z-base", "a-app", "service", "smoke"}));
  // A plain Dockerfile is named by its folder and builds in it; the others build in the chain's.
  EXPECT_EQ(stage(*draft, "service").context, fs::path("service"));
  EXPECT_EQ(stage(*draft, "a-app").context, fs::path());
  EXPECT_EQ(stage(*draft, "service").needs, std::vector<std::string>{"a-app"});
  EXPECT_TRUE(stage(*draft, "smoke").smoke);
  EXPECT_FALSE(stage(*draft, "service").smoke);
  // Version-like ARGs are pins with their defaults (quotes dropped), once however often declared;
  // another ARG with no default is the stage's to set.
  ASSERT_EQ(draft->pins.size(), 3u);
  EXPECT_EQ(draft->pins[0].name, "BASE_RELEASE");
  EXPECT_EQ(draft->pins[0].value, "2026.12");
  EXPECT_EQ(draft->pins[0].declared, "Dockerfile.z-base:2");
  // A default is read as the build reads it: words processed, earlier ARGs expanded.
  EXPECT_EQ(draft->pins[1].name, "BASE_TAG");
  EXPECT_EQ(draft->pins[1].value, "v2026.12");
  EXPECT_EQ(draft->pins[2].name, "APP_VERSION");
  EXPECT_EQ(draft->pins[2].value, "2.0");
  EXPECT_EQ(stage(*draft, "a-app").unset_args, std::vector<std::string>{"FLAGS"});

  // What it writes loads, with the needs it ordered the stages by.
  dir.write("x", "x");
  dir.write("chain.toml", render_chain(*draft));
  dir.write("versions.env", render_versions(*draft));
  auto chain = load_chain(dir.path() / "chain.toml");
  ASSERT_TRUE(chain);
  EXPECT_EQ(chain->find_stage("smoke")->needs, std::vector<std::string>{"service"});
  EXPECT_EQ(chain->find_stage("smoke")->kind, StageKind::smoke);
}

TEST(ChainDraft, PerTargetMakesAStageOfEachNamedStage) {
  testing::TempDir dir;
  dir.write("Dockerfile", "FROM scratch AS build\nFROM build AS Runtime\nFROM runtime AS test\n");
  auto whole = draft_chain(dir.path(), {});
  ASSERT_TRUE(whole) << whole.error();
  EXPECT_EQ(whole->stages.size(), 1u);
  EXPECT_EQ(whole->stages[0].target, "");
  auto split = draft_chain(dir.path(), {true});
  ASSERT_TRUE(split) << split.error();
  EXPECT_EQ(names(*split), (std::vector<std::string>{"build", "runtime", "test"}));
  EXPECT_EQ(stage(*split, "runtime").target, "runtime");
  EXPECT_TRUE(stage(*split, "test").smoke);
}

TEST(ChainDraft, AKeptVersionsFilePinsAndNothingIsDrafted) {
  testing::TempDir dir;
  dir.write("base.Dockerfile", "FROM scratch\nARG BASE_RELEASE=1\nARG TOOL_VERSION\n");
  dir.write("versions.env", "BASE_RELEASE=7\n");
  auto draft = draft_chain(dir.path(), {});
  ASSERT_TRUE(draft) << draft.error();
  EXPECT_TRUE(draft->versions_kept);
  EXPECT_TRUE(draft->pins.empty());
  EXPECT_EQ(draft->stages[0].unset_args, std::vector<std::string>{"TOOL_VERSION"});
  EXPECT_NE(render_chain(*draft).find("versions = \"versions.env\""), std::string::npos);
}

TEST(ChainDraft, AFolderWithoutDockerfilesOrOneThatDoesNotParseIsAnError) {
  testing::TempDir dir;
  auto none = draft_chain(dir.path(), {});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("no Dockerfile under"), std::string::npos) << none.error();
  dir.write("bad.Dockerfile", "FROM scratch\nRUN <<EOF\n");
  auto bad = draft_chain(dir.path(), {});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("bad.Dockerfile:"), std::string::npos) << bad.error();
}

} // namespace
} // namespace kiln
