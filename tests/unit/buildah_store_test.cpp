// buildah's store levers on real buildah 1.28.2 output (tests/fixtures/buildah-1.28.2): where
// the store is, and which dangling images no build can reuse, on the recording of a stage
// rebuilt from `FROM scratch` + `ARG` (store-rebuilt/, see the README there).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "disk/buildah_store.h"
#include "temp_dir.h"
#include "util/sha256.h"
#include "util/strings.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path k_fixtures = fs::path(KILN_TEST_FIXTURES) / "buildah-1.28.2";
const fs::path k_rebuilt = k_fixtures / "store-rebuilt";

// The recorded images, by the short id buildah printed for each step.
const std::string k_arg = "6c7edd3617e5d7e2497de081a653ff2526d9745d842cca6bfba7bfa5c18898d6";
const std::string k_v1_label = "d98f57a0fd58e2f34b1555de39f56a2a0a563d32c6f8a62478c3fa4c53932770";
const std::string k_v1_copy = "88a6c790ebc350d6fc4878e7411fbfddf5451e7fb89c2af5380ef2a8e3cd34ec";
const std::string k_v1_run = "ac0edaeb1d533deddadd3600c653cf5fca7969753e2a26dbefa87a0864e8e030";
const std::string k_v2_copy = "f18ade052195fa59ba43fb61f8e4e71beaa85e321d9a6ea76dfeb41cc6b7b718";
const std::string k_v2_tagged = "d604bffcaaad93ae630e0cb5c55e875a828da3e956fd7ff29eaf51aa626cf627";

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(in.good() || in.eof()) << path;
  return text.str();
}

std::set<std::string> dangling_recorded() {
  std::set<std::string> ids;
  std::istringstream in(slurp(k_rebuilt / "images-dangling.txt"));
  for (std::string line; std::getline(in, line);) {
    ids.insert(line.substr(7)); // sha256:
  }
  return ids;
}

/// The recorded `buildah inspect --type image` of each image, as the lever reads them.
tl::expected<BuildahImageSteps, std::string> recorded_steps(const std::string& id) {
  fs::path file = k_rebuilt / ("inspect-" + id.substr(0, 12) + ".json");
  if (!fs::exists(file)) {
    return tl::unexpected("no recording for " + id);
  }
  return parse_buildah_inspect(slurp(file));
}

class RecordedStore : public ::testing::Test {
protected:
  void SetUp() override {
    auto images = parse_buildah_images(slurp(k_rebuilt / "images-all.json"));
    ASSERT_TRUE(images) << images.error();
    m_images = *images;
    ASSERT_EQ(m_images.size(), 7u);
    for (const BuildahImage& image : m_images) {
      m_newest = std::max(m_newest, image.created);
    }
    m_dangling = dangling_recorded();
  }

  BuildahImage& image(const std::string& id) {
    auto it = std::find_if(m_images.begin(), m_images.end(),
                           [&](const BuildahImage& i) { return i.id == id; });
    EXPECT_NE(it, m_images.end()) << id;
    return *it;
  }

  /// The verdict an hour after the last build, with the default ten-minute age.
  StaleImages an_hour_later() const {
    return find_stale_images(m_images, m_dangling, recorded_steps, m_newest + 3600, 600s);
  }

  std::vector<BuildahImage> m_images;
  std::set<std::string> m_dangling;
  int64_t m_newest = 0;
};

TEST(BuildahStoreParse, TheStoreRootIsBuildahInfosGraphRoot) {
  auto root = parse_buildah_info(slurp(k_fixtures / "info.json"));
  ASSERT_TRUE(root) << root.error();
  EXPECT_EQ(root->root, fs::path("/var/lib/containers/storage"));
  EXPECT_EQ(root->driver, "overlay");

  // A warning buildah printed on stderr comes first through the shared pipe.
  auto warned = parse_buildah_info("time=\"2026-12-03T10:00:00Z\" level=warning msg=\"x\"\n" +
                                   slurp(k_fixtures / "info.json"));
  ASSERT_TRUE(warned) << warned.error();
  EXPECT_EQ(warned->root, fs::path("/var/lib/containers/storage"));

  EXPECT_EQ(parse_buildah_info("Error: no store").error(), "buildah info printed no JSON object");
  EXPECT_EQ(parse_buildah_info("{\"store\": {}}").error(), "buildah info names no store.GraphRoot");
}

TEST(BuildahStoreParse, TheStoreIndexesGiveNamesTopLayersTheLayerChainAndItsSizes) {
  auto images = parse_store_index(slurp(k_fixtures / "store-index" / "images.json"));
  ASSERT_TRUE(images);
  ASSERT_EQ(images->size(), 2u);
  EXPECT_TRUE((*images)[0].names.empty());
  const StoreIndexEntry& named = (*images)[1];
  EXPECT_EQ(named.id, "cf262930bdb86ab7721b8415517c4ab3367162fbc96d3c3a6142290bf0d4535c");
  EXPECT_EQ(named.names, std::vector<std::string>{"localhost/t602546555-base:latest-kiln-c5313f76"})
      << "names-history is not names";
  EXPECT_EQ(named.layer, "34872f4ed5c2339ffe8ea2c58685435c0c92bf2f319a6015b7aaad91118a05b5");

  auto layers = parse_store_index(slurp(k_fixtures / "store-index" / "layers.json"));
  ASSERT_TRUE(layers);
  ASSERT_EQ(layers->size(), 2u);
  EXPECT_EQ((*layers)[1].id, named.layer);
  EXPECT_EQ((*layers)[1].parent, (*layers)[0].id);
  EXPECT_EQ((*layers)[1].diff_digest,
            "sha256:c84e89e832e631d8cc6766a8bcd0b923b9d13e17486e4c8dd9541eebf70bcf21");
  EXPECT_EQ((*layers)[0].parent, "");
  EXPECT_EQ((*layers)[0].diff_size, 1984512u);
  EXPECT_EQ((*layers)[1].diff_size, 142848u);
  EXPECT_EQ(named.diff_size, 0u) << "an image records no diff size";

  // What is not a string is "", what is not an entry is passed over, what is not an array fails.
  auto odd = parse_store_index(
      R"([1, ["id"], {"id": {"id": "x"}, "names": "n", "layer": 2, "diff-size": 9},
                                   {"names": ["a", ["b"], 3, "c"], "parent": "p", "id": "i",
                                    "layer": "l", "layer": 7, "diff-size": 5,
                                    "diff-size": "5"}])");
  ASSERT_TRUE(odd);
  ASSERT_EQ(odd->size(), 2u);
  EXPECT_EQ((*odd)[0].id, "");
  EXPECT_TRUE((*odd)[0].names.empty());
  EXPECT_EQ((*odd)[0].layer, "");
  EXPECT_EQ((*odd)[1].names, (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ((*odd)[1].id, "i");
  EXPECT_EQ((*odd)[1].parent, "p");
  EXPECT_EQ((*odd)[1].layer, "") << "the last of a key given twice";
  EXPECT_EQ((*odd)[0].diff_size, 9u);
  EXPECT_EQ((*odd)[1].diff_size, 0u) << "the last of a key given twice, and not a number";
  EXPECT_FALSE(parse_store_index(R"({"id": "x"})"));
  EXPECT_FALSE(parse_store_index(R"([{"id": "x"})"));
}

TEST(BuildahStoreParse, InspectGivesTheHistoryAndTheLayers) {
  auto tagged = recorded_steps(k_v2_tagged);
  ASSERT_TRUE(tagged) << tagged.error();
  EXPECT_EQ(tagged->history.size(), 4u);
  EXPECT_EQ(tagged->diff_ids.size(), 3u);
  EXPECT_NE(tagged->history[0].find("ARG VERSION"), std::string::npos) << tagged->history[0];

  auto arg = recorded_steps(k_arg);
  ASSERT_TRUE(arg) << arg.error();
  EXPECT_EQ(arg->history.size(), 1u);
  EXPECT_TRUE(arg->diff_ids.empty()) << "FROM scratch + ARG holds no layer";
  // The ARG step is the first step of the tagged image: the same entry, byte for byte.
  EXPECT_EQ(arg->history[0], tagged->history[0]);

  EXPECT_FALSE(parse_buildah_inspect("[]"));
  EXPECT_FALSE(parse_buildah_inspect("{\"Type\": \"buildah 0.0.1\"}"));
}

TEST(BuildahStoreParse, AConfigReadInPlaceGivesTheStepsInspectGives) {
  // What `buildah inspect` prints as OCIv1 is the config blob, re-marshalled: the same steps,
  // whichever way it was read.
  for (const std::string& id : {k_v2_tagged, k_arg, k_v1_run}) {
    auto inspected = recorded_steps(id);
    ASSERT_TRUE(inspected) << inspected.error();
    auto doc = nlohmann::json::parse(slurp(k_rebuilt / ("inspect-" + id.substr(0, 12) + ".json")));
    auto blob = parse_config_steps(doc["OCIv1"].dump());
    ASSERT_TRUE(blob) << blob.error();
    EXPECT_EQ(blob->history, inspected->history) << id;
    EXPECT_EQ(blob->diff_ids, inspected->diff_ids) << id;
  }
  // Only what buildah's layer cache compares: a step made at another time is the same step.
  auto at = [](const char* created) {
    return parse_config_steps(std::string(R"({"history": [{"created": ")") + created +
                              R"(", "created_by": "/bin/sh -c make", "empty_layer": true}]})");
  };
  ASSERT_TRUE(at("2026-12-01T10:00:00Z"));
  EXPECT_EQ(at("2026-12-01T10:00:00Z")->history, at("2026-12-06T05:00:00.5Z")->history);
  EXPECT_EQ(at("2026-12-01T10:00:00Z")->history[0],
            R"({"created_by":"/bin/sh -c make","empty_layer":true})");
  EXPECT_FALSE(parse_config_steps("[]"));
  EXPECT_FALSE(parse_config_steps("{"));
}

TEST(BuildahStoreParse, AConfigBlobIsReadOnlyWhenItsBytesAreTheImagesId) {
  testing::TempDir dir;
  std::string config = R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers"}})";
  std::string id = sha256_digest(config).substr(7);
  fs::path blob = dir.path() / "overlay-images" / id / ("=" + base64_encode("sha256:" + id));
  fs::create_directories(blob.parent_path());
  std::ofstream(blob) << config;
  BuildahStorePlace place{dir.path(), "overlay"};
  EXPECT_EQ(buildah_config_blob(place, id), config);
  EXPECT_EQ(buildah_config_blob(place, "sha256:" + id), config);
  EXPECT_FALSE(buildah_config_blob(BuildahStorePlace{dir.path(), "vfs"}, id));
  EXPECT_FALSE(buildah_config_blob(place, "localhost/app:latest")) << "a name is not an id";
  EXPECT_FALSE(buildah_config_blob(place, "../" + id.substr(3)));

  // Bytes that are not the ones the id names are not that image's config.
  std::ofstream(blob) << config << " ";
  EXPECT_FALSE(buildah_config_blob(place, id));
}

TEST_F(RecordedStore, OnlyTheOldVersionsLayeredLeafIsStale) {
  // v1 (ARG, LABEL, COPY, RUN) was rebuilt as v2 (ARG, COPY, RUN, RUN) under the same tag:
  // buildah lists v1's RUN step and its layerless LABEL step as dangling.
  EXPECT_EQ(m_dangling, (std::set<std::string>{k_v1_run, k_v1_label}));
  StaleImages verdict = an_hour_later();
  EXPECT_EQ(verdict.stale, std::vector<std::string>{k_v1_run});
  // The LABEL step frees nothing, and removing it makes buildah take the ARG step with it: the
  // step v2 is cached from (rmi-layerless.stdout).
  EXPECT_EQ(verdict.layerless, 1);
  EXPECT_EQ(verdict.kept, std::set<std::string>{k_v1_label});
  EXPECT_EQ(verdict.reused, 0);
  EXPECT_EQ(verdict.young, 0);
  EXPECT_EQ(verdict.unreadable, 0);
  EXPECT_GT(verdict.stale_bytes, 0u);
}

TEST_F(RecordedStore, TheZeroLayerStepUnderATaggedImageStays) {
  // The case that cost a rebuild: with no LABEL step after it, buildah lists the ARG step of
  // the tagged image as dangling.
  m_dangling = {k_arg};
  StaleImages verdict = an_hour_later();
  EXPECT_TRUE(verdict.stale.empty());
  EXPECT_EQ(verdict.kept, std::set<std::string>{k_arg});
}

TEST_F(RecordedStore, ADanglingImageATaggedOneBuildsOnIsReused) {
  // Were v2's COPY step listed dangling (a layer of its own, so not spared as layerless), the
  // tagged image's history begins with its history: it is that image's layer cache.
  m_dangling.insert(k_v2_copy);
  StaleImages verdict = an_hour_later();
  EXPECT_EQ(verdict.stale, std::vector<std::string>{k_v1_run});
  EXPECT_EQ(verdict.reused, 1);
  EXPECT_TRUE(verdict.kept.contains(k_v2_copy));
}

TEST_F(RecordedStore, RecentImagesAndWhatTheyBuildOnStay) {
  // Ten seconds after the builds, everything dangling is a step a build may start from.
  StaleImages soon = find_stale_images(m_images, m_dangling, recorded_steps, m_newest + 10, 600s);
  EXPECT_TRUE(soon.stale.empty());
  EXPECT_EQ(soon.young, 2);

  // An untagged but recent image (a failed build's last step) keeps its old steps too.
  image(k_v1_run).created = m_newest + 3300;
  StaleImages later = an_hour_later();
  EXPECT_TRUE(later.stale.empty());
  EXPECT_EQ(later.young, 1);

  image(k_v1_run).created = m_newest - 100;
  image(k_v2_tagged).names.clear();
  image(k_v2_tagged).created = m_newest + 3300;
  m_dangling = {k_v2_tagged, k_v2_copy};
  StaleImages untagged = an_hour_later();
  EXPECT_TRUE(untagged.stale.empty());
  EXPECT_EQ(untagged.young, 1);
  EXPECT_EQ(untagged.reused, 1);
}

TEST_F(RecordedStore, WhatCannotBeReadIsKept) {
  auto blind_to = [](const std::string& hidden) {
    return [hidden](const std::string& id) -> tl::expected<BuildahImageSteps, std::string> {
      if (id == hidden) {
        return tl::unexpected("buildah inspect " + id.substr(0, 12) + " failed");
      }
      return recorded_steps(id);
    };
  };
  StaleImages candidate =
      find_stale_images(m_images, m_dangling, blind_to(k_v1_run), m_newest + 3600, 600s);
  EXPECT_TRUE(candidate.stale.empty());
  EXPECT_EQ(candidate.unreadable, 1);
  EXPECT_EQ(candidate.errors, std::vector<std::string>{"buildah inspect ac0edaeb1d53 failed"});

  // Without the tagged image's history, nothing tells whether a candidate is its cache.
  StaleImages root =
      find_stale_images(m_images, m_dangling, blind_to(k_v2_tagged), m_newest + 3600, 600s);
  EXPECT_TRUE(root.stale.empty());
  EXPECT_TRUE(root.kept.contains(k_v1_run));
}

TEST(BuildahStoreParse, RemovalOutputNamesTheParentsBuildahTookAlong) {
  BuildahRemoval layered;
  read_buildah_removal(slurp(k_rebuilt / "rmi-layered.stdout"), layered);
  EXPECT_EQ(layered.removed, (std::vector<std::string>{k_v1_run, k_v1_copy}));
  EXPECT_TRUE(layered.errors.empty());

  // What a layerless image's removal takes: the ARG step the tagged v2 is cached from.
  BuildahRemoval layerless;
  read_buildah_removal(slurp(k_rebuilt / "rmi-layerless.stdout"), layerless);
  EXPECT_EQ(layerless.removed, (std::vector<std::string>{k_v1_label, k_arg}));

  BuildahRemoval failed;
  read_buildah_removal("Error: 2 errors occurred:\n"
                       "\t* image used by 1a2b: image is in use by a container\n"
                       "\t* locating image with ID \"ffff\": image not known\n",
                       failed);
  EXPECT_EQ(failed.in_use, 1);
  EXPECT_EQ(failed.errors,
            std::vector<std::string>{"locating image with ID \"ffff\": image not known"});
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

StoreIndexEntry layer(std::string id, std::string parent, uint64_t size) {
  StoreIndexEntry entry;
  entry.id = std::move(id);
  entry.parent = std::move(parent);
  entry.diff_size = size;
  return entry;
}

StoreIndexEntry image(std::string id, std::string top) {
  StoreIndexEntry entry;
  entry.id = std::move(id);
  entry.layer = std::move(top);
  return entry;
}

TEST(BuildahStoreUsage, EachLayerCountsOnceUnderTheStrongestImageHoldingIt) {
  // base <- tool <- final (tagged); base <- old (dangling, no build reuses it); tool <- step
  // (an intermediate the tagged image's history repeats); and a working container's layer.
  std::vector<StoreIndexEntry> layers = {layer("base", "", 100),    layer("tool", "base", 20),
                                         layer("final", "tool", 3), layer("old", "base", 7),
                                         layer("step", "tool", 5),  layer("rw", "final", 1)};
  std::vector<StoreIndexEntry> images = {image("F", "final"), image("O", "old"), image("S", "step"),
                                         image("G", "missing-layer")};
  std::map<std::string, std::string> kind_of = {
      {"F", "image"}, {"O", "dangling"}, {"S", "intermediate"}, {"G", "dangling"}};
  auto shares = layer_bytes_by_kind(images, layers, kind_of, {"image", "intermediate", "dangling"});
  EXPECT_EQ(shares["image"].bytes, 123u) << "base, tool and final: the base once";
  EXPECT_EQ(shares["image"].layers, 3);
  EXPECT_EQ(shares["intermediate"].bytes, 5u) << "its parents are the tagged image's";
  EXPECT_EQ(shares["dangling"].bytes, 7u) << "only what no stronger image holds";
  EXPECT_EQ(shares["no image"].bytes, 1u);
  uint64_t total = 0;
  for (const auto& [kind, share] : shares) {
    total += share.bytes;
  }
  EXPECT_EQ(total, 136u) << "every layer exactly once";

  // The same images listed the other way round, and a layer chain with a cycle, change nothing.
  std::reverse(images.begin(), images.end());
  layers.push_back(layer("loop-a", "loop-b", 2));
  layers.push_back(layer("loop-b", "loop-a", 2));
  images.push_back(image("L", "loop-a"));
  kind_of["L"] = "dangling";
  auto again = layer_bytes_by_kind(images, layers, kind_of, {"image", "intermediate", "dangling"});
  EXPECT_EQ(again["image"].bytes, 123u);
  EXPECT_EQ(again["dangling"].bytes, 11u);
}

} // namespace
} // namespace kiln
