// kiln disk status and reclaim between runs, against real buildah in a store of the test's own:
// the sizes agree with du, and a reclaim that cannot reach its target still removes nothing a
// stage of the chain builds on, nothing a stable name holds and not the final image.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "kiln_harness.h"
#include "util/process.h"
#include "util/strings.h"

namespace kiln::testing {
namespace {

using nlohmann::json;
using Env = std::vector<std::pair<std::string, std::string>>;

/// The id of the image `name` names in the store CONTAINERS_STORAGE_CONF points at, empty when
/// it names none.
std::string image_id_of(const std::string& name) {
  CapturedRun inspected = run_captured(
      {"buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}", "--", name});
  return inspected.exit.ok() ? std::string(trim(inspected.output)) : std::string();
}

/// The first "<number>G" after `label` in `text`, in bytes; -1 when there is none.
double gib_after(const std::string& text, const std::string& label) {
  std::smatch match;
  std::regex pattern(label + R"(\s*([0-9.]+)G)");
  if (!std::regex_search(text, match, pattern)) {
    return -1;
  }
  return std::stod(match[1]) * 1073741824.0;
}

TEST(DiskReclaim, BetweenRunsOnlyATestRunsImageGoesAndStatusAgreesWithDu) {
  if (::geteuid() != 0 || !capture_output({"buildah", "--version"})) {
    GTEST_SKIP() << "needs root and buildah";
  }
  ChainDir dir;
  dir.copy_unique_demo();
  std::string conf = dir.private_buildah_store();
  ::setenv("CONTAINERS_STORAGE_CONF", conf.c_str(), 1);
  struct Unset {
    ~Unset() { ::unsetenv("CONTAINERS_STORAGE_CONF"); }
  } unset;
  Env env = {{"CONTAINERS_STORAGE_CONF", conf}};

  KilnResult first = dir.kiln({"run", "chain.toml"}, nullptr, env);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  json stages = dir.latest_manifest()["stages"];

  // Sizes as du counts them: shared layers once, where adding the images' own sizes counted
  // the base's layers in every image built on it.
  KilnResult status = dir.kiln({"disk", "status", "chain.toml"}, nullptr, env);
  ASSERT_EQ(status.exit_code, 0) << status.output;
  auto du = capture_output({"du", "-sx", "--block-size=1", (dir.path() / "store").string()});
  ASSERT_TRUE(du) << du.error();
  double measured = std::stod(*du);
  double reported = gib_after(status.output, R"(buildah store:\n  free space: [^\n]*\n)");
  ASSERT_GT(reported, 0) << status.output;
  EXPECT_NEAR(reported / measured, 1.0, 0.1) << status.output << "du: " << *du;
  double image_bytes = gib_after(status.output, R"(\n    image\s+\d+ record\(s\))");
  EXPECT_GT(image_bytes, 0) << status.output;
  EXPECT_LE(image_bytes, measured) << status.output;

  // Far short of its target, the reclaim would take every lever: the dry run lists the smoke
  // stage's image and not one image a stage builds on, a stable name or the final image.
  KilnResult dry = dir.kiln({"disk", "reclaim", "chain.toml", "--target-gb", "100000", "--dry-run"},
                            nullptr, env);
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("leftovers of earlier runs: none"), std::string::npos) << dry.output;
  for (const json& stage : stages) {
    std::string work_tag = stage["work_tag"];
    bool smoke = stage["name"] == "smoke";
    EXPECT_EQ(dry.output.find("remove image " + work_tag) != std::string::npos, smoke)
        << work_tag << "\n"
        << dry.output;
    if (!smoke) {
      EXPECT_EQ(dry.output.find(stage["tag"].get<std::string>() + " "), std::string::npos)
          << dry.output;
    }
  }

  KilnResult reclaim =
      dir.kiln({"disk", "reclaim", "chain.toml", "--target-gb", "100000"}, nullptr, env);
  EXPECT_EQ(reclaim.exit_code, 1) << "the target is out of reach\n" << reclaim.output;
  EXPECT_NE(reclaim.output.find("[disk-reclaim] kiln disk reclaim"), std::string::npos)
      << reclaim.output;
  for (const json& stage : stages) {
    std::string image = stage["image_id"];
    if (stage["name"] == "smoke") {
      EXPECT_EQ(image_id_of(stage["work_tag"]), "") << reclaim.output;
      continue;
    }
    EXPECT_EQ(image_id_of(stage["work_tag"]), image) << stage["name"] << "\n" << reclaim.output;
    EXPECT_EQ(image_id_of(stage["tag"]), image) << stage["name"] << "\n" << reclaim.output;
  }

  // So the next run builds only what always builds: the smoke stage's test run.
  KilnResult second = dir.kiln({"run", "chain.toml"}, nullptr, env);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  for (const json& stage : dir.latest_manifest()["stages"]) {
    EXPECT_EQ(stage["outcome"], stage["name"] == "smoke" ? "built" : "reused")
        << stage["name"] << "\n"
        << second.output;
  }
}

} // namespace
} // namespace kiln::testing
