// buildctl's `--progress=plain` output against the recordings in tests/fixtures/buildkit-v0.11.6,
// plus the printer's forms (util/progress/progressui/printer.go) that no recording shows.
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "engine/buildkit_progress.h"

namespace kiln {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(KILN_TEST_FIXTURES "/buildkit-v0.11.6/") + name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<LineKind> feed_text(PlainProgress& progress, std::string_view text) {
  std::vector<LineKind> kinds;
  while (!text.empty()) {
    std::size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    kinds.push_back(progress.feed(line));
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
  }
  return kinds;
}

PlainProgress feed_fixture(const std::string& name, std::vector<LineKind>* kinds = nullptr) {
  PlainProgress progress;
  auto fed = feed_text(progress, fixture(name + ".stderr"));
  if (kinds != nullptr) {
    *kinds = std::move(fed);
  }
  return progress;
}

std::map<LineKind, int> tally(const std::vector<LineKind>& kinds) {
  std::map<LineKind, int> counts;
  for (LineKind kind : kinds) {
    ++counts[kind];
  }
  return counts;
}

// The Dockerfile.used steps, as the frontend names them.
constexpr std::string_view k_copy = "COPY busybox /bin/busybox";
constexpr std::string_view k_install =
    R"(RUN ["/bin/busybox", "sh", "-c", "/bin/busybox --install -s /bin"])";
constexpr std::string_view k_greet =
    R"(RUN --mount=type=cache,id=demo-cache,target=/cache sh -c 'for i in 1 2 3 4 5; do echo )"
    R"("$GREETING line $i"; sleep 0.2; done; echo warn: something >&2; date > /cache/stamp')";
constexpr std::string_view k_token = "RUN --mount=type=secret,id=token sh -c 'test -s "
                                     "/run/secrets/token && echo token-present || echo "
                                     "token-absent'";
constexpr std::string_view k_broken =
    R"(RUN sh -c 'echo about to fail; echo "error: compile failed in foo.c" >&2; exit 3')";
constexpr std::string_view k_noisy =
    R"(RUN ["/bin/busybox", "sh", "-c", "for i in $(/bin/busybox seq 1 400); do echo warning: )"
    R"(line $i of a noisy compile -Wunused-parameter; done"])";

constexpr std::string_view k_dockerignore = "[internal] load .dockerignore";
constexpr std::string_view k_definition = "[internal] load build definition from Dockerfile";
constexpr std::string_view k_context = "[internal] load build context";
constexpr std::string_view k_oci = "exporting to oci image format";
constexpr std::string_view k_cache_export = "exporting content cache";
constexpr std::string_view k_registry_import =
    "importing cache manifest from 127.0.0.1:1/nothing:cache";

constexpr std::string_view k_run_failure =
    R"(process "/bin/sh -c sh -c 'echo about to fail; echo \"error: compile failed in foo.c\" )"
    R"(>&2; exit 3'" did not complete successfully: exit code: 3)";
constexpr std::string_view k_export_failure =
    R"(error writing layer blob: failed to do request: Head "http://127.0.0.1:1/v2/nothing/blobs/)"
    R"(sha256:3907e4cb0dc8b429290241a1d3855c5e0e6b7cac4ef49cbdd6082b550fe509f8": dial tcp )"
    R"(127.0.0.1:1: connect: connection refused)";
constexpr std::string_view k_import_failure =
    R"(failed to configure registry cache importer: failed to do request: Head )"
    R"("http://127.0.0.1:1/v2/nothing/manifests/cache": dial tcp 127.0.0.1:1: connect: )"
    R"(connection refused)";

struct ExpectedVertex {
  int number;
  VertexKind kind;
  std::string_view stage;
  int step;
  int steps;
  std::string_view text; // the instruction of a step, the name of anything else
  VertexState state;
  std::optional<double> seconds;
};

ExpectedVertex internal(int number, std::string_view name, double seconds) {
  return {number, VertexKind::internal, "", 0, 0, name, VertexState::done, seconds};
}
ExpectedVertex engine(int number, std::string_view name, VertexState state,
                      std::optional<double> seconds = std::nullopt) {
  return {number, VertexKind::engine, "", 0, 0, name, state, seconds};
}
ExpectedVertex step(int number, std::string_view stage, int index, int steps,
                    std::string_view instruction, VertexState state,
                    std::optional<double> seconds = std::nullopt) {
  return {number, VertexKind::step, stage, index, steps, instruction, state, seconds};
}

constexpr auto k_done = VertexState::done;
constexpr auto k_cached = VertexState::cached;
constexpr auto k_error = VertexState::error;

struct RecordedBuild {
  std::string name;
  std::vector<ExpectedVertex> vertices;
  int steps;
  int steps_cached;
  int failed; // vertex number, 0 for none
  std::string_view failure;
  std::string solve_error;
  int dockerfile_line;
};

std::vector<RecordedBuild> recorded_builds() {
  const std::string k_failed_to_solve = "failed to solve: ";
  return {
      {"build-fresh",
       {internal(1, k_dockerignore, 0.0), internal(2, k_definition, 0.0),
        internal(3, k_context, 0.0), step(4, "base", 1, 2, k_copy, k_cached),
        step(5, "base", 2, 2, k_install, k_done, 0.1), step(6, "work", 1, 2, k_greet, k_done, 1.1),
        step(7, "work", 2, 2, k_token, k_done, 0.1), engine(8, k_oci, k_done, 0.1),
        engine(9, k_cache_export, k_done, 0.1)},
       4,
       1,
       0,
       "",
       "",
       0},
      {"build-cached",
       {internal(1, k_dockerignore, 0.0), internal(2, k_definition, 0.0),
        engine(3, "importing cache manifest from local:10372194569593643710", k_done, 0.0),
        internal(4, k_context, 0.0), step(5, "base", 1, 2, k_copy, k_cached),
        step(6, "work", 1, 2, k_greet, k_cached), step(7, "base", 2, 2, k_install, k_cached),
        step(8, "work", 2, 2, k_token, k_cached), engine(9, k_oci, k_done, 0.0)},
       4,
       4,
       0,
       "",
       "",
       0},
      {"build-fail-run",
       {internal(1, k_dockerignore, 0.0), internal(2, k_definition, 0.0),
        internal(3, k_context, 0.0), step(4, "base", 1, 2, k_copy, k_cached),
        step(5, "base", 2, 2, k_install, k_cached), step(6, "work", 1, 2, k_greet, k_done, 1.1),
        step(7, "work", 2, 2, k_token, k_done, 0.1), step(8, "broken", 1, 1, k_broken, k_error)},
       5,
       2,
       8,
       k_run_failure,
       k_failed_to_solve + std::string(k_run_failure),
       11},
      {"build-fail-target",
       {internal(1, k_dockerignore, 0.0), internal(2, k_definition, 0.0)},
       0,
       0,
       0,
       "",
       "failed to solve: target stage nosuch could not be found",
       0},
      {"build-import-missing",
       {internal(1, k_dockerignore, 0.0), internal(2, k_definition, 0.0),
        internal(3, k_context, 0.0), step(4, "base", 1, 2, k_copy, k_cached),
        step(5, "base", 2, 2, k_install, k_cached), step(6, "work", 1, 2, k_greet, k_done, 1.1),
        step(7, "work", 2, 2, k_token, k_done, 0.1), engine(8, k_oci, k_done, 0.1)},
       4,
       2,
       0,
       "",
       "",
       0},
      // The importer failing is an ERROR vertex, yet the build goes on and succeeds (rc 0).
      {"build-import-registry-unreachable",
       {internal(1, k_dockerignore, 0.0), internal(2, k_definition, 0.0),
        engine(3, k_registry_import, k_error), internal(4, k_context, 0.0),
        step(5, "base", 1, 2, k_copy, k_cached), step(6, "base", 2, 2, k_install, k_cached),
        step(7, "work", 1, 2, k_greet, k_done, 1.1), step(8, "work", 2, 2, k_token, k_done, 0.1),
        engine(9, k_oci, k_done, 0.1)},
       4,
       2,
       3,
       k_import_failure,
       "",
       0},
      {"build-export-registry-unreachable",
       {internal(1, k_dockerignore, 0.0), internal(2, k_definition, 0.0),
        internal(3, k_context, 0.0), step(4, "base", 1, 2, k_copy, k_cached),
        step(5, "base", 2, 2, k_install, k_cached), step(6, "work", 1, 2, k_greet, k_cached),
        step(7, "work", 2, 2, k_token, k_cached), engine(8, k_oci, k_done, 0.1),
        engine(9, k_cache_export, k_error)},
       4,
       4,
       9,
       k_export_failure,
       k_failed_to_solve + std::string(k_export_failure),
       0},
      // An unnamed single stage: the steps carry no stage name.
      {"build-clipped",
       {internal(1, k_dockerignore, 0.0), internal(2, k_definition, 0.0),
        internal(3, k_context, 0.0), step(4, "", 1, 2, k_copy, k_done, 0.0),
        step(5, "", 2, 2, k_noisy, k_done, 0.1)},
       2,
       0,
       0,
       "",
       "",
       0},
  };
}

class BuildkitProgressRecorded : public testing::TestWithParam<RecordedBuild> {};

TEST_P(BuildkitProgressRecorded, FoldsEveryVertexAndTheOutcome) {
  const RecordedBuild& build = GetParam();
  std::vector<LineKind> kinds;
  PlainProgress progress = feed_fixture(build.name, &kinds);

  ASSERT_EQ(progress.vertices().size(), build.vertices.size());
  for (std::size_t i = 0; i < build.vertices.size(); ++i) {
    const ExpectedVertex& want = build.vertices[i];
    const Vertex& got = progress.vertices()[i];
    SCOPED_TRACE("#" + std::to_string(want.number));
    EXPECT_EQ(got.number, want.number);
    EXPECT_EQ(progress.find(want.number), &got);
    EXPECT_EQ(got.kind, want.kind);
    EXPECT_EQ(got.stage, want.stage);
    EXPECT_EQ(got.step, want.step);
    EXPECT_EQ(got.steps, want.steps);
    if (want.kind == VertexKind::step) {
      EXPECT_EQ(got.instruction, want.text);
      std::string prefix = want.stage.empty() ? "" : std::string(want.stage) + " ";
      EXPECT_EQ(got.name, "[" + prefix + std::to_string(want.step) + "/" +
                              std::to_string(want.steps) + "] " + std::string(want.text));
    } else {
      EXPECT_EQ(got.name, want.text);
      EXPECT_EQ(got.instruction, "");
    }
    EXPECT_EQ(got.state, want.state);
    EXPECT_EQ(got.seconds, want.seconds);
    EXPECT_EQ(got.error, want.state == k_error ? std::string(build.failure) : "");
    EXPECT_TRUE(got.warnings.empty());
    EXPECT_EQ(got.clipped, build.name == "build-clipped" && want.number == 5);
  }

  EXPECT_EQ(progress.steps(), build.steps);
  EXPECT_EQ(progress.steps_cached(), build.steps_cached);
  if (build.failed == 0) {
    EXPECT_EQ(progress.failed(), nullptr);
  } else {
    ASSERT_NE(progress.failed(), nullptr);
    EXPECT_EQ(progress.failed()->number, build.failed);
    EXPECT_EQ(progress.failed()->error, build.failure);
  }
  EXPECT_EQ(progress.solve_error(), build.solve_error);
  EXPECT_EQ(progress.dockerfile_line(), build.dockerfile_line);
  ASSERT_NE(progress.current(), nullptr);
  EXPECT_EQ(progress.current()->number, build.vertices.back().number);

  // Every recorded line is understood: nothing falls through to `other`.
  EXPECT_EQ(tally(kinds).count(LineKind::other), 0u);
  EXPECT_EQ(tally(kinds)[LineKind::client_log], build.name == "build-import-missing" ? 1 : 0);
  EXPECT_EQ(tally(kinds)[LineKind::solve_error], build.solve_error.empty() ? 0 : 1);
}

INSTANTIATE_TEST_SUITE_P(BuildkitProgress, BuildkitProgressRecorded,
                         testing::ValuesIn(recorded_builds()),
                         [](const testing::TestParamInfo<RecordedBuild>& info) {
                           std::string name = info.param.name;
                           for (char& c : name) {
                             if (c == '-') {
                               c = '_';
                             }
                           }
                           return name;
                         });

TEST(BuildkitProgressLogs, FirstLogLineUnderNumberZeroBelongsToTheLastHeader) {
  PlainProgress progress = feed_fixture("build-fresh");
  EXPECT_EQ(progress.find(6)->logs,
            (std::vector<std::string>{"hi line 1", "hi line 2", "hi line 3", "hi line 4",
                                      "hi line 5", "warn: something"}));
  EXPECT_EQ(progress.find(7)->logs, std::vector<std::string>{"token-present"});
  EXPECT_TRUE(progress.find(5)->logs.empty());
}

TEST(BuildkitProgressLogs, StatusLinesKeepTheirTextAfterTheNumber) {
  PlainProgress progress = feed_fixture("build-fresh");
  EXPECT_EQ(progress.find(3)->statuses,
            std::vector<std::string>{"transferring context: 1.98MB 0.0s done"});
  EXPECT_EQ(
      progress.find(9)->statuses,
      (std::vector<std::string>{
          "preparing build cache for export",
          "writing layer sha256:3907e4cb0dc8b429290241a1d3855c5e0e6b7cac4ef49cbdd6082b550fe509f8",
          "preparing build cache for export 0.1s done",
          "writing layer sha256:3907e4cb0dc8b429290241a1d3855c5e0e6b7cac4ef49cbdd6082b550fe509f8 "
          "done",
          "writing layer sha256:4f4fb700ef54461cfa02571ae0db9a0dc1e0cdb5577484a6d75e68dc38e8acc1 "
          "done",
          "writing layer sha256:b9276ba8b30a974029c6b0b00d2da5d0c2bcddf39a90d812549b9b7772704525 "
          "0.0s done",
          "writing config sha256:b20fc6b079d045a0daad2ea4b3b0e991bd0f552d60bf1913fe194b2e734f75b0 "
          "done",
          "writing manifest "
          "sha256:691d93e244ed9222819f87b8d383f90acae73167a6e8448ed27d25ee544b1c98 done"}));
  EXPECT_EQ(progress.find(8)->statuses.front(), "exporting layers 0.0s done");
}

TEST(BuildkitProgressLogs, FailureReplayIsNotCountedTwice) {
  std::vector<LineKind> kinds;
  PlainProgress progress = feed_fixture("build-fail-run", &kinds);
  // The failed step's two lines were printed live; the replay block repeats them.
  EXPECT_EQ(progress.find(8)->logs,
            (std::vector<std::string>{"error: compile failed in foo.c", "about to fail"}));
  EXPECT_EQ(progress.find(6)->logs.size(), 6u);
  EXPECT_EQ(progress.find(6)->logs.front(), "hello line 1");
  auto counts = tally(kinds);
  EXPECT_EQ(counts[LineKind::replay], 5);  // rule, " > name:", 2 logs, rule
  EXPECT_EQ(counts[LineKind::excerpt], 7); // "Dockerfile:11", rule, 4 source lines, rule
  EXPECT_EQ(counts[LineKind::log], 9);
  EXPECT_EQ(counts[LineKind::error], 1);
  EXPECT_EQ(kinds.back(), LineKind::solve_error);
}

TEST(BuildkitProgressLogs, ReplayOfAnErrorThatDidNotFailTheBuild) {
  std::vector<LineKind> kinds;
  PlainProgress progress = feed_fixture("build-import-registry-unreachable", &kinds);
  EXPECT_TRUE(progress.find(3)->logs.empty());
  ASSERT_GE(kinds.size(), 3u);
  EXPECT_EQ(std::vector<LineKind>(kinds.end() - 3, kinds.end()),
            std::vector<LineKind>(3, LineKind::replay));
  EXPECT_EQ(progress.solve_error(), "");
}

TEST(BuildkitProgressLogs, ClippedLogKeepsTheCutLineAndDropsTheMarker) {
  PlainProgress progress = feed_fixture("build-clipped");
  const Vertex* noisy = progress.find(5);
  ASSERT_NE(noisy, nullptr);
  EXPECT_TRUE(noisy->clipped);
  ASSERT_EQ(noisy->logs.size(), 38u);
  EXPECT_EQ(noisy->logs.front(), "warning: line 1 of a noisy compile -Wunused-parameter");
  EXPECT_EQ(noisy->logs[36], "warning: line 37 of a noisy compile -Wunused-parameter");
  EXPECT_EQ(noisy->logs.back(), "warning: line 38 of a "); // cut mid-line, trailing blank kept
  EXPECT_FALSE(progress.find(4)->clipped);
}

TEST(BuildkitProgressClientLog, LocalCacheImportMissingIsAWarning) {
  PlainProgress progress = feed_fixture("build-import-missing");
  ASSERT_EQ(progress.client_logs().size(), 1u);
  const ClientLog& log = progress.client_logs().front();
  EXPECT_EQ(log.level, "warning");
  EXPECT_EQ(log.message,
            "local cache import at /srv/kiln-fixtures/empty-nonexistent not found due to err: "
            "could not read /srv/kiln-fixtures/empty-nonexistent/index.json: open "
            "/srv/kiln-fixtures/empty-nonexistent/index.json: no such file or directory");
  EXPECT_EQ(progress.find(6)->logs.front(), "other line 1");
}

TEST(BuildkitProgressClientLog, UnquotesGoStringsAndTakesBareValues) {
  PlainProgress progress;
  EXPECT_EQ(progress.feed(R"(time="2026-12-02T13:46:13Z" level=error msg="say \"hi\" from )"
                          R"(C:\\tmp\tnow" spanID=01)"),
            LineKind::client_log);
  EXPECT_EQ(progress.feed(R"(time="2026-12-02T13:46:14Z" level=info msg=plain)"),
            LineKind::client_log);
  EXPECT_EQ(progress.feed(R"(time="2026-12-02T13:46:15Z" level=info msg="unterminated)"),
            LineKind::other);
  ASSERT_EQ(progress.client_logs().size(), 2u);
  EXPECT_EQ(progress.client_logs()[0].level, "error");
  EXPECT_EQ(progress.client_logs()[0].message, "say \"hi\" from C:\\tmp\tnow");
  EXPECT_EQ(progress.client_logs()[1].message, "plain");
}

// Each case feeds its lines to a fresh parser and expects the kind of every line.
struct HandWritten {
  std::string name;
  std::vector<std::pair<std::string_view, LineKind>> lines;
};

std::vector<LineKind> kinds_of(const HandWritten& script, PlainProgress& progress) {
  std::vector<LineKind> kinds;
  for (const auto& entry : script.lines) {
    kinds.push_back(progress.feed(entry.first));
  }
  return kinds;
}

std::vector<LineKind> expected_kinds(const HandWritten& script) {
  std::vector<LineKind> kinds;
  for (const auto& entry : script.lines) {
    kinds.push_back(entry.second);
  }
  return kinds;
}

TEST(BuildkitProgressPrinter, LeavingAndComingBackDoesNotDuplicateTheVertex) {
  HandWritten script{"interleaved",
                     {{"#1 [internal] load build context", LineKind::header},
                      {"#1 transferring context: 1.20MB 0.5s", LineKind::status},
                      {"#1 ...", LineKind::left},
                      {"", LineKind::blank},
                      {"#2 [base 1/2] COPY busybox /bin/busybox", LineKind::header},
                      {"#0 0.010 first", LineKind::log},
                      {"#2 ...", LineKind::left},
                      {"", LineKind::blank},
                      {"#1 [internal] load build context", LineKind::header},
                      {"#1 transferring context: 2.40MB 0.9s done", LineKind::status},
                      {"#1 DONE 0.9s", LineKind::done},
                      {"", LineKind::blank},
                      {"#2 [base 1/2] COPY busybox /bin/busybox", LineKind::header},
                      {"#2 0.020 second", LineKind::log},
                      {"#2 DONE", LineKind::done}}};
  PlainProgress progress;
  EXPECT_EQ(kinds_of(script, progress), expected_kinds(script));
  ASSERT_EQ(progress.vertices().size(), 2u);
  EXPECT_EQ(progress.steps(), 1);
  EXPECT_EQ(progress.find(1)->statuses.size(), 2u);
  EXPECT_EQ(progress.find(1)->seconds, 0.9);
  EXPECT_EQ(progress.find(2)->logs, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(progress.find(2)->state, VertexState::done);
  EXPECT_EQ(progress.find(2)->seconds, std::nullopt); // DONE without a time
  EXPECT_EQ(progress.current(), progress.find(2));
}

TEST(BuildkitProgressPrinter, WarningsCancellationAndEmptyLogText) {
  HandWritten script{"events",
                     {{"#1 [internal] load build definition from Dockerfile", LineKind::header},
                      {"#1 WARN: the stage name is not lowercase", LineKind::warning},
                      {"#1 DONE 0.0s", LineKind::done},
                      {"", LineKind::blank},
                      {"#2 [work 1/2] RUN make", LineKind::header},
                      {"#0 0.052 ", LineKind::log},
                      {"#2 0.060 ", LineKind::log},
                      {"#2 12.34 after ten seconds the printer keeps two decimals", LineKind::log},
                      {"#2 CANCELED", LineKind::canceled}}};
  PlainProgress progress;
  EXPECT_EQ(kinds_of(script, progress), expected_kinds(script));
  EXPECT_EQ(progress.find(1)->warnings,
            std::vector<std::string>{"the stage name is not lowercase"});
  EXPECT_EQ(progress.find(2)->logs,
            (std::vector<std::string>{"", "", "after ten seconds the printer keeps two decimals"}));
  EXPECT_EQ(progress.find(2)->state, VertexState::canceled);
  EXPECT_EQ(progress.failed(), nullptr); // canceled is not the failure
}

TEST(BuildkitProgressPrinter, LinesThatNeedAVertexOrAnOpening) {
  PlainProgress progress;
  EXPECT_EQ(progress.feed("#0 0.010 before any header"), LineKind::other);
  EXPECT_EQ(progress.feed("#x not a number"), LineKind::other);
  EXPECT_EQ(progress.feed("Dockerfile:4"), LineKind::excerpt);
  EXPECT_EQ(progress.feed("no rule followed"), LineKind::other);
  EXPECT_EQ(progress.dockerfile_line(), 0);
  EXPECT_TRUE(progress.vertices().empty());
  EXPECT_EQ(progress.current(), nullptr);
}

struct NamedVertex {
  std::string_view name;
  VertexKind kind;
  std::string_view stage;
  int step;
  int steps;
  std::string_view instruction;
};

TEST(BuildkitProgressNames, OnlyTheLeadingBracketGroupClassifies) {
  const std::vector<NamedVertex> cases = {
      {R"([2/2] RUN ["/bin/busybox", "sh", "-c", "echo [1/2]"])", VertexKind::step, "", 2, 2,
       R"(RUN ["/bin/busybox", "sh", "-c", "echo [1/2]"])"},
      {"[base 1/2] COPY busybox /bin/busybox", VertexKind::step, "base", 1, 2,
       "COPY busybox /bin/busybox"},
      // dockerfile2llb pads the step number to the width of the total.
      {"[build  3/12] RUN make", VertexKind::step, "build", 3, 12, "RUN make"},
      {"[ 3/12] RUN make", VertexKind::step, "", 3, 12, "RUN make"},
      {"[internal] load build context", VertexKind::internal, "", 0, 0, ""},
      {"[context base] load metadata for docker.io/library/alpine:3.18", VertexKind::context,
       "base", 0, 0, ""},
      {"exporting to oci image format", VertexKind::engine, "", 0, 0, ""},
      {"importing cache manifest from 127.0.0.1:1/nothing:cache", VertexKind::engine, "", 0, 0, ""},
      {R"(RUN ["sh"] [base 1/2])", VertexKind::engine, "", 0, 0, ""},
      {"[base 1/x] not a step", VertexKind::engine, "", 0, 0, ""},
  };
  for (const NamedVertex& want : cases) {
    SCOPED_TRACE(want.name);
    Vertex got = classify_vertex_name(want.name);
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.kind, want.kind);
    EXPECT_EQ(got.stage, want.stage);
    EXPECT_EQ(got.step, want.step);
    EXPECT_EQ(got.steps, want.steps);
    EXPECT_EQ(got.instruction, want.instruction);
  }
}

TEST(BuildkitProgressNames, HeaderWithBracketsInTheInstruction) {
  PlainProgress progress;
  EXPECT_EQ(progress.feed(R"(#7 [base 2/2] RUN ["/bin/busybox", "sh", "-c", "ls [a-z]*"])"),
            LineKind::header);
  EXPECT_EQ(progress.feed("#7 DONE 0.1s"), LineKind::done);
  const Vertex* run = progress.find(7);
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(run->kind, VertexKind::step);
  EXPECT_EQ(run->stage, "base");
  EXPECT_EQ(run->step, 2);
  EXPECT_EQ(run->steps, 2);
  EXPECT_EQ(run->instruction, R"(RUN ["/bin/busybox", "sh", "-c", "ls [a-z]*"])");
  EXPECT_EQ(progress.steps(), 1);
  EXPECT_EQ(progress.steps_cached(), 0);
}

} // namespace
} // namespace kiln
