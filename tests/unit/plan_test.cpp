#include "chain/plan.h"

#include <memory>

#include <gtest/gtest.h>

#include "dockerfile/source.h"

namespace kiln {
namespace {

using Names = std::vector<std::string>;

Stage stage(std::string name, Names needs = {}) {
  Stage stage;
  stage.name = std::move(name);
  stage.needs = std::move(needs);
  return stage;
}

Chain chain_of(std::vector<Stage> stages) {
  Chain chain;
  chain.name = "test";
  chain.stages = std::move(stages);
  return chain;
}

Names names(const std::vector<const Stage*>& stages) {
  Names out;
  for (const Stage* stage : stages) {
    out.push_back(stage->name);
  }
  return out;
}

TEST(RunOrder, FileOrderWithoutNeeds) {
  Chain chain = chain_of({stage("a"), stage("b"), stage("c")});
  EXPECT_EQ(names(run_order(chain)), (Names{"a", "b", "c"}));
}

TEST(RunOrder, DependencyDeclaredLaterRunsFirst) {
  Chain chain = chain_of({stage("app", {"lib"}), stage("lib"), stage("tool")});
  EXPECT_EQ(names(run_order(chain)), (Names{"lib", "app", "tool"}));
}

TEST(RunOrder, TakesTheFirstReadyStageEachTime) {
  Chain chain = chain_of(
      {stage("d", {"b", "c"}), stage("c", {"a"}), stage("b", {"a"}), stage("a"), stage("e")});
  EXPECT_EQ(names(run_order(chain)), (Names{"a", "c", "b", "d", "e"}));
}

TEST(OneStagePerDockerfile, EachFileOnceAsItsFirstStageInStageOrder) {
  auto app = std::make_shared<const DockerfileSource>();
  auto base = std::make_shared<const DockerfileSource>();
  std::vector<Stage> stages = {stage("build"), stage("test"), stage("base")};
  stages[0].dockerfile_source = app;
  stages[1].dockerfile_source = app; // another target of the same file
  stages[2].dockerfile_source = base;
  Chain chain = chain_of(std::move(stages));
  std::vector<const Stage*> order = {&chain.stages[2], &chain.stages[0], &chain.stages[1]};
  EXPECT_EQ(one_stage_per_dockerfile(order),
            (std::vector<const Stage*>{&chain.stages[2], &chain.stages[0]}));
}

TEST(RunOrder, PointsIntoTheChain) {
  Chain chain = chain_of({stage("a")});
  ASSERT_EQ(run_order(chain).size(), 1u);
  EXPECT_EQ(run_order(chain)[0], &chain.stages[0]);
}

Selection only(Names names) {
  Selection selection;
  selection.only = std::move(names);
  return selection;
}

Selection from(std::string name) {
  Selection selection;
  selection.from = std::move(name);
  return selection;
}

class SelectStages : public testing::Test {
protected:
  Chain m_chain = chain_of({stage("app", {"lib"}), stage("lib"), stage("tool")});
};

TEST_F(SelectStages, NothingSelectedMeansEveryStageInRunOrder) {
  auto selected = select_stages(m_chain, {});
  ASSERT_TRUE(selected) << selected.error();
  EXPECT_EQ(names(*selected), (Names{"lib", "app", "tool"}));
}

TEST_F(SelectStages, OnlyKeepsRunOrder) {
  auto selected = select_stages(m_chain, only({"tool", "app"}));
  ASSERT_TRUE(selected) << selected.error();
  EXPECT_EQ(names(*selected), (Names{"app", "tool"}));
}

TEST_F(SelectStages, FromTakesTheRestOfTheRunOrder) {
  auto selected = select_stages(m_chain, from("app"));
  ASSERT_TRUE(selected) << selected.error();
  EXPECT_EQ(names(*selected), (Names{"app", "tool"}));
}

TEST_F(SelectStages, OnlyAndFromTogetherIsAnError) {
  Selection both = only({"app"});
  both.from = "lib";
  auto selected = select_stages(m_chain, both);
  ASSERT_FALSE(selected);
  EXPECT_EQ(selected.error(), "use --only or --from, not both");
}

TEST_F(SelectStages, UnknownOnlySuggestsTheClosestStage) {
  auto selected = select_stages(m_chain, only({"lib", "ap"}));
  ASSERT_FALSE(selected);
  EXPECT_EQ(selected.error(), "unknown stage 'ap' in --only (did you mean 'app'?)");
}

TEST_F(SelectStages, UnknownFromListsTheStages) {
  auto selected = select_stages(m_chain, from("zzzzzz"));
  ASSERT_FALSE(selected);
  EXPECT_EQ(selected.error(), "unknown stage 'zzzzzz' in --from (stages: app, lib, tool)");
}

TEST(StageBuildArgs, LaterLayersWinAndFirstPositionsStay) {
  Chain chain = chain_of({stage("app")});
  chain.versions = {{"ZLIB", "1.3"}, {"OPENSSL", "3.0"}, {"VERSION", "0.9"}};
  Stage& app = chain.stages[0];
  app.build_args = {{"VERSION", "1.0"}, {"ZLIB", "local"}, {"MODE", "release"}};
  app.declared_args = {"MODE", "VERSION", "ZLIB", "OPENSSL", "EXTRA"};
  KeyValues overrides = {{"EXTRA", "x"}, {"VERSION", "2.0"}};
  EXPECT_EQ(stage_build_args(chain, app, overrides), (KeyValues{{"ZLIB", "local"},
                                                                {"OPENSSL", "3.0"},
                                                                {"VERSION", "2.0"},
                                                                {"MODE", "release"},
                                                                {"EXTRA", "x"}}));
}

TEST(StageBuildArgs, UndeclaredPinsNeverReachTheStage) {
  Chain chain = chain_of({stage("app")});
  chain.versions = {{"ZLIB", "1.3"}, {"UNUSED_PIN", "9"}};
  Stage& app = chain.stages[0];
  app.declared_args = {"ZLIB"};
  KeyValues overrides = {{"NOT_DECLARED", "1"}};
  EXPECT_EQ(stage_build_args(chain, app, overrides), (KeyValues{{"ZLIB", "1.3"}}));
}

TEST(StageBuildArgs, NothingDeclaredNothingPassed) {
  Chain chain = chain_of({stage("app")});
  chain.versions = {{"ZLIB", "1.3"}};
  chain.stages[0].build_args = {{"A", "1"}};
  EXPECT_TRUE(stage_build_args(chain, chain.stages[0], {}).empty());
}

} // namespace
} // namespace kiln
