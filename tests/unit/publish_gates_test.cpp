#include "driver/publish_gates.h"

#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "chain/chain_loader.h"
#include "driver/build_request.h"
#include "engine/buildah_engine.h"
#include "engine/buildkit_engine.h"
#include "util/fs.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path k_fixtures = KILN_TEST_FIXTURES;
const std::string k_ref = "127.0.0.1:5000/media/app:1.0";

Chain publish_chain() {
  auto chain = load_chain(k_fixtures / "chains" / "publish" / "chain.toml");
  EXPECT_TRUE(chain);
  return std::move(*chain);
}

bool has(const std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == flag && argv[i + 1] == value) {
      return true;
    }
  }
  return false;
}

TEST(Provenance, EveryImageIsLabelledWithChainStageLaneAndThePinsItReceived) {
  Chain chain = publish_chain();
  BuildRequest app = build_request(chain, *chain.find_stage("arm64/app"), {}, {});
  EXPECT_EQ(app.labels, (KeyValues{{"dev.kiln.chain", "pub"},
                                   {"dev.kiln.stage", "app"},
                                   {"dev.kiln.lane", "arm64"},
                                   {"dev.kiln.pins", "APP_VERSION=3.4"}}));
  // Only the pins a stage declares: OTHER_VERSION reaches no stage, so no label changes with it.
  BuildRequest base = build_request(chain, *chain.find_stage("amd64/base"), {}, {});
  EXPECT_EQ(base.labels.back(),
            (std::pair<std::string, std::string>{"dev.kiln.pins", "BASE_VERSION=1.2"}));

  auto buildah = BuildahEngine("chroot").build_argv(app);
  EXPECT_TRUE(has(buildah, "--label", "dev.kiln.lane=arm64"));
  EXPECT_TRUE(has(buildah, "--label", "dev.kiln.pins=APP_VERSION=3.4"));
  auto buildkit = BuildkitEngine({}).build_argv(app);
  EXPECT_TRUE(has(buildkit, "--opt", "label:dev.kiln.stage=app"));
}

TEST(Provenance, EveryLabelIsSetOnEveryImageSoNoneIsInherited) {
  Chain chain = publish_chain();
  chain.lanes.clear();
  Stage stage = *chain.find_stage("amd64/base");
  stage.lane.clear();
  BuildRequest request = build_request(chain, stage, {{"BASE_VERSION", "1.2"}}, {});
  chain.versions.clear(); // no pins: the label is set, and empty
  KeyValues labels = provenance_labels(chain, stage, request.build_args);
  EXPECT_EQ(labels, (KeyValues{{"dev.kiln.chain", "pub"},
                               {"dev.kiln.stage", "base"},
                               {"dev.kiln.lane", ""},
                               {"dev.kiln.pins", ""}}));
  for (const auto& [key, value] : labels) {
    EXPECT_NE(key, "dev.kiln.run-id"); // the run is the provenance's to say, not a label's
  }
}

ImageConfig image(const std::string& platform, const std::string& pins = "APP_VERSION=3.4") {
  ImageConfig config;
  auto slash = platform.find('/');
  config.os = platform.substr(0, slash);
  config.architecture = platform.substr(slash + 1);
  if (auto variant = config.architecture.find('/'); variant != std::string::npos) {
    config.variant = config.architecture.substr(variant + 1);
    config.architecture.resize(variant);
  }
  config.labels = {{"dev.kiln.chain", "pub"}, {"dev.kiln.pins", pins}};
  return config;
}

PublishImage lane(const std::string& name, const std::string& platform, const std::string& outcome,
                  ImageConfigRead config) {
  bool built = outcome == "built" || outcome == "reused";
  return {name, name + "/app", platform, outcome, built ? "sha256:" + name : "", std::move(config)};
}

std::vector<std::string> images_of(const PublishVerdict& verdict) {
  std::vector<std::string> out;
  for (const auto& l : verdict.lanes) {
    out.push_back(l.lane + ":" + l.image);
  }
  return out;
}

TEST(JudgePublish, EveryLaneBuiltThisRunPassesAllThreeGates) {
  PublishVerdict verdict =
      judge_publish(k_ref, {lane("amd64", "linux/amd64", "built", image("linux/amd64")),
                            // a stage served from the cache is this run's too
                            lane("arm64", "linux/arm64/v8", "reused", image("linux/arm64/v8"))});
  EXPECT_TRUE(verdict.ok());
  ASSERT_EQ(verdict.gates.size(), 3u);
  for (const auto& gate : verdict.gates) {
    EXPECT_EQ(gate.verdict, "pass") << gate.gate;
    EXPECT_EQ(gate.subject, k_ref);
  }
  EXPECT_EQ(verdict.gates[0].gate, "completeness");
  EXPECT_EQ(verdict.gates[1].gate, "smoke");
  EXPECT_EQ(verdict.gates[2].gate, "coherence");
  EXPECT_EQ(images_of(verdict),
            (std::vector<std::string>{"amd64:built-this-run", "arm64:built-this-run"}));
  EXPECT_EQ(verdict.lanes[1].identity, "sha256:arm64");
}

TEST(JudgePublish, AFailedLaneBlocksAtCompletenessAndNamesWhatDidNotRun) {
  PublishVerdict verdict =
      judge_publish(k_ref, {lane("amd64", "linux/amd64", "built", image("linux/amd64")),
                            lane("arm64", "linux/arm64/v8", "failed", image("linux/arm64/v8"))});
  EXPECT_FALSE(verdict.ok());
  EXPECT_FALSE(verdict.held);
  // An older run's image may be in its place: this run's publish never takes it.
  EXPECT_EQ(images_of(verdict),
            (std::vector<std::string>{"amd64:built-this-run", "arm64:missing"}));
  EXPECT_EQ(verdict.lanes[1].detail, "arm64/app ended failed");
  ASSERT_EQ(verdict.gates.size(), 1u);
  EXPECT_EQ(verdict.gates[0].findings,
            std::vector<std::string>{
                "lane arm64: no image of arm64/app from this run: arm64/app ended failed"});
  EXPECT_EQ(verdict.gates_not_run,
            (std::vector<std::string>{"smoke", "coherence", "push", "read-back", "sign", "tag"}));
}

TEST(JudgePublish, AStageOfALaneThatDidNotFinishBlocksAtCompleteness) {
  PublishImage arm64 = lane("arm64", "linux/arm64/v8", "built", image("linux/arm64"));
  arm64.unfinished = {"arm64/smoke ended failed"};
  PublishVerdict verdict =
      judge_publish(k_ref, {lane("amd64", "linux/amd64", "built", image("linux/amd64")), arm64});
  ASSERT_EQ(verdict.gates.size(), 1u);
  EXPECT_EQ(verdict.gates[0].findings,
            std::vector<std::string>{"lane arm64: arm64/smoke ended failed"});
  // arm64 and arm64/v8 are one platform: the image is the lane's.
  arm64.unfinished.clear();
  EXPECT_TRUE(
      judge_publish(k_ref, {lane("amd64", "linux/amd64", "built", image("linux/amd64")), arm64})
          .ok());
  EXPECT_TRUE(same_platform("linux/arm64", "linux/arm64/v8"));
  EXPECT_FALSE(same_platform("linux/arm/v7", "linux/arm/v6"));
}

TEST(JudgePublish, ASmokeStageThatDidNotRunHoldsThePublishBack) {
  PublishImage amd64 = lane("amd64", "linux/amd64", "built", image("linux/amd64"));
  amd64.untested = {"amd64/smoke"};
  PublishVerdict verdict = judge_publish(k_ref, {amd64});
  EXPECT_FALSE(verdict.ok());
  EXPECT_TRUE(verdict.held);
  ASSERT_EQ(verdict.gates.size(), 2u);
  EXPECT_EQ(verdict.gates[1].gate, "smoke");
  EXPECT_EQ(verdict.gates[1].findings,
            std::vector<std::string>{"lane amd64: smoke stage amd64/smoke did not run in this "
                                     "run, so amd64/app is untested; run it with the image (or "
                                     "the whole chain)"});
}

TEST(JudgePublish, CoherenceComparesPinsAndPlatformsAcrossLanes) {
  PublishVerdict verdict = judge_publish(
      k_ref, {lane("amd64", "linux/amd64", "built", image("linux/amd64")),
              lane("arm64", "linux/arm64/v8", "built", image("linux/amd64", "APP_VERSION=3.5"))});
  ASSERT_EQ(verdict.gates.size(), 3u);
  EXPECT_EQ(verdict.gates[2].findings,
            (std::vector<std::string>{
                "lane arm64: its image is for linux/amd64, and the lane builds linux/arm64/v8",
                "lane arm64: dev.kiln.pins is 'APP_VERSION=3.5', lane amd64's is "
                "'APP_VERSION=3.4'"}));
}

TEST(LayoutConfigs, EveryImageOfANestedIndexInOrder) {
  auto multi = image_configs_from_layout(k_fixtures / "oci-layout" / "multi");
  ASSERT_TRUE(multi) << multi.error();
  ASSERT_EQ(multi->size(), 2u);
  EXPECT_EQ((*multi)[0].platform(), "linux/amd64");
  EXPECT_EQ((*multi)[1].platform(), "linux/arm64");
  EXPECT_NE(std::find((*multi)[1].env.begin(), (*multi)[1].env.end(),
                      "CACHE_URL=https://10.20.30.40/cache"),
            (*multi)[1].env.end());
  auto leak = image_configs_from_layout(k_fixtures / "oci-layout" / "leak");
  ASSERT_TRUE(leak);
  EXPECT_EQ(leak->size(), 1u);
  auto none = image_configs_from_layout(k_fixtures / "oci-layout" / "no-such-layout");
  EXPECT_FALSE(none);
}

TEST(IndexEntries, ReadsEachPlatformAndDigestOfARecordedReadBack) {
  auto text = read_file(k_fixtures / "buildah-1.28.2" / "manifest-inspect-readback.json");
  ASSERT_TRUE(text);
  std::vector<IndexEntry> entries = index_entries(*text);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].platform, "linux/amd64");
  EXPECT_EQ(entries[0].digest,
            "sha256:7bc413ef94f396c3e6add1fbf674066fe3f59e6f68c88be637b123e212e614a0");
  EXPECT_EQ(entries[1].platform, "linux/arm64/v8");
  EXPECT_TRUE(index_entries("not json").empty());
  EXPECT_TRUE(index_entries(R"({"manifests": [{"digest": 7}, "x"]})").empty());
}

} // namespace
} // namespace kiln
