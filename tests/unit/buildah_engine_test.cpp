// The buildah backend against its recorded output (tests/fixtures/buildah-1.28.2).
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "engine/buildah_engine.h"
#include "util/process.h"

namespace kiln {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(KILN_TEST_FIXTURES) + "/buildah-1.28.2/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Feed a recording through the parser the way the run loop does: chunks, then lines.
BuildProgress replay(const std::string& text, int* changes = nullptr) {
  auto output = BuildahEngine("chroot").read_output();
  int changed = 0;
  LineSplitter lines([&](std::string_view line) { changed += output->feed(line) ? 1 : 0; });
  // Odd-sized chunks so lines straddle chunk boundaries.
  for (size_t i = 0; i < text.size(); i += 7) {
    lines.feed(std::string_view(text).substr(i, 7));
  }
  lines.finish();
  if (changes != nullptr) {
    *changes = changed;
  }
  return output->progress();
}

TEST(BuildahEngine, FreshBuildCountsStepsAndTheImageId) {
  int changes = 0;
  BuildProgress p = replay(fixture("build-fresh.stdout"), &changes);
  EXPECT_EQ(p.step, 5);
  EXPECT_EQ(p.steps, 5);
  EXPECT_EQ(p.build_stages, 0);
  EXPECT_EQ(p.instruction, "RUN echo \"$GREETING\" > /greeting && cat /greeting");
  EXPECT_EQ(p.steps_run, 4); // FROM makes no layer
  EXPECT_EQ(p.steps_cached, 0);
  EXPECT_EQ(p.image_id, "edd3fecb6f7f42e04e1369b2d08e2bb268013095c0d7696a7b890a54a5b34689");
  EXPECT_EQ(changes, 6); // five steps and the id
}

TEST(BuildahEngine, CachedBuildCountsEveryLayerStepAsCached) {
  BuildProgress p = replay(fixture("build-cached.stdout"));
  EXPECT_EQ(p.steps_run, 4);
  EXPECT_EQ(p.steps_cached, 4);
  // The same image as the fresh build: the cache served every layer.
  EXPECT_EQ(p.image_id, "edd3fecb6f7f42e04e1369b2d08e2bb268013095c0d7696a7b890a54a5b34689");
}

TEST(BuildahEngine, KilnsOwnLabelStepsAreNotTheDockerfilesSteps) {
  // buildah makes each --label a LABEL step after the Dockerfile's last; the step counts are
  // the Dockerfile's own, built or cached.
  auto output = BuildahEngine("chroot").read_output();
  LineSplitter lines([&](std::string_view line) { output->feed(line); });
  lines.feed(fixture("build-labels-fresh.combined"));
  lines.finish();
  EXPECT_EQ(output->progress().steps_run, 4);
  EXPECT_EQ(output->progress().steps_cached, 2); // COPY and the RUN after it, from an earlier build
  ASSERT_EQ(output->steps().size(), 4u);
  EXPECT_EQ(output->steps().back().instruction,
            "RUN echo \"$GREETING\" > /greeting && cat /greeting");
  EXPECT_EQ(output->progress().image_id,
            "393454980bc80cbbe9fbf39953c28a28b1cc4b5c4379301d44c4d27a7e9c1cbe");

  BuildProgress cached = replay(fixture("build-labels-cached.combined"));
  EXPECT_EQ(cached.steps_run, 4);
  EXPECT_EQ(cached.steps_cached, 4);
}

TEST(BuildahEngine, MultiStageBuildReportsTheDockerfileStage) {
  auto output = BuildahEngine("chroot").read_output();
  ASSERT_TRUE(output->feed("[1/2] STEP 2/2: RUN echo a > /a"));
  BuildProgress p = output->progress();
  EXPECT_EQ(p.build_stage, 1);
  EXPECT_EQ(p.build_stages, 2);
  EXPECT_EQ(p.step, 2);
  EXPECT_EQ(p.instruction, "RUN echo a > /a");
  p = replay(fixture("build-multistage.stdout"));
  EXPECT_EQ(p.build_stage, 2);
  EXPECT_EQ(p.build_stages, 2);
  EXPECT_EQ(p.step, 2);
  EXPECT_EQ(p.steps, 2);
  EXPECT_EQ(p.steps_run, 2);
  EXPECT_EQ(p.image_id, "c1ffc3c7ddb452ff0e34d3746f9f9e531ff5024ecbb2c02c6e9d114884cfb435");
}

TEST(BuildahEngine, FailedBuildHasNoImageId) {
  BuildProgress p = replay(fixture("build-fail-run.combined"));
  EXPECT_EQ(p.step, 2);
  EXPECT_TRUE(p.image_id.empty());
}

TEST(BuildahEngine, LinesThatSayNothingChangeNothing) {
  auto output = BuildahEngine("chroot").read_output();
  for (const char* line : {"hi", "COMMIT localhost/kt-base:dev", "--> 000828b76f7", "STEP x/5: RUN",
                           "[1/2 STEP 1/2: FROM a", "error: foo.c:3: undefined",
                           "Successfully tagged localhost/kt-base:dev"}) {
    EXPECT_FALSE(output->feed(line)) << line;
  }
  EXPECT_EQ(output->progress().step, 0);
}

TEST(BuildahEngine, EvidenceIsTheFailingStepWithoutItsEcho) {
  auto output = BuildahEngine("chroot").read_output();
  for (const char* line :
       {"STEP 1/2: RUN echo connection reset by peer", "connection reset by peer",
        "STEP 2/2: RUN make", "cc: error: foo.c", "Error: building at STEP \"RUN make\""}) {
    output->feed(line);
  }
  EXPECT_EQ(output->evidence(), (Tail{"cc: error: foo.c"}));
}

TEST(BuildahEngine, EngineEvidenceIsBuildahsOwnLinesInARunAndEveryLineElsewhere) {
  auto output = BuildahEngine("chroot").read_output();
  for (const char* line :
       {"STEP 1/2: FROM 127.0.0.1:5000/base", "Trying to pull 127.0.0.1:5000/base...",
        "STEP 2/2: RUN ./run-tests", "test_stream FAILED: unexpected EOF",
        "time=\"2026-12-02T14:17:15Z\" level=error msg=\"unmounting: device or resource busy\"",
        "Error: building at STEP \"RUN ./run-tests\": exit status 1"}) {
    output->feed(line);
  }
  EXPECT_EQ(output->evidence(),
            (Tail{"test_stream FAILED: unexpected EOF",
                  "time=\"2026-12-02T14:17:15Z\" level=error msg=\"unmounting: device or resource "
                  "busy\""}));
  EXPECT_EQ(output->engine_evidence(),
            (Tail{"time=\"2026-12-02T14:17:15Z\" level=error msg=\"unmounting: device or resource "
                  "busy\""}));
  // Before any RUN (a pull for FROM), every line is buildah's.
  auto pulling = BuildahEngine("chroot").read_output();
  for (const char* line : {"STEP 1/2: FROM 127.0.0.1:5000/base",
                           "Error: creating build container: reading blob: unexpected EOF"}) {
    pulling->feed(line);
  }
  EXPECT_EQ(pulling->engine_evidence(),
            (Tail{"Error: creating build container: reading blob: unexpected EOF"}));
}

TEST(BuildahEngine, ArgvSpellsEveryPartOfTheRequest) {
  BuildahEngine engine("chroot");
  BuildRequest request;
  request.dockerfile = "/c/stages/libs.Dockerfile";
  request.context = "/c";
  request.target = "built";
  request.tag = "localhost/hello-libs:latest";
  request.build_args = {{"A", "1"}, {"B", "x y"}};
  request.contexts = {{"toolchain", "localhost/hello-toolchain:latest", {}, {}, {}}};
  request.secrets = {{"token", "TOKEN", {}, {}}, {"netrc", {}, "/home/u/.netrc", {}}};
  request.tools = "/r/tools";
  std::vector<std::string> expected = {
      "buildah",
      "build",
      "--isolation",
      "chroot",
      "--layers",
      "--force-rm",
      "--file",
      "/c/stages/libs.Dockerfile",
      "--tag",
      "localhost/hello-libs:latest",
      "--target",
      "built",
      "--build-context",
      "toolchain=container-image://localhost/hello-toolchain:latest",
      "--build-context",
      "kiln-tools=/r/tools",
      "--build-arg",
      "A=1",
      "--build-arg",
      "B=x y",
      "--secret",
      "id=token,env=TOKEN",
      "--secret",
      "id=netrc,src=/home/u/.netrc",
      "--",
      "/c"};
  EXPECT_EQ(engine.build_argv(request), expected);
  // A stage handed over by the image this run built, not by a tag another run could move.
  request.contexts[0].identity = "67a6db1cd903b38d5660dd0149a0e24d6d52fcf61f245939ae0a6b98f586dcd2";
  EXPECT_EQ(engine.build_argv(request)[13], "toolchain=container-image://"
                                            "67a6db1cd903b38d5660dd0149a0e24d6d52fcf61f245939ae0a"
                                            "6b98f586dcd2");
}

} // namespace
} // namespace kiln
