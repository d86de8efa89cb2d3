#include "driver/image_index.h"

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
const std::string k_run = "20261203-101500-0001";
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

TEST(Provenance, OnlyTheImageThatLeavesTheHostIsStampedWithTheRun) {
  Chain chain = publish_chain();
  EXPECT_TRUE(leaves_host(chain, *chain.find_stage("amd64/app")));
  EXPECT_TRUE(leaves_host(chain, *chain.find_stage("arm64/app")));
  EXPECT_FALSE(leaves_host(chain, *chain.find_stage("amd64/base")));
  chain.publish.index.clear();
  EXPECT_FALSE(leaves_host(chain, *chain.find_stage("amd64/app"))); // nothing is published

  BuildRequest app = build_request(chain, *chain.find_stage("amd64/app"), {}, {});
  stamp_run(app, k_run);
  EXPECT_TRUE(has(BuildkitEngine({}).build_argv(app), "--opt", "label:dev.kiln.run-id=" + k_run));
}

ImageConfig image(const std::string& platform, const std::string& run_id,
                  const std::string& pins = "APP_VERSION=3.4") {
  ImageConfig config;
  auto slash = platform.find('/');
  config.os = platform.substr(0, slash);
  config.architecture = platform.substr(slash + 1);
  if (auto variant = config.architecture.find('/'); variant != std::string::npos) {
    config.variant = config.architecture.substr(variant + 1);
    config.architecture.resize(variant);
  }
  config.labels = {{"dev.kiln.chain", "pub"}, {"dev.kiln.pins", pins}};
  if (!run_id.empty()) {
    config.labels[k_run_id_label] = run_id;
  }
  return config;
}

LaneImage lane(const std::string& name, const std::string& platform, const std::string& outcome,
               ImageConfigRead config) {
  return {name, name + "/app", platform, outcome, std::move(config), "oci:/layouts/" + name};
}

std::vector<std::string> images_of(const IndexVerdict& verdict) {
  std::vector<std::string> out;
  for (const auto& l : verdict.lanes) {
    out.push_back(l.lane + ":" + l.image);
  }
  return out;
}

TEST(JudgeIndex, EveryLaneBuiltThisRunPassesAllThreeGates) {
  IndexVerdict verdict =
      judge_index(k_ref,
                  {lane("amd64", "linux/amd64", "built", image("linux/amd64", k_run)),
                   // a stage served from the cache is fresh too: its run stamp is this run's
                   lane("arm64", "linux/arm64/v8", "reused", image("linux/arm64/v8", k_run))},
                  k_run);
  EXPECT_TRUE(verdict.ok());
  ASSERT_EQ(verdict.gates.size(), 3u);
  for (const auto& gate : verdict.gates) {
    EXPECT_EQ(gate.verdict, "pass") << gate.gate;
    EXPECT_EQ(gate.subject, "index " + k_ref);
  }
  EXPECT_EQ(verdict.gates[0].gate, "completeness");
  EXPECT_EQ(verdict.gates[1].gate, "coherence");
  EXPECT_EQ(verdict.gates[2].gate, "freshness");
  EXPECT_EQ(images_of(verdict),
            (std::vector<std::string>{"amd64:built-this-run", "arm64:built-this-run"}));
}

TEST(JudgeIndex, AFailedLaneWithNoImageBlocksAtCompletenessAndNamesWhatDidNotRun) {
  IndexVerdict verdict =
      judge_index(k_ref,
                  {lane("amd64", "linux/amd64", "built", image("linux/amd64", k_run)),
                   lane("arm64", "linux/arm64/v8", "skipped:arm64/base",
                        tl::unexpected(std::string("no build of stage 'app' is on record")))},
                  k_run);
  EXPECT_FALSE(verdict.ok());
  EXPECT_EQ(images_of(verdict),
            (std::vector<std::string>{"amd64:built-this-run", "arm64:missing"}));
  EXPECT_EQ(verdict.lanes[1].detail,
            "arm64/app ended skipped:arm64/base: no build of stage 'app' is on record");
  ASSERT_EQ(verdict.gates.size(), 1u);
  EXPECT_EQ(verdict.gates[0].verdict, "refused");
  EXPECT_EQ(verdict.gates[0].findings,
            std::vector<std::string>{"lane arm64: no image of arm64/app: arm64/app ended "
                                     "skipped:arm64/base: no build of stage 'app' is on record"});
  EXPECT_EQ(verdict.gates_not_run,
            (std::vector<std::string>{"coherence", "freshness", "push", "read-back"}));
}

TEST(JudgeIndex, AnOlderRunsImageInAFailedLaneIsStaleAndRefusedByCoherence) {
  IndexVerdict verdict = judge_index(
      k_ref,
      {lane("amd64", "linux/amd64", "built", image("linux/amd64", k_run)),
       lane("arm64", "linux/arm64/v8", "failed", image("linux/arm64/v8", "20261202-090000-0007"))},
      k_run);
  EXPECT_EQ(images_of(verdict), (std::vector<std::string>{"amd64:built-this-run", "arm64:stale"}));
  EXPECT_EQ(verdict.lanes[1].run_id, "20261202-090000-0007");
  EXPECT_EQ(verdict.lanes[1].detail,
            "built by run 20261202-090000-0007; this run's build of arm64/app ended failed");
  ASSERT_EQ(verdict.gates.size(), 2u);
  EXPECT_EQ(verdict.gates[0].verdict, "pass"); // an image is there, only not this run's
  EXPECT_EQ(verdict.gates[1].findings,
            std::vector<std::string>{
                "lane arm64: its image is stamped with run 20261202-090000-0007, not this run"});
  EXPECT_EQ(verdict.gates_not_run, (std::vector<std::string>{"freshness", "push", "read-back"}));
}

TEST(JudgeIndex, AStageOfALaneThatDidNotFinishBlocksAtCompleteness) {
  LaneImage arm64 = lane("arm64", "linux/arm64/v8", "built", image("linux/arm64", k_run));
  arm64.unfinished = {"arm64/smoke ended failed"};
  IndexVerdict verdict = judge_index(
      k_ref, {lane("amd64", "linux/amd64", "built", image("linux/amd64", k_run)), arm64}, k_run);
  ASSERT_EQ(verdict.gates.size(), 1u);
  EXPECT_EQ(verdict.gates[0].findings,
            std::vector<std::string>{"lane arm64: arm64/smoke ended failed"});
  // arm64 and arm64/v8 are one platform: the image is the lane's.
  arm64.unfinished.clear();
  EXPECT_TRUE(
      judge_index(
          k_ref, {lane("amd64", "linux/amd64", "built", image("linux/amd64", k_run)), arm64}, k_run)
          .ok());
  EXPECT_TRUE(same_platform("linux/arm64", "linux/arm64/v8"));
  EXPECT_FALSE(same_platform("linux/arm/v7", "linux/arm/v6"));
}

TEST(JudgeIndex, CoherenceComparesPinsAndPlatformsAcrossLanes) {
  IndexVerdict verdict = judge_index(
      k_ref,
      {lane("amd64", "linux/amd64", "built", image("linux/amd64", k_run)),
       lane("arm64", "linux/arm64/v8", "built", image("linux/amd64", k_run, "APP_VERSION=3.5"))},
      k_run);
  ASSERT_EQ(verdict.gates.size(), 2u);
  EXPECT_EQ(verdict.gates[1].findings,
            (std::vector<std::string>{
                "lane arm64: its image is for linux/amd64, and the lane builds linux/arm64/v8",
                "lane arm64: dev.kiln.pins is 'APP_VERSION=3.5', lane amd64's is "
                "'APP_VERSION=3.4'"}));
}

TEST(JudgeIndex, AnImageStampedByThisRunWhoseStageWasNotSelectedIsNotFresh) {
  // Coherent (the same run's stamp) yet the run's record does not show its stage built: only a
  // stage this run built or verified cached is fresh.
  IndexVerdict verdict =
      judge_index(k_ref,
                  {lane("amd64", "linux/amd64", "built", image("linux/amd64", k_run)),
                   lane("arm64", "linux/arm64/v8", "", image("linux/arm64/v8", k_run))},
                  k_run);
  ASSERT_EQ(verdict.gates.size(), 3u);
  EXPECT_EQ(verdict.gates[2].gate, "freshness");
  EXPECT_EQ(verdict.gates[2].findings,
            std::vector<std::string>{
                "lane arm64: it is stamped by this run; this run did not build arm64/app"});
  EXPECT_EQ(verdict.gates_not_run, (std::vector<std::string>{"push", "read-back"}));
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

TEST(IndexEntries, TheDigestManifestAddSaysItAddedIsItsLastLines) {
  auto text = read_file(k_fixtures / "buildah-1.28.2" / "manifest-add.out");
  ASSERT_TRUE(text);
  EXPECT_EQ(manifest_added_digest(*text),
            "sha256:7d358d06e200a89301e0c0f99fb095ca4c54c1b228cca281e423cf7cae2f926d");
  EXPECT_EQ(manifest_added_digest("Error: sha256:xyz is not an image"), "");
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
