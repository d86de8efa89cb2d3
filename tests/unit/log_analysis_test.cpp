// kiln logs analyze's library on the recorded BuildKit and buildah logs, and on the composed
// logs of tests/fixtures/forensics for what no recording shows.
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "driver/run_folder.h"
#include "forensics/line_times.h"
#include "forensics/log_analysis.h"
#include "forensics/signals.h"
#include "forensics/warnings.h"
#include "temp_dir.h"

namespace kiln::forensics {
namespace {

const std::string k_fixtures = KILN_TEST_FIXTURES;
const std::string k_buildkit = k_fixtures + "/buildkit-v0.11.6/";
const std::string k_buildah = k_fixtures + "/buildah-1.28.2/";
const std::string k_composed = k_fixtures + "/forensics/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

LogResult analyze(const std::string& path, const Options& options = {}) {
  auto result = analyze_log_file(path, path, options);
  EXPECT_TRUE(result) << (result ? "" : result.error());
  return result ? *result : LogResult{};
}

nlohmann::json step_table_json(LogResult log) {
  RunAnalysis run;
  run.logs.push_back(std::move(log));
  return to_json(run)["logs"][0];
}

struct Row {
  std::string id;
  std::string name;
  bool cached;
  StepState state;
  std::optional<double> seconds;
  std::optional<double> idle_tail;
  long output_lines;
};

void expect_steps(const LogResult& log, const std::vector<Row>& rows) {
  ASSERT_EQ(log.steps.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const StepResult& step = log.steps[i];
    SCOPED_TRACE(rows[i].id);
    EXPECT_EQ(step.id, rows[i].id);
    EXPECT_EQ(step.name, rows[i].name);
    EXPECT_EQ(step.cached, rows[i].cached);
    EXPECT_EQ(step.state, rows[i].state);
    EXPECT_EQ(step.seconds, rows[i].seconds);
    EXPECT_EQ(step.idle_tail_seconds, rows[i].idle_tail);
    EXPECT_EQ(step.output_lines, rows[i].output_lines);
  }
}

constexpr auto k_done = StepState::done;
constexpr auto k_cached = StepState::cached;
constexpr auto k_error = StepState::error;
const std::optional<double> k_none;

const std::string k_run6 = "[work 1/2] RUN --mount=type=cache,id=demo-cache,target=/cache sh -c "
                           "'for i in 1 2 3 4 5; do echo \"$GREETING line $i\"; sleep 0.2; done; "
                           "echo warn: something >&2; date > /cache/stamp'";
const std::string k_run7 = "[work 2/2] RUN --mount=type=secret,id=token sh -c 'test -s "
                           "/run/secrets/token && echo token-present || echo token-absent'";

// ----- recorded BuildKit -----

TEST(LogAnalysisBuildKit, FreshBuildStepTable) {
  LogResult log = analyze(k_buildkit + "build-fresh.stderr");
  EXPECT_EQ(log.format, "buildkit");
  EXPECT_TRUE(log.timed);
  EXPECT_FALSE(log.line_times);
  EXPECT_FALSE(log.failed);
  EXPECT_FALSE(log.clipped);
  EXPECT_EQ(log.lines, 47);
  EXPECT_EQ(log.bytes, 1863u);
  expect_steps(
      log,
      {{"#1", "[internal] load .dockerignore", false, k_done, 0.0, k_none, 0},
       {"#2", "[internal] load build definition from Dockerfile", false, k_done, 0.0, k_none, 0},
       {"#3", "[internal] load build context", false, k_done, 0.0, k_none, 0},
       {"#4", "[base 1/2] COPY busybox /bin/busybox", true, k_cached, k_none, k_none, 0},
       {"#5",
        "[base 2/2] RUN [\"/bin/busybox\", \"sh\", \"-c\", \"/bin/busybox --install -s /bin\"]",
        false, k_done, 0.1, k_none, 0},
       {"#6", k_run6.substr(0, 200), false, k_done, 1.1, 0.031, 6},
       {"#7", k_run7, false, k_done, 0.1, 0.046, 1},
       {"#8", "exporting to oci image format", false, k_done, 0.1, k_none, 0},
       {"#9", "exporting content cache", false, k_done, 0.1, k_none, 0}});
  EXPECT_EQ(log.steps[5].stage, "work");
  EXPECT_TRUE(log.steps[5].dockerfile_step);
  EXPECT_FALSE(log.steps[7].dockerfile_step);
  EXPECT_EQ(log.steps[7].stage, "");
  // No sidecar: BuildKit gives durations, not where in the attempt a step ran.
  EXPECT_EQ(log.steps[5].start, k_none);
  EXPECT_EQ(log.steps[5].end, k_none);
  for (const auto& step : log.steps) {
    EXPECT_FALSE(step.compile) << step.id;
    EXPECT_FALSE(step.compile_bypass) << step.id;
    EXPECT_EQ(step.warnings.total, 0) << step.id;
    EXPECT_TRUE(step.errors.empty()) << step.id;
  }
}

TEST(LogAnalysisBuildKit, CachedBuildCountsEveryStepCached) {
  LogResult log = analyze(k_buildkit + "build-cached.stderr");
  expect_steps(
      log,
      {{"#1", "[internal] load .dockerignore", false, k_done, 0.0, k_none, 0},
       {"#2", "[internal] load build definition from Dockerfile", false, k_done, 0.0, k_none, 0},
       {"#3", "importing cache manifest from local:10372194569593643710", false, k_done, 0.0,
        k_none, 0},
       {"#4", "[internal] load build context", false, k_done, 0.0, k_none, 0},
       {"#5", "[base 1/2] COPY busybox /bin/busybox", true, k_cached, k_none, k_none, 0},
       {"#6", k_run6.substr(0, 200), true, k_cached, k_none, k_none, 0},
       {"#7",
        "[base 2/2] RUN [\"/bin/busybox\", \"sh\", \"-c\", \"/bin/busybox --install -s /bin\"]",
        true, k_cached, k_none, k_none, 0},
       {"#8", k_run7, true, k_cached, k_none, k_none, 0},
       {"#9", "exporting to oci image format", false, k_done, 0.0, k_none, 0}});
  RunAnalysis run;
  run.logs.push_back(log);
  summarize(run);
  ASSERT_EQ(run.stages.size(), 1u);
  EXPECT_EQ(run.stages[0].steps, 4);
  EXPECT_EQ(run.stages[0].steps_cached, 4);
}

TEST(LogAnalysisBuildKit, ClippedStepIsNamedWithTheMarker) {
  LogResult log = analyze(k_buildkit + "build-clipped.stderr");
  EXPECT_TRUE(log.clipped);
  ASSERT_EQ(log.clips.size(), 1u);
  EXPECT_EQ(log.clips[0].id, "#5");
  EXPECT_EQ(log.clips[0].line, "[output clipped, log limit 2KiB reached]");
  ASSERT_EQ(log.steps.size(), 5u);
  const StepResult& step = log.steps[4];
  EXPECT_EQ(step.id, "#5");
  EXPECT_TRUE(step.clipped);
  EXPECT_FALSE(log.steps[3].clipped);
  // 38 lines reached the log before the limit (the 38th cut mid-line); the marker is none.
  EXPECT_EQ(step.output_lines, 38);
  EXPECT_EQ(step.seconds, 0.1);
  EXPECT_EQ(step.idle_tail_seconds, 0.027);
  // `warning: line N of a noisy compile -Wunused-parameter` is no compiler's warning line:
  // no `<where>: warning:` and no [-W...] class.
  EXPECT_EQ(step.warnings.total, 0);
}

TEST(LogAnalysisBuildKit, FailedRunNamesTheRealErrorOnce) {
  LogResult log = analyze(k_buildkit + "build-fail-run.stderr");
  EXPECT_TRUE(log.failed);
  ASSERT_EQ(log.steps.size(), 8u);
  expect_steps(
      log,
      {{"#1", "[internal] load .dockerignore", false, k_done, 0.0, k_none, 0},
       {"#2", "[internal] load build definition from Dockerfile", false, k_done, 0.0, k_none, 0},
       {"#3", "[internal] load build context", false, k_done, 0.0, k_none, 0},
       {"#4", "[base 1/2] COPY busybox /bin/busybox", true, k_cached, k_none, k_none, 0},
       {"#5",
        "[base 2/2] RUN [\"/bin/busybox\", \"sh\", \"-c\", \"/bin/busybox --install -s /bin\"]",
        true, k_cached, k_none, k_none, 0},
       {"#6", k_run6.substr(0, 200), false, k_done, 1.1, 0.041, 6},
       {"#7", k_run7, false, k_done, 0.1, 0.054, 1},
       // The replay between the `------` rules repeats the two lines: not counted again.
       {"#8",
        "[broken 1/1] RUN sh -c 'echo about to fail; echo \"error: compile failed in foo.c\" >&2; "
        "exit 3'",
        false, k_error, k_none, k_none, 2}});
  const StepResult& failed = log.steps[7];
  EXPECT_EQ(failed.exit_code, 3);
  EXPECT_EQ(failed.errors, std::vector<std::string>{"error: compile failed in foo.c"});
  EXPECT_EQ(failed.error_lines_total, 1);
  EXPECT_FALSE(failed.errors_from_tail);
  EXPECT_EQ(failed.stage, "broken");
}

TEST(LogAnalysisBuildKit, ADaemonLostMidStepFailsThatStepWithTheDaemonsLine) {
  for (const char* name : {"build-daemon-killed", "build-daemon-terminated"}) {
    LogResult log = analyze(k_buildkit + name + ".stderr");
    EXPECT_TRUE(log.failed) << name;
    ASSERT_EQ(log.steps.size(), 6u) << name;
    const StepResult& lost = log.steps[5];
    EXPECT_EQ(lost.id, "#6") << name;
    EXPECT_EQ(lost.state, StepState::error) << name;
    ASSERT_EQ(lost.errors.size(), 1u) << name;
    EXPECT_TRUE(lost.errors[0].starts_with("error: failed to ")) << lost.errors[0];
    EXPECT_FALSE(lost.errors_from_tail);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_NE(log.steps[i].state, StepState::error) << name << " " << log.steps[i].id;
    }
  }
  // A build whose vertex failed keeps that vertex's lines: the daemon's summary adds nothing.
  LogResult failed = analyze(k_buildkit + "build-fail-run.stderr");
  EXPECT_EQ(failed.steps[7].errors, std::vector<std::string>{"error: compile failed in foo.c"});
}

// ----- recorded buildah -----

TEST(LogAnalysisBuildah, FreshBuildStepTableIsUntimedWithoutSidecar) {
  LogResult log = analyze(k_buildah + "build-fresh.stdout");
  EXPECT_EQ(log.format, "buildah");
  EXPECT_FALSE(log.timed);
  expect_steps(log, {{"STEP 1/5", "FROM scratch AS base", false, k_done, k_none, k_none, 0},
                     {"STEP 2/5", "COPY busybox /bin/busybox", false, k_done, k_none, k_none, 0},
                     {"STEP 3/5", "RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]", false,
                      k_done, k_none, k_none, 0},
                     {"STEP 4/5", "ARG GREETING=hi", false, k_done, k_none, k_none, 0},
                     {"STEP 5/5", "RUN echo \"$GREETING\" > /greeting && cat /greeting", false,
                      k_done, k_none, k_none, 1}});
  for (const auto& step : log.steps) {
    EXPECT_EQ(step.stage, "base") << step.id;
    EXPECT_EQ(step.start, k_none) << step.id;
  }
}

TEST(LogAnalysisBuildah, CachedBuildMarksUsingCacheSteps) {
  LogResult log = analyze(k_buildah + "build-cached.stdout");
  expect_steps(log, {{"STEP 1/5", "FROM scratch AS base", false, k_done, k_none, k_none, 0},
                     {"STEP 2/5", "COPY busybox /bin/busybox", true, k_cached, k_none, k_none, 0},
                     {"STEP 3/5", "RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]", true,
                      k_cached, k_none, k_none, 0},
                     {"STEP 4/5", "ARG GREETING=hi", true, k_cached, k_none, k_none, 0},
                     {"STEP 5/5", "RUN echo \"$GREETING\" > /greeting && cat /greeting", true,
                      k_cached, k_none, k_none, 0}});
}

TEST(LogAnalysisBuildah, FailedRunHasExitCodeAndErrorLine) {
  LogResult log = analyze(k_buildah + "build-fail-run.combined");
  EXPECT_TRUE(log.failed);
  expect_steps(log,
               {{"STEP 1/2", "FROM localhost/kt-base:dev", false, k_done, k_none, k_none, 0},
                {"STEP 2/2", "RUN echo compiling; echo \"error: foo.c:3: undefined\" >&2; exit 1",
                 false, k_error, k_none, k_none, 2}});
  EXPECT_EQ(log.steps[1].exit_code, 1);
  EXPECT_EQ(log.steps[1].errors, std::vector<std::string>{"error: foo.c:3: undefined"});
}

TEST(LogAnalysisBuildah, MultiStagePrefixesKeepStepsApart) {
  LogResult log = analyze(k_buildah + "build-multistage.stdout");
  ASSERT_EQ(log.steps.size(), 4u);
  EXPECT_EQ(log.steps[0].id, "[1/2] STEP 1/2");
  EXPECT_EQ(log.steps[0].stage, "a");
  EXPECT_EQ(log.steps[1].stage, "a");
  EXPECT_EQ(log.steps[2].id, "[2/2] STEP 1/2");
  EXPECT_EQ(log.steps[3].stage, "b");
  EXPECT_EQ(log.steps[3].state, k_done);
}

// ----- composed -----

TEST(LogAnalysisComposed, BuildahSidecarTimesStepsAndIdleTail) {
  LogResult log = analyze(k_composed + "timed.attempt-1.log");
  EXPECT_TRUE(log.timed);
  EXPECT_TRUE(log.line_times);
  EXPECT_EQ(log.stage, "timed");
  EXPECT_EQ(log.attempt, 1);
  ASSERT_EQ(log.steps.size(), 3u);
  // STEP 1/3 ends where STEP 2/3 arrives; STEP 2/3 at its `--> id`; STEP 3/3 printed its last
  // line at 2.1 s and was committed at 14.9 s.
  EXPECT_EQ(log.steps[0].start, 0.0);
  EXPECT_EQ(log.steps[0].end, 0.15);
  EXPECT_EQ(log.steps[0].seconds, 0.15);
  EXPECT_EQ(log.steps[0].idle_tail_seconds, k_none);
  EXPECT_EQ(log.steps[1].start, 0.15);
  EXPECT_EQ(log.steps[1].end, 1.4);
  EXPECT_EQ(log.steps[1].seconds, 1.25);
  EXPECT_EQ(log.steps[2].start, 1.5);
  EXPECT_EQ(log.steps[2].end, 14.9);
  EXPECT_EQ(log.steps[2].seconds, 13.4);
  EXPECT_EQ(log.steps[2].idle_tail_seconds, 12.8);
  EXPECT_EQ(log.steps[2].output_lines, 2);

  RunAnalysis run;
  run.logs.push_back(log);
  summarize(run);
  nlohmann::json json = to_json(run);
  ASSERT_EQ(json["idle_tails"]["steps"].size(), 1u);
  EXPECT_EQ(json["idle_tails"]["steps"][0]["id"], "STEP 3/3");
  EXPECT_EQ(json["idle_tails"]["total_seconds"], 12.8);
  EXPECT_EQ(run.stages[0].idle_tail_steps, 1);
}

TEST(LogAnalysisComposed, BuildKitSidecarGivesStartsFromHeaderArrival) {
  testing::TempDir dir;
  std::string log = slurp(k_buildkit + "build-fresh.stderr");
  dir.write("stages/base.attempt-1.log", log);
  // #6's header arrives at 2.5 s: it starts there and ends its 1.1 s later.
  size_t header = log.find("#6 [work 1/2]");
  dir.write("stages/base.attempt-1.times",
            "0 0\n" + std::to_string(header) + " 2500\n" + std::to_string(log.size()) + " 4000\n");
  LogResult result = analyze((dir.path() / "stages/base.attempt-1.log").string());
  EXPECT_TRUE(result.line_times);
  ASSERT_EQ(result.steps.size(), 9u);
  EXPECT_EQ(result.steps[4].start, 0.0);
  EXPECT_EQ(result.steps[5].start, 2.5);
  EXPECT_EQ(result.steps[5].end, 3.6);
  EXPECT_EQ(result.steps[5].seconds, 1.1);
  EXPECT_EQ(result.steps[5].idle_tail_seconds, 0.031); // from BuildKit's own finer times
}

TEST(LogAnalysisComposed, CompileCacheBlocksAndBypass) {
  LogResult log = analyze(k_composed + "compile-caches.buildkit.log");
  ASSERT_EQ(log.steps.size(), 7u);
  const StepResult& sccache_text = log.steps[3];
  ASSERT_TRUE(sccache_text.compile);
  EXPECT_EQ(sccache_text.compile->source, "sccache-text");
  EXPECT_EQ(sccache_text.compile->requests, 3);
  EXPECT_EQ(sccache_text.compile->hits, 1);
  EXPECT_EQ(sccache_text.compile->misses, 1);
  EXPECT_EQ(sccache_text.compiler_invocations, 3);
  EXPECT_FALSE(sccache_text.compile_bypass);

  const StepResult& json_zero = log.steps[4];
  ASSERT_TRUE(json_zero.compile);
  EXPECT_EQ(json_zero.compile->source, "sccache-json");
  EXPECT_EQ(json_zero.compile->requests, 0);
  EXPECT_EQ(json_zero.compiler_invocations, 4);
  EXPECT_TRUE(json_zero.compile_bypass); // four compiles, not one reached the cache

  const StepResult& kiln_cc = log.steps[5];
  ASSERT_TRUE(kiln_cc.compile);
  EXPECT_EQ(kiln_cc.compile->source, "kiln-cc");
  EXPECT_EQ(kiln_cc.compile->requests, 5); // two stats lines add up
  EXPECT_EQ(kiln_cc.compile->hits, 4);
  EXPECT_EQ(kiln_cc.compile->misses, 1);

  // ccache -s, then --print-stats (the last block counts): the recorded ccache 4.7.5 numbers.
  const StepResult& ccache = log.steps[6];
  ASSERT_TRUE(ccache.compile);
  EXPECT_EQ(ccache.compile->source, "ccache");
  EXPECT_EQ(ccache.compile->requests, 303);
  EXPECT_EQ(ccache.compile->hits, 119);
  EXPECT_EQ(ccache.compile->misses, 184);

  RunAnalysis run;
  run.logs.push_back(log);
  summarize(run);
  ASSERT_TRUE(run.stages[0].compile);
  EXPECT_EQ(run.stages[0].compile->requests, 3 + 0 + 5 + 303);
  EXPECT_EQ(run.stages[0].compile_bypass_steps, 1);
}

TEST(LogAnalysisComposed, GccErrorFarAboveTheTailOfAParallelBuild) {
  LogResult log = analyze(k_composed + "gcc-error-j16.buildkit.log");
  ASSERT_EQ(log.steps.size(), 4u);
  const StepResult& step = log.steps[3];
  EXPECT_EQ(step.state, k_error);
  EXPECT_EQ(step.exit_code, 2);
  EXPECT_EQ(step.jobs, 16);
  EXPECT_EQ(step.output_lines, 425);
  EXPECT_EQ(step.errors,
            (std::vector<std::string>{
                "/src/src/u120.cpp:7:5: error: 'undeclared_thing' was not declared "
                "in this scope",
                "make[2]: *** [CMakeFiles/big.dir/build.make:1650: "
                "CMakeFiles/big.dir/src/u120.cpp.o] Error 1",
                "make[1]: *** [CMakeFiles/Makefile2:83: CMakeFiles/big.dir/all] Error 2",
                "make: *** [Makefile:136: all] Error 2"}));
  // 418 compiles by ninja's progress lines, and no cache said a word.
  EXPECT_EQ(step.compiler_invocations, 418);
  EXPECT_TRUE(step.compile_bypass);
}

TEST(LogAnalysisComposed, ErrorLinesAreBoundedToFirstAndLast) {
  Options options;
  options.error_lines = 2;
  std::string text = "STEP 1/1: RUN make\n";
  for (int i = 1; i <= 50; ++i) {
    text += "f" + std::to_string(i) + ".c:1:1: error: bad\n";
  }
  text += "Error: building at STEP \"RUN make\": exit status 2\n";
  LogAnalyzer analyzer(options);
  analyzer.feed(text);
  LogResult log = analyzer.finish();
  ASSERT_EQ(log.steps.size(), 1u);
  EXPECT_EQ(log.steps[0].error_lines_total, 50);
  EXPECT_EQ(log.steps[0].errors,
            (std::vector<std::string>{"f1.c:1:1: error: bad", "f2.c:1:1: error: bad",
                                      "f49.c:1:1: error: bad", "f50.c:1:1: error: bad"}));
}

TEST(LogAnalysisComposed, ALinkThatFailedShowsTheLinkersOwnLinesNotOnlyCollect2s) {
  // As GNU ld 2.40 prints them: a library it cannot find, an object built without -fPIC, and a
  // symbol defined twice; then collect2's line, which alone says nothing.
  const std::string text =
      "STEP 1/1: RUN make\n"
      "cc -shared -o libgreet.so greet.o -lz3\n"
      "/usr/bin/ld: cannot find -lz3: No such file or directory\n"
      "/usr/bin/ld: greet.o: relocation R_X86_64_32 against `.rodata' can not be used when "
      "making a shared object; recompile with -fPIC\n"
      "/usr/bin/ld: util.o: in function `greet':\n"
      "util.c:(.text+0x0): multiple definition of `greet'; greet.o:greet.c:(.text+0x0): first "
      "defined here\n"
      "/usr/bin/ld: warning: libfoo.so.1, needed by libbar.so, not found\n"
      "collect2: error: ld returned 1 exit status\n"
      "Error: building at STEP \"RUN make\": exit status 2\n";
  LogAnalyzer analyzer(Options{});
  analyzer.feed(text);
  LogResult log = analyzer.finish();
  ASSERT_EQ(log.steps.size(), 1u);
  EXPECT_EQ(log.steps[0].errors,
            (std::vector<std::string>{
                "/usr/bin/ld: cannot find -lz3: No such file or directory",
                "/usr/bin/ld: greet.o: relocation R_X86_64_32 against `.rodata' can not be used "
                "when making a shared object; recompile with -fPIC",
                "/usr/bin/ld: util.o: in function `greet':",
                "util.c:(.text+0x0): multiple definition of `greet'; greet.o:greet.c:(.text+0x0): "
                "first defined here",
                "collect2: error: ld returned 1 exit status"}));
}

TEST(LogAnalysisComposed, PythonTracebackKeepsLastFramesAndException) {
  LogResult log = analyze(k_composed + "python-traceback.buildah.log");
  EXPECT_TRUE(log.failed);
  ASSERT_EQ(log.steps.size(), 2u);
  EXPECT_EQ(log.steps[1].exit_code, 1);
  EXPECT_EQ(log.steps[1].errors,
            (std::vector<std::string>{
                "Traceback (most recent call last):",
                "  File \"/src/tools/gen.py\", line 12, in load", "    return json.load(f)",
                "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"}));
}

TEST(LogAnalysisComposed, CMakeErrorWithItsMessage) {
  LogResult log = analyze(k_composed + "cmake-error.buildkit.log");
  ASSERT_EQ(log.steps.size(), 4u);
  EXPECT_EQ(log.steps[3].exit_code, 1);
  EXPECT_EQ(log.steps[3].errors,
            (std::vector<std::string>{
                "CMake Error at CMakeLists.txt:14 (find_package):",
                "  By not providing \"FindFoo.cmake\" in CMAKE_MODULE_PATH this project has",
                "  asked CMake to find a package configuration file provided by \"Foo\", but",
                "  CMake did not find one."}));
}

TEST(LogAnalysisComposed, FetchesWithoutProgressControl) {
  LogResult log = analyze(k_composed + "fetches.buildkit.log");
  ASSERT_EQ(log.steps.size(), 6u);
  EXPECT_EQ(log.steps[3].fetches_without_progress, 2); // bare wget; curl -o without -s
  EXPECT_EQ(log.steps[4].fetches_without_progress, 0); // wget -q, curl -fsSL, --progress=
  EXPECT_EQ(log.steps[5].fetches_without_progress, 1); // traced: curl -L -o; wget -nv is quiet
}

TEST(LogAnalysisComposed, WarningsByClassAndFlood) {
  Options options;
  options.flood_lines = 100;
  LogResult log = analyze(k_composed + "warnings.buildkit.log", options);
  ASSERT_EQ(log.steps.size(), 4u);
  const StepResult& step = log.steps[3];
  EXPECT_EQ(step.output_lines, 126);
  EXPECT_TRUE(step.flood);
  EXPECT_EQ(step.warnings.total, 125);
  EXPECT_EQ(step.warnings.noise, 120);
  EXPECT_EQ(step.warnings.signal, 3);
  EXPECT_EQ(step.warnings.unclassified, 1); // ld's; git's line-start `warning:` is none
  EXPECT_EQ(step.warnings.classes,
            (std::map<std::string, long, std::less<>>{{"-Wunused-parameter", 120},
                                                      {"-Winconsistent-missing-override", 3},
                                                      {"-Wimplicit-fallthrough", 1}}));
  EXPECT_FALSE(analyze(k_composed + "warnings.buildkit.log").steps[3].flood); // default 10000

  Options custom;
  custom.noise = {"implicit-fallthrough"};
  custom.signal = {"-Wunused-parameter"};
  const StepResult& again = analyze(k_composed + "warnings.buildkit.log", custom).steps[3];
  EXPECT_EQ(again.warnings.noise, 1);
  EXPECT_EQ(again.warnings.signal, 120);
}

TEST(LogAnalysisComposed, RunFolderRetriesDowngradeAndRepeatedFailure) {
  auto run = analyze_target(k_composed + "run-20261204-101500-ab12", "records", Options{});
  ASSERT_TRUE(run) << run.error();
  EXPECT_EQ(run->run_id, "run-20261204-101500-ab12");
  ASSERT_EQ(run->logs.size(), 4u);
  EXPECT_EQ(run->logs[0].path, "stages/app.attempt-1.log");
  EXPECT_EQ(run->logs[3].path, "stages/lib.attempt-2.log");
  ASSERT_EQ(run->retries.size(), 3u);
  EXPECT_EQ(run->retries[0].stage, "app");
  EXPECT_EQ(run->retries[0].kind, "repeated-failure");
  EXPECT_EQ(run->retries[1].stage, "lib");
  EXPECT_EQ(run->retries[1].kind, "retry");
  EXPECT_EQ(run->retries[2].kind, "downgrade");
  EXPECT_EQ(run->retries[2].jobs_from, 16);
  EXPECT_EQ(run->retries[2].jobs_to, 4);
  EXPECT_EQ(run->retries[2].detail,
            "-j16 -> -j4 (attempt 1 -> 2, step [lib 1/1] RUN make -j${JOBS})");
  ASSERT_EQ(run->stages.size(), 2u);
  EXPECT_EQ(run->stages[1].stage, "lib");
  EXPECT_EQ(run->stages[1].attempts, 2);
  EXPECT_EQ(run->stages[1].step_seconds, 61.0);
  EXPECT_EQ(run->stages[1].idle_tail_seconds, 12.95);
}

TEST(LogAnalysisComposed, AStageThatRanMoreJobsThanItsShareIsFlagged) {
  // The same run, with a manifest that offered lib 4 jobs: its first attempt ran -j16.
  testing::TempDir dir;
  std::filesystem::copy(k_composed + "run-20261204-101500-ab12", dir.path() / "run",
                        std::filesystem::copy_options::recursive);
  auto with_share = [&](long lib_jobs) {
    std::ofstream(dir.path() / "run/manifest.json")
        << "{\"stages\": [{\"name\": \"app\", \"jobs\": 16}, {\"name\": \"lib\", \"jobs\": "
        << lib_jobs << "}]}";
    auto run = analyze_target((dir.path() / "run").string(), "records", Options{});
    EXPECT_TRUE(run) << run.error();
    return *run;
  };
  RunAnalysis over = with_share(4);
  ASSERT_EQ(over.stages.size(), 2u);
  const StageSummary& lib = over.stages[1];
  EXPECT_EQ(lib.jobs_seen, 16);
  EXPECT_EQ(lib.jobs_share, 4);
  EXPECT_TRUE(lib.over_share);
  EXPECT_FALSE(over.stages[0].over_share);
  EXPECT_NE(format_tty(over).find("Over its share: lib ran -j16 where the run's budget offered "
                                  "it 4 job(s)"),
            std::string::npos)
      << format_tty(over);
  nlohmann::json doc = to_json(over);
  EXPECT_EQ(doc["stages"][1]["over_share"], true);
  EXPECT_EQ(doc["stages"][1]["jobs_share"], 4);

  RunAnalysis within = with_share(16);
  EXPECT_FALSE(within.stages[1].over_share);
  EXPECT_EQ(format_tty(within).find("Over its share"), std::string::npos);
}

// ----- the pieces -----

TEST(LogAnalysisSignals, ErrorLines) {
  EXPECT_TRUE(is_error_line("foo.c:3:1: error: expected ';'"));
  EXPECT_TRUE(is_error_line("collect2: error: ld returned 1 exit status"));
  EXPECT_TRUE(is_error_line("main.c:(.text+0x5): undefined reference to `foo'"));
  EXPECT_TRUE(is_error_line("make[3]: *** [x] Error 1"));
  EXPECT_TRUE(is_error_line("ninja: build stopped: subcommand failed."));
  EXPECT_TRUE(is_error_line("FAILED: CMakeFiles/x.dir/a.o"));
  EXPECT_FALSE(is_error_line("-- Performing Test HAVE_FOO - Failed"));
  EXPECT_FALSE(is_error_line("checking for strerror: yes"));
  EXPECT_FALSE(is_error_line("terror: none"));
  EXPECT_TRUE(is_error_line("/usr/bin/ld: cannot find -lgreet: No such file or directory"));
  EXPECT_TRUE(is_error_line("x86_64-linux-gnu-ld.bfd: a.o: relocation R_X86_64_32 against"));
  EXPECT_TRUE(is_error_line("ld.gold: error: b.o: multiple definition of 'f'"));
  EXPECT_FALSE(is_error_line("/usr/bin/ld: warning: libx.so.1, needed by liby.so, not found"));
  EXPECT_FALSE(is_error_line("build: done"));
}

TEST(LogAnalysisSignals, CompilerInvocations) {
  EXPECT_TRUE(is_compiler_invocation("/usr/bin/c++ -O2 -o a.o -c a.cpp"));
  EXPECT_TRUE(is_compiler_invocation("x86_64-linux-gnu-gcc-12 -c a.c"));
  EXPECT_TRUE(is_compiler_invocation("cd /b && clang++ -c a.cpp"));
  EXPECT_FALSE(is_compiler_invocation("/usr/bin/ccache-swig -c x"));
  EXPECT_FALSE(is_compiler_invocation("bash -c 'ls'"));
  EXPECT_TRUE(is_build_progress_compile("[ 50%] Building C object CMakeFiles/a.dir/a.c.o"));
  EXPECT_FALSE(is_build_progress_compile("[ 50%] Linking CXX executable a"));
}

TEST(LogAnalysisSignals, JobsAndFetches) {
  EXPECT_EQ(jobs_option("-j16"), 16);
  EXPECT_EQ(jobs_option("-j 8 all"), 8);
  EXPECT_EQ(jobs_option("--parallel=4"), 4);
  EXPECT_EQ(jobs_option("--parallel 3"), 3);
  EXPECT_EQ(jobs_option("-j"), std::nullopt);
  EXPECT_EQ(jobs_option("-j$(nproc)"), std::nullopt);
  EXPECT_EQ(fetches_without_progress("wget https://a && wget -qO- https://b | sh"), 1);
  EXPECT_EQ(fetches_without_progress("curl -fsSL https://a -o a; curl https://b"), 1);
  EXPECT_EQ(fetches_without_progress("curl --silent https://a"), 0);
  EXPECT_EQ(fetches_without_progress("echo curl-less"), 0);
}

TEST(LogAnalysisSignals, WarningLineClasses) {
  auto warning = parse_warning_line("a.c:1:2: warning: x [-Wformat=]");
  ASSERT_TRUE(warning);
  EXPECT_EQ(warning->klass, "-Wformat");
  warning = parse_warning_line("a.c:1:2: warning: x [-Wfoo,-Werror]");
  ASSERT_TRUE(warning);
  EXPECT_EQ(warning->klass, "-Wfoo");
  EXPECT_FALSE(parse_warning_line("warning: something"));
  EXPECT_EQ(normalize_class("undef"), "-Wundef");
}

TEST(LogAnalysisLineTimes, WriterMarksFirstChunkEvery100msAndTheEnd) {
  LineTimesWriter writer;
  EXPECT_EQ(writer.on_chunk(0, 3), "0 3\n");
  EXPECT_EQ(writer.on_chunk(10, 50), "");
  EXPECT_EQ(writer.on_chunk(20, 103), "20 103\n");
  EXPECT_EQ(writer.on_end(30, 110), "30 110\n");
  EXPECT_EQ(writer.on_end(30, 120), "");
  auto marks = parse_line_times("0 3\n20 103\nbad\n10 200\n30 110\n");
  ASSERT_EQ(marks.size(), 3u); // the line that goes back in offset is passed over
  LineClock clock(marks);
  EXPECT_EQ(clock.at(0), 0.003);
  EXPECT_EQ(clock.at(19), 0.003);
  EXPECT_EQ(clock.at(25), 0.103);
  EXPECT_EQ(clock.last(), 0.11);
}

TEST(LogAnalysisLineTimes, RunFolderWritesTheSidecarBesideTheAttemptLog) {
  testing::TempDir dir;
  auto folder = RunFolder::create(dir.path() / "records", std::chrono::system_clock::now(), 0);
  ASSERT_TRUE(folder) << folder.error();
  auto log = folder->open_log(RunFolder::attempt_log("base", 1), true);
  ASSERT_TRUE(log) << log.error();
  log->write("STEP 1/1: RUN x\n");
  log->write("out\n"); // within 100 ms of the first: no mark
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  log->write("--> abcdef0\n");
  log->finish_line_times();
  auto marks = parse_line_times(slurp((folder->path() / "stages/base.attempt-1.times").string()));
  ASSERT_EQ(marks.size(), 3u);
  EXPECT_EQ(marks[0].offset, 0u);
  EXPECT_EQ(marks[1].offset, 20u);
  EXPECT_GE(marks[1].millis, marks[0].millis + 100);
  EXPECT_EQ(marks[2].offset, 32u);
  // Another log of the record has none.
  auto other = folder->open_log("stages/base.publish-1.log");
  ASSERT_TRUE(other);
  other->write("x\n");
  other->finish_line_times();
  EXPECT_FALSE(std::filesystem::exists(folder->path() / "stages/base.publish-1.times"));
}

TEST(LogAnalysisStreaming, ChunkBoundariesDoNotChangeTheResult) {
  std::string text = slurp(k_composed + "compile-caches.buildkit.log") +
                     slurp(k_buildkit + "build-fail-run.stderr");
  LogAnalyzer whole(Options{});
  whole.feed(text);
  nlohmann::json expected = step_table_json(whole.finish());
  for (size_t size : {1u, 7u, 4096u}) {
    LogAnalyzer pieces(Options{});
    for (size_t at = 0; at < text.size(); at += size) {
      pieces.feed(std::string_view(text).substr(at, size));
    }
    EXPECT_EQ(step_table_json(pieces.finish()), expected) << size;
  }
}

TEST(LogAnalysisStreaming, UnknownFormatIsNotGuessed) {
  LogAnalyzer analyzer(Options{});
  analyzer.feed("hello\nworld\n#not a vertex\n");
  LogResult log = analyzer.finish();
  EXPECT_EQ(log.format, "unknown");
  EXPECT_TRUE(log.steps.empty());
  EXPECT_EQ(log.lines, 3);
}

TEST(LogAnalysisRun, MissingTargetIsAnErrorNamingIt) {
  auto run = analyze_target("no-such-run", "/nonexistent/records", Options{});
  ASSERT_FALSE(run);
  EXPECT_NE(run.error().find("no-such-run"), std::string::npos);
  EXPECT_NE(run.error().find("/nonexistent/records/runs"), std::string::npos);
}

TEST(LogAnalysisRun, RunIdResolvesUnderRecords) {
  testing::TempDir dir;
  dir.write("records/runs/20261204-101500-ab12/stages/amd64/base.attempt-1.log",
            slurp(k_buildkit + "build-fresh.stderr"));
  auto run = analyze_target("20261204-101500-ab12", dir.path() / "records", Options{});
  ASSERT_TRUE(run) << run.error();
  ASSERT_EQ(run->logs.size(), 1u);
  EXPECT_EQ(run->logs[0].path, "stages/amd64/base.attempt-1.log");
  EXPECT_EQ(run->logs[0].lane, "amd64");
  EXPECT_EQ(run->logs[0].stage, "base");
  nlohmann::json json = to_json(*run);
  EXPECT_EQ(json["run_id"], "20261204-101500-ab12");
  EXPECT_EQ(json["stages"][0]["lane"], "amd64");
  EXPECT_EQ(json["slowest_steps"][0]["id"], "#6");
  EXPECT_EQ(json["slowest_steps"][0]["seconds"], 1.1);
}

TEST(LogAnalysisTty, ARunStepIsNamedByItsCommandNotItsMounts) {
  testing::TempDir dir;
  dir.write("libfoo.attempt-1.log",
            "STEP 1/2: FROM scratch\n"
            "STEP 2/2: RUN --mount=type=cache,target=/root/.cache/sccache,id=sccache-amd64-libfoo "
            "--mount=type=secret,id=kiln-budget make -j8 libfoo\n"
            "building\n"
            "COMMIT libfoo\n");
  auto run = analyze_target((dir.path() / "libfoo.attempt-1.log").string(), "records", Options{});
  ASSERT_TRUE(run) << run.error();
  std::string tty = format_tty(*run);
  EXPECT_NE(tty.find("RUN make -j8 libfoo (2 flags)"), std::string::npos) << tty;
}

TEST(LogAnalysisRun, APublishTheRecordSaysFailedIsAnErrorOfTheRun) {
  testing::TempDir dir;
  std::string run_folder = "records/runs/20261204-101500-ab12/";
  dir.write(run_folder + "stages/base.attempt-1.log", slurp(k_buildkit + "build-fresh.stderr"));
  dir.write(run_folder + "publish.log", "push 127.0.0.1:5000/hello:1\nconnection refused\n");
  dir.write(run_folder + "manifest.json",
            R"({"schema":9,"publish":[{"ref":"127.0.0.1:5000/hello:1","status":"failed",)"
            R"("failure":"skopeo copy: connection refused","log":"publish.log"},)"
            R"({"ref":"127.0.0.1:5000/hello:2","status":"published","failure":""}]})");
  auto run = analyze_target("20261204-101500-ab12", dir.path() / "records", Options{});
  ASSERT_TRUE(run) << run.error();
  ASSERT_EQ(run->publish_failures.size(), 1u);
  nlohmann::json json = to_json(*run);
  ASSERT_EQ(json["errors"].size(), 1u);
  EXPECT_EQ(json["errors"][0]["stage"], "publish");
  EXPECT_EQ(json["errors"][0]["name"], "publish 127.0.0.1:5000/hello:1: failed");
  EXPECT_EQ(json["errors"][0]["lines"][0], "skopeo copy: connection refused");
  EXPECT_EQ(json["errors"][0]["log"], "publish.log");
  EXPECT_NE(format_tty(*run).find("Publish 127.0.0.1:5000/hello:1 failed (publish.log):\n  "
                                  "skopeo copy: connection refused"),
            std::string::npos)
      << format_tty(*run);
}

} // namespace
} // namespace kiln::forensics
