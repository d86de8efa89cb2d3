// An image is its identity, against real buildah: two checkouts of one chain running at once
// never build on each other's images, a refused image is no image for a later run, and a
// secret passed as a build arg is never written where kiln writes.
#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "kiln_harness.h"
#include "util/process.h"
#include "util/strings.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

/// The demo chain under `name`, its base stamped with `release` (its /etc/hello-release).
void demo_as(const ChainDir& dir, const std::string& name, const std::string& release) {
  dir.copy_demo();
  std::string chain = dir.read("chain.toml");
  chain.replace(chain.find("name = \"hello\""), 14, "name = \"" + name + "\"");
  dir.write("chain.toml", chain);
  dir.write("versions.env", "BASE_RELEASE=" + release +
                                "\nTOOLCHAIN_VERSION=1.4.0\n"
                                "LIBGREET_VERSION=2.1.3\n");
}

/// A file of an image in buildah's store, read through a working container.
std::string file_in_image(const std::string& image, const std::string& path) {
  auto container = capture_output({"buildah", "from", "--quiet", "--", image});
  EXPECT_TRUE(container) << (container ? "" : container.error());
  if (!container) {
    return {};
  }
  std::string name(trim(*container));
  auto text = capture_output({"buildah", "run", "--isolation", "chroot", name, "--", "cat", path});
  run_captured({"buildah", "rm", name});
  return text ? *text : text.error();
}

/// The id of the image `name` names in buildah's store, empty when it names none.
std::string image_id_of(const std::string& name) {
  CapturedRun inspected = run_captured(
      {"buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}", "--", name});
  return inspected.exit.ok() ? std::string(trim(inspected.output)) : std::string();
}

const json* stage_named(const json& manifest, const std::string& name) {
  for (const auto& stage : manifest["stages"]) {
    if (stage["name"] == name) {
      return &stage;
    }
  }
  return nullptr;
}

/// Checkout A is held inside its toolchain stage until checkout B, the same chain with another
/// base, has run from end to end: B moves every stable name of the chain meanwhile, and A's
/// later stages still build on A's own images, named by id.
TEST(ImageIdentity, TwoCheckoutsOfOneChainRunningAtOnceNeverSeeEachOthersImages) {
  ChainDir a;
  ChainDir b;
  const std::string chain = "twin" + a.nonce();
  demo_as(a, chain, "A-" + a.nonce());
  demo_as(b, chain, "B-" + a.nonce());
  // A waits in its toolchain for a file of its context, bound into the step as it is now.
  std::string toolchain = a.read("stages/toolchain.Dockerfile");
  toolchain += "RUN --mount=type=bind,target=/ctx i=0; while [ ! -e /ctx/go ] && [ $i -lt 1200 ]; "
               "do sleep 0.1; i=$((i+1)); done\n";
  a.write("stages/toolchain.Dockerfile", toolchain);

  KilnResult a_result;
  std::thread first([&] { a_result = a.kiln({"run", "chain.toml"}); });
  // Until A is in its toolchain stage: base built and named by this checkout alone.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
  while (std::chrono::steady_clock::now() < deadline &&
         a.read("records/latest/driver.log").find("stage toolchain: attempt 1/3 start") ==
             std::string::npos) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  KilnResult b_result = b.kiln({"run", "chain.toml"});
  a.write("go", "");
  first.join();
  ASSERT_EQ(b_result.exit_code, 0) << b_result.output;
  ASSERT_EQ(a_result.exit_code, 0) << a_result.output;

  json a_run = a.latest_manifest();
  json b_run = b.latest_manifest();
  const json* a_base = stage_named(a_run, "base");
  const json* b_base = stage_named(b_run, "base");
  const json* a_final = stage_named(a_run, "final");
  const json* b_final = stage_named(b_run, "final");
  EXPECT_EQ((*a_base)["tag"], (*b_base)["tag"]) << "one chain: the same stable names";
  EXPECT_NE((*a_base)["work_tag"], (*b_base)["work_tag"]) << "two checkouts: work names apart";
  EXPECT_NE((*a_base)["image_id"], (*b_base)["image_id"]);
  // A's final image was built after B moved the chain's base name, on A's base by id.
  EXPECT_NE((*a_final)["command"].get<std::string>().find("base=container-image://" +
                                                          (*a_base)["image_id"].get<std::string>()),
            std::string::npos)
      << (*a_final)["command"];
  EXPECT_EQ(file_in_image((*a_final)["image_id"], "/etc/hello-release"),
            "hello-base A-" + a.nonce() + "\n");
  EXPECT_EQ(file_in_image((*b_final)["image_id"], "/etc/hello-release"),
            "hello-base B-" + a.nonce() + "\n");
  // The stable name of the base is the last green run's: A's, which ended last.
  EXPECT_EQ(file_in_image((*a_base)["tag"], "/etc/hello-release"),
            "hello-base A-" + a.nonce() + "\n");
  // A smoke stage's image is a test run: each checkout's keeps its work name, and no stable
  // name is moved to either.
  for (const json* run : {&a_run, &b_run}) {
    const json* smoke = stage_named(*run, "smoke");
    EXPECT_EQ((*smoke)["tag"], "");
    EXPECT_FALSE((*smoke)["tag_moved"].get<bool>());
    EXPECT_EQ(image_id_of((*smoke)["work_tag"]), (*smoke)["image_id"]);
  }
  EXPECT_EQ(image_id_of("localhost/" + chain + "-smoke:latest"), "");
}

/// A final image the residue gate refused is withdrawn: a later run that needs it finds no
/// image, where it used to build on the refused one.
TEST(ImageIdentity, ARefusedImageIsNoImageForALaterRun) {
  ChainDir dir;
  dir.copy_unique_demo();
  std::string final_file = dir.read("stages/final.Dockerfile");
  final_file += "RUN mkdir -p /root && echo "
                "'https://bot:ghp_0123456789abcdef0123456789abcdef0123@github.com' > "
                "/root/.git-credentials\n";
  dir.write("stages/final.Dockerfile", final_file);
  KilnResult refused = dir.kiln({"run", "chain.toml"});
  ASSERT_EQ(refused.exit_code, 3) << refused.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "refused:residue:final");
  const json* final_stage = stage_named(manifest, "final");
  auto inspected = run_captured({"buildah", "inspect", "--type", "image", "--",
                                 (*final_stage)["work_tag"].get<std::string>()});
  EXPECT_NE(inspected.exit.status_code(), 0) << "withdrawn: " << inspected.output;
  EXPECT_NE(dir.read("records/latest/driver.log").find("stage final: its image was withdrawn"),
            std::string::npos);

  KilnResult later = dir.kiln({"run", "chain.toml", "--from", "smoke"});
  EXPECT_EQ(later.exit_code, 2) << later.output;
  EXPECT_NE(later.output.find("stage 'smoke' needs 'final', which this run does not build, and "
                              "buildah has no image of it from an earlier run"),
            std::string::npos)
      << later.output;
}

/// A token passed as a build arg is shown redacted wherever kiln writes (the dry run, the
/// console, driver.log, the manifest, every record file), and the final image whose history
/// spells it out (a RUN used it) is refused.
TEST(ImageIdentity, ASecretBuildArgIsInNoRecordLogOrDryRunAndItsTraceInTheHistoryIsRefused) {
  ChainDir dir;
  dir.copy_unique_demo();
  const std::string token = "ghp_0123456789abcdef0123456789abcdefABCD";
  std::string final_file = dir.read("stages/final.Dockerfile");
  final_file.insert(final_file.find("CMD"), "ARG GITHUB_TOKEN\nRUN test -n \"$GITHUB_TOKEN\"\n");
  dir.write("stages/final.Dockerfile", final_file);
  KilnResult dry =
      dir.kiln({"run", "chain.toml", "--dry-run", "--build-arg", "GITHUB_TOKEN=" + token});
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_EQ(dry.output.find(token), std::string::npos) << dry.output;
  EXPECT_NE(dry.output.find("'GITHUB_TOKEN=<redacted: ghp_… (40 characters)>'"), std::string::npos)
      << dry.output;

  KilnResult run = dir.kiln({"run", "chain.toml", "--build-arg", "GITHUB_TOKEN=" + token});
  EXPECT_EQ(run.exit_code, 3) << run.output;
  EXPECT_EQ(run.output.find(token), std::string::npos) << run.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "refused:image-env:final");
  const json* final_stage = stage_named(manifest, "final");
  ASSERT_NE(final_stage, nullptr);
  EXPECT_NE((*final_stage)["gates"][0]["findings"][0].get<std::string>().find("history entry"),
            std::string::npos)
      << final_stage->dump();
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path() / "records")) {
    if (entry.is_regular_file()) {
      std::string text = dir.read(std::filesystem::relative(entry.path(), dir.path()).string());
      EXPECT_EQ(text.find(token), std::string::npos) << entry.path();
    }
  }
}

} // namespace
} // namespace kiln::testing
