// `kiln run` against real buildah: the demo chain, retries, refusals and interrupts.
#include <chrono>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "kiln_harness.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

TEST(Run, DemoChainBuildsThenServesEveryStepFromTheLayerCache) {
  ChainDir dir;
  dir.copy_unique_demo();

  KilnResult first = dir.kiln({"run", "chain.toml"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  json cold = dir.latest_manifest();
  EXPECT_EQ(cold["status"], "ok");
  ASSERT_EQ(cold["stages"].size(), 5u);
  for (const auto& stage : cold["stages"]) {
    EXPECT_EQ(stage["status"], "ok") << stage["name"];
    EXPECT_LT(stage["attempts"][0]["steps_cached"], stage["attempts"][0]["steps_run"])
        << stage["name"] << " was served from the cache on a cold run";
  }
  // The final image passed the image-env, residue and arch gates and holds its artifacts, as
  // the libraries' image holds theirs; the smoke stage ran its self-test, whose summary met the
  // chain's floors.
  const json& final_stage = cold["stages"][3];
  ASSERT_EQ(final_stage["gates"].size(), 4u) << final_stage;
  int gate = 0;
  for (const char* name : {"image-env", "residue", "arch", "artifacts"}) {
    EXPECT_EQ(final_stage["gates"][gate]["gate"], name);
    EXPECT_EQ(final_stage["gates"][gate]["subject"], "image of stage final");
    EXPECT_EQ(final_stage["gates"][gate]["verdict"], "pass") << final_stage["gates"][gate];
    ++gate;
  }
  const json& libs_gates = cold["stages"][2]["gates"];
  ASSERT_EQ(libs_gates.size(), 1u) << libs_gates;
  EXPECT_EQ(libs_gates[0]["gate"], "artifacts");
  EXPECT_EQ(libs_gates[0]["verdict"], "pass");
  EXPECT_NE(dir.read("records/latest/stages/smoke.attempt-1.log")
                .find("\n2 passed, 0 failed, 0 skipped\n"),
            std::string::npos);
  const json& smoke = cold["stages"][4]["smoke"];
  EXPECT_EQ(smoke["passed"], 2) << smoke;
  EXPECT_EQ(smoke["failed"], 0);
  EXPECT_EQ(smoke["skipped"], 0);
  EXPECT_EQ(smoke["min_passed"], 2);
  EXPECT_EQ(smoke["verdict"], "pass");

  KilnResult second = dir.kiln({"run", "chain.toml"});
  ASSERT_EQ(second.exit_code, 0) << second.output;
  json warm = dir.latest_manifest();
  EXPECT_NE(warm["run_id"], cold["run_id"]);
  for (size_t i = 0; i < warm["stages"].size(); ++i) {
    const json& stage = warm["stages"][i];
    EXPECT_GT(stage["attempts"][0]["steps_run"], 0) << stage["name"];
    if (stage["name"] == "smoke") {
      // A smoke stage builds with --no-cache: its tests run again on every run.
      EXPECT_EQ(stage["attempts"][0]["steps_cached"], 0);
      EXPECT_EQ(stage["smoke"]["passed"], 2);
      continue;
    }
    EXPECT_EQ(stage["attempts"][0]["steps_cached"], stage["attempts"][0]["steps_run"])
        << stage["name"] << " rebuilt a step on an unchanged chain";
    EXPECT_EQ(stage["outcome"], "reused") << stage["name"];
    EXPECT_EQ(stage["image_id"], cold["stages"][i]["image_id"]) << stage["name"];
  }
  EXPECT_NE(second.output.find("(all steps cached)"), std::string::npos);
  // The summary table and the record path close the console output.
  EXPECT_NE(
      second.output.find("stage        outcome  attempts  seconds  jobs  cache hits  smoke  image"),
      std::string::npos)
      << second.output;
  EXPECT_NE(second.output.find("  -  2/0/0  "), std::string::npos) << "the smoke stage's counts";
  EXPECT_NE(second.output.find("critical path (*) base -> toolchain -> libs -> final -> smoke: "),
            std::string::npos)
      << second.output;
  EXPECT_NE(second.output.find("record: " + (dir.path() / "records" / "runs").string()),
            std::string::npos);
}

TEST(Run, CompileErrorFailsTheStageAtOnce) {
  ChainDir dir;
  write_two_stage_chain(dir, "RUN echo 'lib.c:3:1: error: expected ; before }' >&2; exit 1\n");

  KilnResult result = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "failed:work");
  const json& work = manifest["stages"][1];
  EXPECT_EQ(work["status"], "failed");
  ASSERT_EQ(work["attempts"].size(), 1u);
  EXPECT_EQ(work["attempts"][0]["verdict"], "permanent");
  EXPECT_EQ(work["attempts"][0]["exit_code"], 1);
  // The console shows the tail and where the whole log is; the log holds the compiler's line.
  EXPECT_NE(result.output.find("lib.c:3:1: error"), std::string::npos) << result.output;
  EXPECT_NE(dir.read("records/latest/stages/work.attempt-1.log").find("lib.c:3:1: error"),
            std::string::npos);
  EXPECT_NE(dir.read("records/latest/driver.log").find("stage work: attempt 1/3 failed (exit 1)"),
            std::string::npos);
}

TEST(Run, TheFailureSummaryShowsAnErrorThatScrolledFarAboveTheTail) {
  ChainDir dir;
  // As at -j16: the first error, then pages of other jobs' output before the build stops. One
  // stream: the engine does not keep the order of a step's stdout and stderr between them.
  write_two_stage_chain(dir, "RUN echo 'lib.c:3:1: error: expected ; before }'; "
                             "i=0; while [ $i -lt 60 ]; do echo \"[$i/60] Building C object "
                             "other_$i.o\"; i=$((i+1)); done; exit 1\n");
  KilnResult result = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  auto errors = result.output.find("kiln: [work] the failing step (RUN echo 'lib.c:3:1: error: "
                                   "expected ; before }'; i=0;");
  ASSERT_NE(errors, std::string::npos) << result.output;
  EXPECT_NE(result.output.find(" printed 1 error line(s):\n    lib.c:3:1: error: expected ; before "
                               "}\n",
                               errors),
            std::string::npos)
      << result.output;
  auto tail = result.output.find("kiln: last 20 lines of the engine output");
  EXPECT_GT(tail, errors) << result.output;
  EXPECT_EQ(result.output.find("\n    lib.c:3:1", tail), std::string::npos)
      << "the tail alone would not have shown it";
}

TEST(Run, TransientFailureIsRetriedAndRecorded) {
  ChainDir dir;
  // A cache mount outlives a failed RUN, so the step can tell its first attempt from its second.
  write_two_stage_chain(dir, "RUN --mount=type=cache,id=flake-" + dir.nonce() +
                                 ",target=/state if [ -e /state/tried ]; then echo fetched; "
                                 "else touch /state/tried; "
                                 "echo 'curl: (56) Recv failure: Connection reset by peer'; "
                                 "exit 1; fi\n");

  KilnResult result = dir.kiln({"run", "chain.toml"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  json work = dir.latest_manifest()["stages"][1];
  EXPECT_EQ(work["status"], "ok");
  ASSERT_EQ(work["attempts"].size(), 2u);
  EXPECT_EQ(work["attempts"][0]["verdict"], "retry");
  EXPECT_EQ(work["attempts"][0]["transient_class"], "fetch-network");
  EXPECT_EQ(work["attempts"][0]["matched_line"],
            "curl: (56) Recv failure: Connection reset by peer");
  EXPECT_EQ(work["attempts"][1]["verdict"], "ok");
  // Each attempt keeps its own log.
  EXPECT_NE(dir.read("records/latest/stages/work.attempt-1.log").find("Recv failure"),
            std::string::npos);
  EXPECT_NE(dir.read("records/latest/stages/work.attempt-2.log").find("fetched"),
            std::string::npos);
  std::string driver_log = dir.read("records/latest/driver.log");
  EXPECT_NE(driver_log.find("class fetch-network, matched line: \"curl: (56) Recv failure: "
                            "Connection reset by peer\""),
            std::string::npos)
      << driver_log;
}

TEST(Run, IdenticalTransientFailureIsRefusedOnTheSecondAttempt) {
  ChainDir dir;
  // The step before the failing one is built on attempt 1 and served from the cache on attempt
  // 2: its lines differ, and must not hide that the failing step failed identically.
  write_two_stage_chain(dir, "RUN echo " + dir.nonce() +
                                 " > /fresh\n"
                                 "RUN echo 'curl: (28) Operation timed out after 30000 "
                                 "milliseconds with 0 bytes received'; exit 28\n");

  KilnResult result = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  json work = dir.latest_manifest()["stages"][1];
  ASSERT_EQ(work["attempts"].size(), 2u) << "the budget of 3 must not be burned";
  EXPECT_EQ(work["attempts"][0]["verdict"], "retry");
  EXPECT_EQ(work["attempts"][1]["verdict"], "refused-identical");
  EXPECT_NE(work["attempts"][1]["reason"].get<std::string>().find("attempt 1"), std::string::npos)
      << work["attempts"][1]["reason"];
  EXPECT_NE(dir.read("records/latest/driver.log").find("refused-identical"), std::string::npos);
}

TEST(Run, ATestSuitePrintingAnEnginesErrorsAndFailingIsNotRetried) {
  ChainDir dir;
  // The words of buildah's and BuildKit's own flakes, printed by the step's command: its own
  // failure, which a retry would only repeat.
  write_two_stage_chain(dir, "RUN echo " + dir.nonce() +
                                 "; echo 'test_stream FAILED: unexpected EOF'; "
                                 "echo 'E   sqlite3.OperationalError: database is locked'; "
                                 "echo 'failed to mount /data'; exit 1\n");
  KilnResult result = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  json work = dir.latest_manifest()["stages"][1];
  ASSERT_EQ(work["attempts"].size(), 1u) << work.dump(2);
  EXPECT_EQ(work["attempts"][0]["verdict"], "permanent");
  EXPECT_EQ(work["attempts"][0]["transient_class"], "");
}

TEST(Run, InterruptStopsTheEngineAndRecordsIt) {
  ChainDir dir;
  // A sleep long and odd enough to be recognised in the process table.
  std::string sleep = "sleep 7" + dir.nonce().substr(0, 3);
  write_two_stage_chain(dir, "RUN echo started; " + sleep + "\n");

  CancelToken ctrl_c;
  std::thread interrupter([&] {
    // Wait until the RUN is really running, then press Ctrl-C.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (processes_matching(sleep).empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ctrl_c.cancel();
  });
  KilnResult result = dir.kiln({"run", "chain.toml"}, &ctrl_c);
  interrupter.join();

  EXPECT_EQ(result.exit_code, 130) << result.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "interrupted");
  EXPECT_FALSE(manifest["ended"].get<std::string>().empty());
  EXPECT_EQ(manifest["stages"][1]["status"], "interrupted");
  EXPECT_EQ(manifest["stages"][1]["attempts"][0]["verdict"], "interrupted");
  EXPECT_NE(dir.read("records/latest/stages/work.attempt-1.log").find("started"),
            std::string::npos);
  // SIGKILL lands at once but a process takes a moment to leave the table.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((!processes_matching(sleep).empty() ||
          !processes_matching(dir.path().string() + "/work.Dockerfile").empty()) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(processes_matching(sleep).empty()) << "the RUN outlived kiln";
  EXPECT_TRUE(processes_matching(dir.path().string() + "/work.Dockerfile").empty())
      << "buildah outlived kiln";
}

TEST(Run, SecretReachesTheBuildButNoCommandLineOrRecord) {
  ChainDir dir;
  std::string value = "s3cret-" + dir.nonce();
  dir.write("base.Dockerfile", k_base_dockerfile);
  // The RUN prints a digest of the secret: the value itself must appear nowhere.
  dir.write("work.Dockerfile", "FROM base\nRUN --mount=type=secret,id=token "
                               "md5sum /run/secrets/token\n");
  std::string digest =
      capture_output({"sh", "-c", "printf %s " + value + " | md5sum"})->substr(0, 32);
  dir.write("chain.toml", "[chain]\nname = \"t" + dir.nonce() +
                              "\"\n[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n"
                              "[[stage]]\nname = \"work\"\ndockerfile = \"work.Dockerfile\"\n"
                              "needs = [\"base\"]\nsecrets = [{ id = \"token\", env = "
                              "\"KILN_IT_TOKEN\" }]\n");
  ::setenv("KILN_IT_TOKEN", value.c_str(), 1);
  KilnResult result = dir.kiln({"run", "chain.toml"});
  ::unsetenv("KILN_IT_TOKEN");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(dir.read("records/latest/stages/work.attempt-1.log").find(digest), std::string::npos);
  json work = dir.latest_manifest()["stages"][1];
  EXPECT_NE(work["command"].get<std::string>().find("--secret id=token,env=KILN_IT_TOKEN"),
            std::string::npos);
  EXPECT_EQ(dir.read("records/latest/manifest.json").find(value), std::string::npos);
  EXPECT_EQ(dir.read("records/latest/driver.log").find(value), std::string::npos);
  EXPECT_EQ(result.output.find(value), std::string::npos);
}

TEST(Run, UnsetSecretVariableIsAConfigurationError) {
  ChainDir dir;
  dir.write("base.Dockerfile", k_base_dockerfile);
  dir.write("chain.toml", "[chain]\nname = \"t" + dir.nonce() +
                              "\"\n[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n"
                              "secrets = [{ id = \"token\", env = \"KILN_IT_UNSET\" }]\n");
  KilnResult result = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("chain.toml:6:12: error: stage 'base' secret 'token'"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("$KILN_IT_UNSET, which is not set"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "records")) << "nothing may be recorded";
}

} // namespace
} // namespace kiln::testing
