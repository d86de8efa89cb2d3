#include "disk/image_steps_cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const std::string k_id(64, 'a');

BuildahImageSteps some_steps() {
  return {{R"({"created_by":"/bin/sh -c #(nop) ARG VERSION=1"})", R"({"created_by":"COPY x"})"},
          {"sha256:" + std::string(64, '1')}};
}

TEST(ImageStepsCache, WhatIsKeptIsFoundByItsId) {
  testing::TempDir dir;
  ImageStepsCache cache(dir.path() / "steps");
  EXPECT_FALSE(cache.find(k_id)) << "nothing kept yet, and no folder";
  cache.keep(k_id, some_steps());
  auto found = cache.find(k_id);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->history, some_steps().history);
  EXPECT_EQ(found->diff_ids, some_steps().diff_ids);
  EXPECT_FALSE(cache.find(std::string(64, 'b')));
}

TEST(ImageStepsCache, AnythingButAWholeEntryIsAMiss) {
  testing::TempDir dir;
  ImageStepsCache cache(dir.path());
  for (const char* text : {"", "{\"history\": [\"a\"]", "[]",
                           "{\"history\": [1], \"diff_ids\": []}", "{\"history\": []}"}) {
    std::ofstream(dir.path() / (k_id + ".json")) << text;
    EXPECT_FALSE(cache.find(k_id)) << text;
  }
  // Only image ids name entries: nothing is read or written outside the folder.
  cache.keep("../escape", some_steps());
  EXPECT_FALSE(fs::exists(dir.path().parent_path() / "escape.json"));
  EXPECT_FALSE(cache.find("../escape"));
  // No folder: no cache, and no fault.
  ImageStepsCache none{fs::path()};
  none.keep(k_id, some_steps());
  EXPECT_FALSE(none.find(k_id));
}

TEST(ImageStepsCache, OldEntriesAndLeftoverTemporariesAreForgotten) {
  testing::TempDir dir;
  ImageStepsCache cache(dir.path());
  std::string young(64, 'c');
  cache.keep(k_id, some_steps());
  cache.keep(young, some_steps());
  std::ofstream(dir.path() / (k_id + ".json.tmp123-0")) << "{";
  auto long_ago = fs::file_time_type::clock::now() - std::chrono::hours(24 * 40);
  fs::last_write_time(dir.path() / (k_id + ".json"), long_ago);
  fs::last_write_time(dir.path() / (k_id + ".json.tmp123-0"), long_ago);

  cache.forget_older_than(std::chrono::hours(24 * 30));
  EXPECT_FALSE(cache.find(k_id));
  EXPECT_FALSE(fs::exists(dir.path() / (k_id + ".json.tmp123-0")));
  EXPECT_TRUE(cache.find(young));
}

} // namespace
} // namespace kiln
