// A newcomer's chain: `kiln init` on the demo's Dockerfiles, the demo chain without its needs
// lines, and a matrix stage, each judged by the plan `kiln run --dry-run` prints.
#include <filesystem>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "kiln_harness.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

/// A dry run's plan, with what differs between two folders of one chain made alike: the
/// folder, and the records key in each work tag.
std::string plan(const ChainDir& dir, const std::string& chain, const std::string& folder = "") {
  KilnResult result = dir.kiln({"run", chain, "--dry-run"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  std::string out = result.output;
  if (!folder.empty()) {
    for (size_t at = out.find(folder); at != std::string::npos; at = out.find(folder, at)) {
      out.replace(at, folder.size(), dir.path().string());
    }
  }
  return std::regex_replace(out, std::regex("-kiln-[0-9a-f]+"), "-kiln-KEY");
}

TEST(Init, TheDemoDockerfilesMakeTheDemoPlanAndRunGreen) {
  ChainDir dir;
  dir.copy_demo();
  // The demo's Dockerfiles, its sources and its pins, in a folder of their own; the folder
  // names the chain, unique to this test so its tags are nobody else's.
  const std::string name = "hello" + dir.nonce();
  const fs::path folder = dir.path() / name;
  fs::create_directories(folder);
  for (const char* part : {"stages", "src", "versions.env", "busybox"}) {
    fs::copy(dir.path() / part, folder / part, fs::copy_options::recursive);
  }
  KilnResult init = dir.kiln({"init", name});
  ASSERT_EQ(init.exit_code, 0) << init.output;
  EXPECT_NE(init.output.find("5 stage(s): base, toolchain, libs, final, smoke"), std::string::npos)
      << init.output;
  EXPECT_NE(init.output.find("kept " + name + "/versions.env"), std::string::npos) << init.output;
  std::string written = dir.read(name + "/chain.toml");
  EXPECT_NE(written.find("kind = \"smoke\""), std::string::npos) << written;
  // LIB_FLAGS has no default and no pin: the chain shows where to set it.
  EXPECT_NE(written.find("# build_args = { LIB_FLAGS = \"\" }"), std::string::npos) << written;

  // It never overwrites what it wrote, or anything else.
  KilnResult again = dir.kiln({"init", name});
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("never overwrites"), std::string::npos) << again.output;
  EXPECT_EQ(dir.read(name + "/chain.toml"), written);

  KilnResult lint = dir.kiln({"lint", "--chain", name + "/chain.toml"});
  EXPECT_EQ(lint.exit_code, 0) << lint.output;

  // The same plan as the hand-written chain, but for the one value no Dockerfile holds: the
  // demo chain's own build arg for libs.
  std::string by_hand = plan(dir, "chain.toml");
  const std::string lib_flags = " --build-arg LIB_FLAGS=-O2";
  ASSERT_NE(by_hand.find(lib_flags), std::string::npos) << by_hand;
  by_hand.erase(by_hand.find(lib_flags), lib_flags.size());
  std::string by_init = plan(dir, name + "/chain.toml", folder.string());
  for (size_t at = by_init.find(name); at != std::string::npos; at = by_init.find(name, at)) {
    by_init.replace(at, name.size(), "hello");
  }
  EXPECT_EQ(by_init, by_hand);

  KilnResult run = dir.kiln({"run", name + "/chain.toml"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  dir.remove_images(folder / "records");
}

TEST(Init, AFolderWithoutDockerfilesIsRefused) {
  ChainDir dir;
  fs::create_directories(dir.path() / "empty");
  KilnResult init = dir.kiln({"init", "empty"});
  EXPECT_EQ(init.exit_code, 2) << init.output;
  EXPECT_NE(init.output.find("no Dockerfile under empty"), std::string::npos) << init.output;
  EXPECT_FALSE(fs::exists(dir.path() / "empty" / "chain.toml"));
}

TEST(InferredNeeds, TheDemoChainWithoutNeedsLinesPlansAsBefore) {
  ChainDir dir;
  dir.copy_demo();
  std::string chain = dir.read("chain.toml");
  std::string without = std::regex_replace(chain, std::regex("\nneeds = [^\n]*"), "");
  ASSERT_NE(without, chain);
  dir.write("inferred.toml", without);
  EXPECT_EQ(plan(dir, "inferred.toml"), plan(dir, "chain.toml"));
}

TEST(Matrix, ThreeLibrariesFromOneTableEachWithItsArgs) {
  ChainDir dir;
  dir.copy_demo();
  dir.write("stages/lib.Dockerfile", "FROM toolchain\nARG LIB\nRUN echo \"$LIB\" > /lib-name\n");
  dir.write("chain.toml", dir.read("chain.toml") +
                              "\n[[stage]]\nname = \"lib-${lib}\"\n"
                              "dockerfile = \"stages/lib.Dockerfile\"\n"
                              "build_args = { LIB = \"${lib}\" }\n"
                              "matrix = { lib = [\"zlib\", \"png\", \"jpeg\"] }\n");
  std::string out = plan(dir, "chain.toml");
  for (const char* lib : {"zlib", "png", "jpeg"}) {
    SCOPED_TRACE(lib);
    std::smatch line;
    ASSERT_TRUE(std::regex_search(
        out, line, std::regex("# \\[[0-9]/8\\] lib-" + std::string(lib) + "\n([^\n]*)\n")))
        << out;
    std::string command = line[1];
    EXPECT_NE(command.find("--build-arg LIB=" + std::string(lib) + " "), std::string::npos)
        << command;
    EXPECT_NE(command.find("--tag localhost/hello-lib-" + std::string(lib) + ":latest"),
              std::string::npos)
        << command;
    EXPECT_NE(command.find("'toolchain=container-image://"), std::string::npos) << command;
  }
}

} // namespace
} // namespace kiln::testing
