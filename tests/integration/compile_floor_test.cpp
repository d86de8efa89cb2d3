// kiln-cc inside a real buildah build, and the compile-request floor that catches a compile
// which bypassed the cache. The build image is FROM scratch plus busybox; the host's toolchain
// (gcc, sccache) is bind-mounted at /usr for the one RUN that compiles.
#include <gtest/gtest.h>

#include "kiln_harness.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

/// A chain whose `compile` stage compiles one file with `compile_command` (`CC` stands for the
/// compiler invocation) and requires at least one compile request through the cache.
void write_compile_chain(const ChainDir& dir, const std::string& compile_command) {
  dir.write("base.Dockerfile", std::string(k_base_dockerfile) +
                                   "RUN ln -s usr/lib /lib && ln -s usr/lib64 /lib64 && "
                                   "mkdir -p /src /tmp\n");
  dir.write("compile.Dockerfile",
            "FROM base\n"
            "RUN --mount=type=bind,source=usr,target=/usr \\\n"
            "    --mount=type=bind,from=kiln-tools,source=kiln-cc,target=/kiln/kiln-cc \\\n"
            "    export PATH=/kiln:/usr/bin:/bin SCCACHE_DIR=/tmp/sccache && \\\n"
            "    eval \"$(kiln-cc session start)\" && \\\n"
            "    printf 'int f(void) { return " +
                dir.nonce() +
                "; }\\n' > /src/f.c && \\\n"
                "    " +
                compile_command +
                " -c /src/f.c -o /src/f.o && \\\n"
                "    kiln-cc session stats && kiln-cc session stop\n");
  // The compile stage's context is the host's root, so `source=usr` is the host's /usr.
  dir.write("chain.toml", "[chain]\nname = \"cc" + dir.nonce() +
                              "\"\n[defaults]\ncooldown_s = 0\n"
                              "[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n"
                              "[[stage]]\nname = \"compile\"\ndockerfile = \"compile.Dockerfile\"\n"
                              "context = \"/\"\nneeds = [\"base\"]\nmin_compile_requests = 1\n");
}

TEST(CompileFloor, CompilesThroughKilnCcInsideTheBuildAreCounted) {
  ChainDir dir;
  write_compile_chain(dir, "kiln-cc gcc");
  KilnResult result = dir.kiln({"run", "chain.toml"});
  ASSERT_EQ(result.exit_code, 0) << result.output
                                 << dir.read("records/latest/stages/compile.attempt-1.log");
  json compile = dir.latest_manifest()["stages"][1];
  EXPECT_EQ(compile["status"], "ok");
  const json& stats = compile["attempts"][0]["compile"];
  ASSERT_TRUE(stats.is_object()) << compile.dump(2);
  EXPECT_EQ(stats["compile_requests"], 1);
  EXPECT_EQ(stats["misses"], 1);
  EXPECT_EQ(stats["bypasses"], 0);
  EXPECT_EQ(stats["reports"], 1);

  // Unchanged, the stage is served from the layer cache: nothing compiles and nothing reports,
  // which is no bypass.
  KilnResult again = dir.kiln({"run", "chain.toml"});
  ASSERT_EQ(again.exit_code, 0) << again.output;
  json cached = dir.latest_manifest()["stages"][1];
  EXPECT_EQ(cached["attempts"][0]["steps_cached"], cached["attempts"][0]["steps_run"]);
  EXPECT_TRUE(cached["attempts"][0]["compile"].is_null());
}

TEST(CompileFloor, ACompileThatBypassedTheCacheFailsTheStage) {
  ChainDir dir;
  write_compile_chain(dir, "gcc"); // the launcher is mounted but not used
  KilnResult result = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "failed:compile");
  const json& compile = manifest["stages"][1];
  EXPECT_EQ(compile["status"], "failed");
  ASSERT_EQ(compile["attempts"].size(), 1u) << "a floor failure is not retried";
  EXPECT_EQ(compile["attempts"][0]["verdict"], "ok");
  EXPECT_EQ(compile["attempts"][0]["compile"]["compile_requests"], 0);
  std::string failure = compile["failure"];
  EXPECT_NE(failure.find("only 0 compile request(s) reached the compile cache, below "
                         "min_compile_requests 1: the compiles bypassed the cache"),
            std::string::npos)
      << failure;
  EXPECT_NE(result.output.find("the compiles bypassed the cache"), std::string::npos);
  EXPECT_NE(dir.read("records/latest/driver.log").find("stage compile: attempt 1/3 built, but"),
            std::string::npos);
}

TEST(CompileFloor, AStageThatReportsNothingFailsTheFloor) {
  ChainDir dir;
  // A step that runs (not served from the cache) but reports nothing.
  dir.write("base.Dockerfile", std::string(k_base_dockerfile) + "RUN echo " + dir.nonce() + "\n");
  dir.write("chain.toml", "[chain]\nname = \"cc" + dir.nonce() +
                              "\"\n[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n"
                              "min_compile_requests = 5\n");
  KilnResult result = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(dir.latest_manifest()["stages"][0]["failure"].get<std::string>().find(
                "no step reported compile-cache stats"),
            std::string::npos);
}

} // namespace
} // namespace kiln::testing
