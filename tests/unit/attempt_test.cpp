#include "driver/attempt.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "engine/buildah_engine.h"

namespace kiln {
namespace {

const std::string k_buildkit = std::string(KILN_TEST_FIXTURES) + "/buildkit-v0.11.6/";
const std::string k_buildah = std::string(KILN_TEST_FIXTURES) + "/buildah-1.28.2/";
const std::string k_fetch = std::string(KILN_TEST_FIXTURES) + "/fetch-network/";

// A recorded output file as the driver hands it over: one entry per line, no newlines.
Tail read_tail(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  Tail lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
  }
  return lines;
}

const std::vector<TransientClass>& builtins() {
  return builtin_transient_classes();
}

/// A chain-file class with these RE2 patterns.
TransientClass transient(std::string name, std::initializer_list<const char*> patterns,
                         bool retry_despite_identical = false) {
  TransientClass made{std::move(name), {}, {}, retry_despite_identical};
  for (const char* pattern : patterns) {
    made.patterns.push_back(Pattern::builtin(pattern));
  }
  return made;
}

std::vector<TransientClass> with_builtins(std::vector<TransientClass> first) {
  first.insert(first.end(), builtins().begin(), builtins().end());
  return first;
}

// ---- the built-in table ----

TEST(BuiltinTransientClasses, NamesInOrderAndWhichReadOnlyTheEnginesLines) {
  std::vector<std::string> names;
  for (const TransientClass& transient : builtins()) {
    names.push_back(transient.name);
    EXPECT_EQ(transient.retry_despite_identical, transient.name == "snapshot-checksum" ||
                                                     transient.name == "cache-import" ||
                                                     transient.name == "worker-lost");
    // A fetch inside a RUN is the one flake a step's own output shows.
    EXPECT_EQ(transient.engine_only, transient.name != "fetch-network") << transient.name;
    EXPECT_FALSE(transient.patterns.empty()) << transient.name;
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"worker-lost", "cache-import", "fetch-network",
                                      "registry-network", "engine-session", "storage-contention",
                                      "snapshot-mount", "snapshot-checksum"}));
}

TEST(VerdictName, EveryVerdict) {
  EXPECT_STREQ(verdict_name(Verdict::retry), "retry");
  EXPECT_STREQ(verdict_name(Verdict::permanent), "permanent");
  EXPECT_STREQ(verdict_name(Verdict::refused_identical), "refused-identical");
  EXPECT_STREQ(verdict_name(Verdict::exhausted), "exhausted");
}

// ---- normalise_line ----

TEST(NormaliseLine, RecordedBuildkitElapsedPrefixesKeepTheVertex) {
  const Tail fresh = read_tail(k_buildkit + "build-fresh.stderr");
  ASSERT_GE(fresh.size(), 26u);
  ASSERT_EQ(fresh[19], "#0 0.061 hi line 1");
  EXPECT_EQ(normalise_line(fresh[19]), "#0 hi line 1");
  ASSERT_EQ(fresh[20], "#6 0.262 hi line 2");
  EXPECT_EQ(normalise_line(fresh[20]), "#6 hi line 2");
  ASSERT_EQ(fresh[25], "#6 DONE 1.1s");
  EXPECT_EQ(normalise_line(fresh[25]), "#6 DONE <dur>");
  // The same step of another recorded build, at another elapsed time.
  const Tail other = read_tail(k_buildkit + "build-import-missing.stderr");
  ASSERT_GE(other.size(), 26u);
  ASSERT_EQ(fresh[24], "#6 1.069 warn: something");
  ASSERT_EQ(other[25], "#6 1.063 warn: something");
  EXPECT_EQ(normalise_line(fresh[24]), normalise_line(other[25]));
  EXPECT_EQ(normalise_line("#6 0.262"), "#6");
  // No vertex, no prefix.
  EXPECT_EQ(normalise_line("0.254 hello"), "0.254 hello");
}

TEST(NormaliseLine, RecordedDigestsOfTwoBuildsBecomeEqual) {
  const Tail fresh = read_tail(k_buildkit + "build-fresh.stderr");
  const Tail other = read_tail(k_buildkit + "build-export-registry-unreachable.stderr");
  ASSERT_GE(fresh.size(), 34u);
  ASSERT_GE(other.size(), 27u);
  ASSERT_EQ(fresh[33], "#8 exporting manifest "
                       "sha256:496b2655b00f977776f2ea5b58703904e6776d9e775185154bef6adea9c44c93 "
                       "done");
  ASSERT_EQ(other[26], "#8 exporting manifest "
                       "sha256:70176ad01b0679bde6cf2b14a32fb3a679c90373991b30b2c8f2293fa4c8fea4 "
                       "done");
  EXPECT_EQ(normalise_line(fresh[33]), "#8 exporting manifest sha256:<id> done");
  EXPECT_EQ(normalise_line(other[26]), normalise_line(fresh[33]));
  const Tail cached = read_tail(k_buildkit + "build-cached.stderr");
  ASSERT_GE(cached.size(), 9u);
  ASSERT_EQ(cached[8], "#3 importing cache manifest from local:10372194569593643710");
  EXPECT_EQ(normalise_line(cached[8]), "#3 importing cache manifest from local:<id>");
}

TEST(NormaliseLine, RecordedBuildkitWarningWithTimestampAndTraceIds) {
  const Tail tail = read_tail(k_buildkit + "build-import-missing.stderr");
  ASSERT_FALSE(tail.empty());
  EXPECT_EQ(normalise_line(tail.front()),
            "time=\"<time>\" level=warning msg=\"local cache import at "
            "/srv/kiln-fixtures/empty-nonexistent not found due to err: could not read "
            "/srv/kiln-fixtures/empty-nonexistent/index.json: open "
            "/srv/kiln-fixtures/empty-nonexistent/index.json: no such file or directory\" "
            "spanID=<id> traceID=<id>");
}

TEST(NormaliseLine, RecordedBuildahRetryWarning) {
  const Tail tail = read_tail(k_buildah + "build-registry-reset-1.combined");
  ASSERT_GE(tail.size(), 3u);
  EXPECT_EQ(normalise_line(tail[2]),
            "time=\"<time>\" level=warning msg=\"Failed, retrying in <dur> ... (1/3). Error: "
            "initializing source docker://127.0.0.1:5523/kiln/flaky:1: pinging container registry "
            "127.0.0.1:5523: Get \\\"http://127.0.0.1:5523/v2/\\\": read tcp "
            "127.0.0.1:53874->127.0.0.1:5523: read: connection reset by peer\"");
}

TEST(NormaliseLine, TimestampsAndClockTimes) {
  EXPECT_EQ(normalise_line("at 2026-12-02T13:46:13Z"), "at <time>");
  EXPECT_EQ(normalise_line("at 2023-05-26T14:52:12.123456789+02:00 x"), "at <time> x");
  EXPECT_EQ(normalise_line("at 2023-05-26 14:52:12.5 x"), "at <time> x");
  EXPECT_EQ(normalise_line("[14:08:18] pulling"), "[<time>] pulling");
  EXPECT_EQ(normalise_line("14:08:18.250 pulling"), "<time> pulling");
}

TEST(NormaliseLine, GoDurations) {
  EXPECT_EQ(normalise_line("retrying in 1.5s"), "retrying in <dur>");
  EXPECT_EQ(normalise_line("took 250ms, then 1m2.5s, then 3h"),
            "took <dur>, then <dur>, then <dur>");
  EXPECT_EQ(normalise_line("slept 40µs"), "slept <dur>");
  // Sizes and versions are not durations.
  EXPECT_EQ(normalise_line("#3 transferring context: 1.98MB 0.0s done"),
            "#3 transferring context: 1.98MB <dur> done");
  EXPECT_EQ(normalise_line("buildah version 1.28.2"), "buildah version 1.28.2");
}

TEST(NormaliseLine, UuidsAndHexRuns) {
  // Session-scoped ref id as BuildKit prints it (docker/buildx#1075 style).
  EXPECT_EQ(normalise_line("ref ebeaf7c5-4946-4b7e-a9f8-8dd2197c5258::m2yz7n9ekc0ar3hfxaj0ohwo4"),
            "ref <id>::m2yz7n9ekc0ar3hfxaj0ohwo4");
  EXPECT_EQ(normalise_line("edd3fecb6f7f42e04e1369b2d08e2bb268013095c0d7696a7b890a54a5b34689"),
            "<id>");
  // buildah's 11-character short id is below the 12-character floor.
  EXPECT_EQ(normalise_line("--> 000828b76f7"), "--> 000828b76f7");
}

TEST(NormaliseLine, DifferentErrorsStayDifferent) {
  EXPECT_NE(normalise_line("#0 0.057 error: compile failed in foo.c"),
            normalise_line("#0 0.057 error: compile failed in bar.c"));
  EXPECT_NE(normalise_line("did not complete successfully: exit code: 3"),
            normalise_line("did not complete successfully: exit code: 2"));
  EXPECT_NE(normalise_line("invalid status code from registry 503 (Service Unavailable)"),
            normalise_line("invalid status code from registry 502 (Bad Gateway)"));
}

// ---- classify_failure: permanent ----

TEST(ClassifyFailure, RecordedBuildkitRunFailureIsPermanent) {
  const Tail tail = read_tail(k_buildkit + "build-fail-run.stderr");
  const FailureVerdict verdict = classify_failure(tail, std::nullopt, 1, 3, builtins());
  EXPECT_EQ(verdict.verdict, Verdict::permanent);
  EXPECT_EQ(verdict.class_name, "");
  EXPECT_EQ(verdict.matched_line, "");
  EXPECT_EQ(verdict.reason,
            "no transient pattern matched; a script or compile failure is not retried");
}

TEST(ClassifyFailure, RecordedBuildahRunFailureIsPermanent) {
  const Tail tail = read_tail(k_buildah + "build-fail-run.combined");
  ASSERT_FALSE(tail.empty());
  EXPECT_EQ(classify_failure(tail, tail, 2, 3, builtins()).verdict, Verdict::permanent);
}

TEST(ClassifyFailure, RecordedConnectionRefusedIsNotBuiltinTransient) {
  // A registry that refuses connections is a wrong address, not a flake.
  const Tail tail = read_tail(k_buildkit + "build-export-registry-unreachable.stderr");
  EXPECT_EQ(classify_failure(tail, std::nullopt, 1, 3, builtins()).verdict, Verdict::permanent);
}

TEST(ClassifyFailure, ChecksumOfMissingFileIsPermanent) {
  // As reported in docker/buildx#1075: a COPY source missing from the context.
  const Tail tail = {"error: failed to solve: failed to compute cache key: failed to calculate "
                     "checksum of ref vseuhyvqn4l8k1dz9mg7kjmgb::d29fvtefjg5fqipg4a6jo3lrp: "
                     "\"/dist/kubernetes-ingress_linux_amd64/nginx-ingress\": not found"};
  const FailureVerdict verdict = classify_failure(tail, std::nullopt, 1, 3, builtins());
  EXPECT_EQ(verdict.verdict, Verdict::permanent);
  EXPECT_EQ(verdict.class_name, "");
}

// ---- classify_failure: retry and refused-identical ----

TEST(ClassifyFailure, FirstRecordedRegistryFlakeIsRetried) {
  const Tail tail = read_tail(k_buildah + "build-registry-ping-503-1.combined");
  const FailureVerdict verdict = classify_failure(tail, std::nullopt, 1, 3, builtins());
  EXPECT_EQ(verdict.verdict, Verdict::retry);
  EXPECT_EQ(verdict.class_name, "registry-network");
  EXPECT_EQ(verdict.matched_line, tail.back());
  EXPECT_EQ(verdict.reason, "transient failure (class 'registry-network')");
}

TEST(ClassifyFailure, RecordedBuildahStatusFormsAreRegistryNetwork) {
  for (const char* name :
       {"build-registry-ping-503-1", "build-registry-manifest-503", "build-registry-429-1",
        "build-registry-429-bare", "build-registry-reset-1"}) {
    const Tail tail = read_tail(k_buildah + name + ".combined");
    const FailureVerdict verdict = classify_failure(tail, std::nullopt, 1, 3, builtins());
    EXPECT_EQ(verdict.class_name, "registry-network") << name;
    EXPECT_EQ(verdict.matched_line, tail.back()) << name;
  }
}

TEST(ClassifyFailure, ARegistryThatDroppedTheConnectionMidPushIsAFlake) {
  const Tail tail =
      read_tail(std::string(KILN_TEST_FIXTURES) + "/skopeo-1.9.3/push-dropped.combined");
  const FailureVerdict verdict = classify_failure(tail, std::nullopt, 1, 3, builtins());
  EXPECT_EQ(verdict.verdict, Verdict::retry);
  EXPECT_EQ(verdict.class_name, "registry-network");
  // The same words from a composed `: EOF` ending, as the registry's close after the body reads.
  const FailureVerdict eof =
      classify_failure({"Error: writing blob: Patch \"http://r/v2/a/blobs/uploads/1\": EOF"},
                       std::nullopt, 1, 3, builtins());
  EXPECT_EQ(eof.class_name, "registry-network");
}

TEST(ClassifyFailure, TwoRecordedAttemptsDifferingOnlyInTimestampsAreRefused) {
  // Two real buildah runs against a registry answering 429: the retry warnings' timestamps
  // differ, nothing else does.
  const Tail first = read_tail(k_buildah + "build-registry-429-1.combined");
  const Tail second = read_tail(k_buildah + "build-registry-429-2.combined");
  ASSERT_NE(first, second);
  const FailureVerdict verdict = classify_failure(second, first, 2, 3, builtins());
  EXPECT_EQ(verdict.verdict, Verdict::refused_identical);
  EXPECT_EQ(verdict.class_name, "registry-network");
  EXPECT_EQ(verdict.matched_line, second.back());
  EXPECT_EQ(verdict.reason, "failed exactly as attempt 1 did (class 'registry-network'); a flake "
                            "changes between attempts, this did not");
}

TEST(ClassifyFailure, TwoRecordedIdenticalAttemptsAreRefused) {
  const Tail first = read_tail(k_buildah + "build-registry-ping-503-1.combined");
  const Tail second = read_tail(k_buildah + "build-registry-ping-503-2.combined");
  EXPECT_EQ(classify_failure(second, first, 2, 3, builtins()).verdict, Verdict::refused_identical);
}

TEST(ClassifyFailure, TrailingBlankLinesDoNotMakeATailDifferent) {
  const Tail first = read_tail(k_buildah + "build-registry-ping-503-1.combined");
  Tail second = first;
  second.push_back("");
  second.push_back("  ");
  EXPECT_EQ(classify_failure(second, first, 2, 3, builtins()).verdict, Verdict::refused_identical);
}

TEST(ClassifyFailure, ElapsedPrefixesAndDigestsDoNotMakeATailDifferent) {
  // Recorded failures against themselves with every elapsed time and digest changed as a rerun
  // changes them (the changes are derived here, not recorded). The classes are chain-file ones:
  // no built-in class matches these failures.
  const auto rerun = [](Tail tail) {
    for (std::string& line : tail) {
      line = std::regex_replace(line, std::regex(R"(^(#\d+) \d+\.\d+ )"), "$1 9.876 ");
      line = std::regex_replace(line, std::regex("3907e4cb0dc8"), "aaaabbbbcccc");
    }
    return tail;
  };
  const Tail run = read_tail(k_buildkit + "build-fail-run.stderr");
  ASSERT_NE(rerun(run), run);
  const std::vector<TransientClass> exit_3 = {transient("exit-3", {"exit code: 3$"})};
  EXPECT_EQ(classify_failure(rerun(run), run, 2, 3, exit_3).verdict, Verdict::refused_identical);

  const Tail push = read_tail(k_buildkit + "build-export-registry-unreachable.stderr");
  ASSERT_NE(rerun(push), push);
  const std::vector<TransientClass> refused = {
      transient("registry-refused", {"connection refused"})};
  EXPECT_EQ(classify_failure(rerun(push), push, 2, 3, refused).verdict, Verdict::refused_identical);
}

TEST(ClassifyFailure, ADifferentErrorOfTheSameClassIsRetried) {
  // Real runs: the registry first fails its ping, then a manifest read.
  const Tail first = read_tail(k_buildah + "build-registry-ping-503-1.combined");
  const Tail second = read_tail(k_buildah + "build-registry-manifest-503.combined");
  const FailureVerdict verdict = classify_failure(second, first, 2, 3, builtins());
  EXPECT_EQ(verdict.verdict, Verdict::retry);
  EXPECT_EQ(verdict.reason, "transient failure (class 'registry-network')");
}

TEST(ClassifyFailure, EphemeralPortsAreNotNormalisedAway) {
  // Two real runs against a resetting registry differ in their local ports, which
  // normalise_line leaves alone: the second failure is retried.
  const Tail first = read_tail(k_buildah + "build-registry-reset-1.combined");
  const Tail second = read_tail(k_buildah + "build-registry-reset-2.combined");
  EXPECT_EQ(classify_failure(second, first, 2, 3, builtins()).verdict, Verdict::retry);
}

TEST(ClassifyFailure, SnapshotChecksumIsRetriedDespiteAnIdenticalTailAndAMountIsNot) {
  // As reported in docker/build-push-action#937: a walk of a mount that went away mid-build.
  const Tail tail = {"#12 ERROR: failed to calculate checksum of ref "
                     "sskfjkf86ntslfbvad7pfphx5::rf06xaafkysvr9wmnmknn2uff: failed to walk "
                     "/tmp/buildkit-mount3059587245/config: lstat "
                     "/tmp/buildkit-mount3059587245/config: no such file or directory"};
  const FailureVerdict verdict = classify_failure(tail, tail, 2, 3, builtins());
  EXPECT_EQ(verdict.verdict, Verdict::retry);
  EXPECT_EQ(verdict.class_name, "snapshot-checksum");
  EXPECT_EQ(verdict.matched_line, tail.front());
  EXPECT_EQ(verdict.reason, "failed exactly as attempt 1 did (class 'snapshot-checksum'), "
                            "retried anyway: this class clears on a later attempt");

  const Tail mount = {"failed to solve: failed to mount /tmp/buildkit-mount850435638: "
                      "[{Type:bind Source:/tmp/img/runc/native/snapshots/snapshots/2 "
                      "Options:[ro rbind]}]: operation not permitted"};
  EXPECT_EQ(classify_failure(mount, std::nullopt, 1, 3, builtins()).verdict, Verdict::retry);
  const FailureVerdict again = classify_failure(mount, mount, 2, 3, builtins());
  EXPECT_EQ(again.verdict, Verdict::refused_identical);
  EXPECT_EQ(again.class_name, "snapshot-mount");
}

TEST(ClassifyFailure, EngineClassesReadOnlyWhatTheEnginePrintedAndAFetchReadsTheStep) {
  // A test suite inside a RUN prints an engine's words and fails: a failure of its own.
  const Tail tail = {"test_stream.py::test_read FAILED", "E   unexpected EOF",
                     "E   database is locked", "Error: building at STEP: exit status 1"};
  const Tail engine = {"Error: building at STEP: exit status 1"};
  const FailureVerdict step = classify_failure(tail, std::nullopt, 1, 3, builtins(), &engine);
  EXPECT_EQ(step.verdict, Verdict::permanent);
  EXPECT_EQ(step.class_name, "");
  // The same words from the engine itself are its flake.
  const Tail pulled = {"Error: creating build container: reading blob: unexpected EOF"};
  EXPECT_EQ(classify_failure(pulled, std::nullopt, 1, 3, builtins(), &pulled).class_name,
            "registry-network");
  // A fetch the step made is read in the step's output.
  const Tail fetch = {"curl: (56) Recv failure: Connection reset by peer",
                      "Error: building at STEP: exit status 56"};
  const Tail fetch_engine = {"Error: building at STEP: exit status 56"};
  EXPECT_EQ(classify_failure(fetch, std::nullopt, 1, 3, builtins(), &fetch_engine).class_name,
            "fetch-network");
}

// ---- classify_failure: exhausted ----

TEST(ClassifyFailure, LastAttemptIsExhausted) {
  const Tail first = read_tail(k_buildah + "build-registry-ping-503-1.combined");
  const Tail second = read_tail(k_buildah + "build-registry-manifest-503.combined");
  const FailureVerdict verdict = classify_failure(second, first, 3, 3, builtins());
  EXPECT_EQ(verdict.verdict, Verdict::exhausted);
  EXPECT_EQ(verdict.class_name, "registry-network");
  EXPECT_EQ(verdict.reason, "transient failure (class 'registry-network') on attempt 3 of 3; the "
                            "retry budget is used up");
  // An identical tail outranks exhaustion: it is the more telling reason to stop.
  EXPECT_EQ(classify_failure(first, first, 3, 3, builtins()).verdict, Verdict::refused_identical);
  EXPECT_EQ(classify_failure(first, std::nullopt, 1, 1, builtins()).verdict, Verdict::exhausted);
}

// ---- chain-file classes ----

TEST(ClassifyFailure, ChainFileClassMatchesARecordedFailure) {
  const Tail tail = read_tail(k_buildkit + "build-export-registry-unreachable.stderr");
  const FailureVerdict verdict =
      classify_failure(tail, std::nullopt, 1, 3,
                       with_builtins({transient("registry-refused", {"connection refused"})}));
  EXPECT_EQ(verdict.verdict, Verdict::retry);
  EXPECT_EQ(verdict.class_name, "registry-refused");
  // Two lines match; the last one, closest to the failure, is quoted verbatim.
  EXPECT_EQ(verdict.matched_line, tail.back());
  EXPECT_EQ(verdict.matched_line.rfind("error: failed to solve: error writing layer blob", 0), 0u);
}

TEST(ClassifyFailure, ClassOrderDecides) {
  const Tail first = read_tail(k_buildah + "build-registry-429-1.combined");
  const Tail second = read_tail(k_buildah + "build-registry-429-2.combined");
  const TransientClass rate_limit = transient("rate-limit", {"toomanyrequests"}, true);

  std::vector<TransientClass> after = builtins();
  after.push_back(rate_limit);
  const FailureVerdict builtin_first = classify_failure(second, first, 2, 3, after);
  EXPECT_EQ(builtin_first.class_name, "registry-network");
  EXPECT_EQ(builtin_first.verdict, Verdict::refused_identical);

  const FailureVerdict chain_first =
      classify_failure(second, first, 2, 3, with_builtins({rate_limit}));
  EXPECT_EQ(chain_first.class_name, "rate-limit");
  EXPECT_EQ(chain_first.verdict, Verdict::retry);
}

TEST(ClassifyFailure, LastMatchingLineAcrossPatternsIsQuoted) {
  const Tail tail = {"layer not known", "database is locked", "a later unrelated line", ""};
  const FailureVerdict verdict = classify_failure(tail, std::nullopt, 1, 3, builtins());
  EXPECT_EQ(verdict.class_name, "storage-contention");
  EXPECT_EQ(verdict.matched_line, "database is locked");
}

TEST(ClassifyFailure, OnlyTheTailWindowIsRead) {
  Tail tail = {"layer not known"};
  tail.insert(tail.end(), k_failure_tail_lines, "error: compile failed in foo.c");
  EXPECT_EQ(classify_failure(tail, std::nullopt, 1, 3, builtins()).verdict, Verdict::permanent);
  tail.erase(tail.begin() + 1);
  EXPECT_EQ(classify_failure(tail, std::nullopt, 1, 3, builtins()).verdict, Verdict::retry);
}

// ---- cooldown_before ----

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(CooldownBefore, DefaultPolicyDoublesFromFiveAndCapsAtSixty) {
  const RetryPolicy policy;
  EXPECT_EQ(cooldown_before(0, policy), seconds(0));
  EXPECT_EQ(cooldown_before(1, policy), seconds(0));
  EXPECT_EQ(cooldown_before(2, policy), seconds(5));
  EXPECT_EQ(cooldown_before(3, policy), seconds(10));
  EXPECT_EQ(cooldown_before(4, policy), seconds(20));
  EXPECT_EQ(cooldown_before(5, policy), seconds(40));
  EXPECT_EQ(cooldown_before(6, policy), seconds(60));
  EXPECT_EQ(cooldown_before(7, policy), seconds(60));
  EXPECT_EQ(cooldown_before(100000, policy), seconds(60));
}

TEST(CooldownBefore, FieldGitClonePolicyCapsAtThirty) {
  const RetryPolicy policy{3, seconds(10), seconds(30)};
  EXPECT_EQ(cooldown_before(2, policy), seconds(10));
  EXPECT_EQ(cooldown_before(3, policy), seconds(20));
  EXPECT_EQ(cooldown_before(4, policy), seconds(30));
}

TEST(CooldownBefore, NeverNegativeAndTheLargestCapStaysExact) {
  EXPECT_EQ(cooldown_before(2, RetryPolicy{3, seconds(-5), seconds(60)}), seconds(0));
  EXPECT_EQ(cooldown_before(3, RetryPolicy{3, seconds(5), seconds(-1)}), seconds(0));
  EXPECT_EQ(cooldown_before(-4, RetryPolicy{}), seconds(0));
  // A day, the most the loader takes: no int in between may overflow (2.2e6 s once did).
  EXPECT_EQ(cooldown_before(60, RetryPolicy{3, seconds(86400), seconds(86400)}), seconds(86400));
}

// ---- stalls ----

TEST(ClassifyStall, AStallIsRetriedOnceThenRefusedAtTheSameStep) {
  FailureVerdict first = classify_stall("step 2/3: RUN fetch", std::nullopt, 1, 3, 3600);
  EXPECT_EQ(first.verdict, Verdict::retry);
  EXPECT_EQ(first.class_name, "stall");
  EXPECT_NE(first.reason.find("no output for 3600s at step 2/3: RUN fetch"), std::string::npos);

  FailureVerdict elsewhere =
      classify_stall("step 3/3: RUN make", std::string("step 2/3: RUN fetch"), 2, 3, 3600);
  EXPECT_EQ(elsewhere.verdict, Verdict::retry);

  FailureVerdict again =
      classify_stall("step 2/3: RUN fetch", std::string("step 2/3: RUN fetch"), 2, 3, 3600);
  EXPECT_EQ(again.verdict, Verdict::refused_identical);
  EXPECT_NE(again.reason.find("same step as attempt 1"), std::string::npos);

  EXPECT_EQ(classify_stall("step 3/3: RUN make", std::nullopt, 3, 3, 60).verdict,
            Verdict::exhausted);
}

// ---- patterns that meet engine output ----

TEST(ClassifyFailure, A128KiBLineThroughAUserPatternIsClassifiedWithoutCrashing) {
  // std::regex recursed once per character here and overflowed the stack (SIGSEGV).
  std::string line = "error: " + std::string(128 * 1024, 'x') + " timeout";
  const std::vector<TransientClass> user = {transient("user", {"error: .*timeout"})};
  FailureVerdict verdict = classify_failure({line}, std::nullopt, 1, 3, user);
  EXPECT_EQ(verdict.verdict, Verdict::retry);
  EXPECT_EQ(verdict.matched_line.size(), line.size());
}

TEST(NormaliseLine, LongHexRunsAndLongLinesStayLinear) {
  // 30,000 hex digits crashed std::regex in the identical-failure check.
  std::string hex(30000, 'a');
  EXPECT_EQ(normalise_line("digest " + hex + " done"), "digest <id> done");
  std::string wide(1 << 20, 'z');
  EXPECT_EQ(normalise_line(wide), wide);
}

TEST(BuiltinTransientClasses, MatchWhateverTheCase) {
  for (const char* line : {"curl: (56) Recv failure: Connection reset by peer",
                           "CURL: (56) RECV FAILURE: CONNECTION RESET BY PEER"}) {
    FailureVerdict verdict = classify_failure({line}, std::nullopt, 1, 3, builtins());
    EXPECT_EQ(verdict.class_name, "fetch-network") << line;
    EXPECT_EQ(verdict.verdict, Verdict::retry) << line;
  }
  FailureVerdict registry = classify_failure({"Error: writing blob: Connection Reset By Peer"},
                                             std::nullopt, 1, 3, builtins());
  EXPECT_EQ(registry.class_name, "registry-network");
}

// ---- fetch-network: curl, wget, pip, apt-get and git as they print network failures ----

// Every recording in tests/fixtures/fetch-network (its README says how each was made) with the
// line that must be quoted as the match, or nullptr where the failure must stay permanent.
struct FetchRecording {
  const char* name;
  const char* matched; // a part of the matched line
};

constexpr const char* k_permanent = nullptr;

const FetchRecording k_fetch_recordings[] = {
    // A fetch that worked: its lines sit in the tail of any later step that fails.
    {"curl-ok", k_permanent},
    {"wget-ok", k_permanent},
    {"pip-download-ok", k_permanent},
    {"pip-install-ok", k_permanent},
    {"apt-ok", k_permanent},
    {"git-clone-http-ok", k_permanent},
    {"git-clone-git-ok", k_permanent},
    {"git-fetch-http-ok", k_permanent},
    {"git-fetch-git-ok", k_permanent},
    // Nothing listens at the address: a wrong address or port.
    {"curl-refused", k_permanent},
    {"wget-refused", k_permanent},
    {"pip-download-refused", k_permanent},
    {"pip-install-refused", k_permanent},
    {"apt-refused", k_permanent},
    {"git-clone-http-refused", k_permanent},
    {"git-clone-git-refused", k_permanent},
    // The resolver did not answer.
    {"curl-dns-dead", "curl: (6) Could not resolve host: mirror.kiln-fixture.test"},
    {"wget-dns-dead", "failed: Temporary failure in name resolution."},
    {"pip-download-dns-dead", "[Errno -3] Temporary failure in name resolution"},
    {"pip-install-dns-dead", "[Errno -3] Temporary failure in name resolution"},
    {"apt-dns-dead", "W: Failed to fetch http://mirror.kiln-fixture.test:8000/apt/./InRelease  "
                     "Temporary failure resolving 'mirror.kiln-fixture.test'"},
    {"git-clone-http-dns-dead", "Could not resolve host: mirror.kiln-fixture.test"},
    {"git-clone-git-dns-dead", "(Temporary failure in name resolution)"},
    // The resolver answered that the name does not exist. curl, and git through libcurl, say
    // the same as for a resolver that did not answer.
    {"curl-dns-nxdomain", "curl: (6) Could not resolve host: mirror.kiln-fixture.test"},
    {"wget-dns-nxdomain", k_permanent},
    {"pip-download-dns-nxdomain", k_permanent},
    {"pip-install-dns-nxdomain", k_permanent},
    {"apt-dns-nxdomain", k_permanent},
    {"git-clone-http-dns-nxdomain", "Could not resolve host: mirror.kiln-fixture.test"},
    {"git-clone-git-dns-nxdomain", k_permanent},
    // Reset before an answer.
    {"curl-reset", "curl: (56) Recv failure: Connection reset by peer"},
    {"curl-meter-reset", "curl: (56) Recv failure: Connection reset by peer"},
    {"wget-reset", "Read error (Connection reset by peer) in headers."},
    {"pip-download-reset", "ConnectionResetError(104, 'Connection reset by peer')"},
    {"pip-install-reset", "ConnectionResetError(104, 'Connection reset by peer')"},
    {"apt-reset", "InRelease  Connection failed [IP: 127.0.0.1 8101]"},
    {"git-clone-http-reset", "Recv failure: Connection reset by peer"},
    {"git-clone-git-reset", "fatal: read error: Connection reset by peer"},
    // Closed without an answer. Over git:// that reads as a refused or missing repository.
    {"curl-hangup", "curl: (52) Empty reply from server"},
    {"wget-hangup", "HTTP request sent, awaiting response... No data received."},
    {"pip-download-hangup", "RemoteDisconnected('Remote end closed connection without response')"},
    {"pip-install-hangup", "RemoteDisconnected('Remote end closed connection without response')"},
    {"apt-hangup", "InRelease  Connection failed [IP: 127.0.0.1 8107]"},
    {"git-clone-http-hangup", "Empty reply from server"},
    {"git-clone-git-hangup", k_permanent},
    // Reset mid-transfer.
    {"curl-cut", "curl: (56) Recv failure: Connection reset by peer"},
    {"wget-cut", "(Connection reset by peer). Giving up."},
    {"pip-download-cut", "(\"Connection broken: ConnectionResetError(104, "},
    {"pip-install-cut", "(\"Connection broken: ConnectionResetError(104, "},
    {"apt-cut", "kilnfx-demo_1.0_all.deb  Undetermined Error [IP: 127.0.0.1 8102]"},
    {"git-clone-http-cut", "fatal: early EOF"},
    {"git-clone-git-cut", "fatal: early EOF"},
    {"git-fetch-http-cut", "fatal: early EOF"},
    {"git-fetch-git-cut", "fatal: early EOF"},
    // Closed cleanly mid-transfer. pip takes the short file and reports a hash mismatch, which
    // a wrongly pinned hash also gives.
    {"curl-eof", "curl: (18) transfer closed with "},
    {"wget-eof", "Connection closed at byte "},
    {"pip-download-eof", k_permanent},
    {"pip-install-eof", k_permanent},
    {"apt-eof", "kilnfx-demo_1.0_all.deb  Undetermined Error [IP: 127.0.0.1 8103]"},
    {"git-clone-http-eof", "fatal: early EOF"},
    {"git-clone-git-eof", "fatal: early EOF"},
    {"git-fetch-http-eof", "fatal: early EOF"},
    {"git-fetch-git-eof", "fatal: early EOF"},
    // No answer until the client's own timeout.
    {"curl-timeout", "curl: (28) Operation timed out after 500"},
    {"wget-timeout", "Read error (Connection timed out) in headers."},
    {"pip-download-timeout", "ReadTimeoutError(\"HTTPConnectionPool(host='127.0.0.1', port=8104)"},
    {"pip-install-timeout", "ReadTimeoutError(\"HTTPConnectionPool(host='127.0.0.1', port=8104)"},
    {"apt-timeout", "InRelease  Connection failed [IP: 127.0.0.1 8104]"},
    {"git-clone-http-timeout",
     "Operation too slow. Less than 1000 bytes/sec transferred the last 5 "
     "seconds"},
    // 502, 503 and 429 for every request. pip says nothing of an index page's status.
    {"curl-502", "curl: (22) The requested URL returned error: 502"},
    {"wget-502", "ERROR 502: Bad Gateway."},
    {"pip-download-502", k_permanent},
    {"pip-install-502", k_permanent},
    {"apt-502", "InRelease  502  Bad Gateway [IP: 127.0.0.1 8108]"},
    {"git-clone-http-502", "The requested URL returned error: 502"},
    {"curl-503", "curl: (22) The requested URL returned error: 503"},
    {"wget-503", "ERROR 503: Service Unavailable."},
    {"pip-download-503", k_permanent},
    {"pip-install-503", k_permanent},
    {"apt-503", "InRelease  503  Service Unavailable [IP: 127.0.0.1 8105]"},
    {"git-clone-http-503", "The requested URL returned error: 503"},
    {"curl-429", "curl: (22) The requested URL returned error: 429"},
    {"wget-429", "ERROR 429: Too Many Requests."},
    {"pip-download-429", k_permanent},
    {"pip-install-429", k_permanent},
    {"apt-429", "InRelease  429  Too Many Requests [IP: 127.0.0.1 8109]"},
    {"git-clone-http-429", "The requested URL returned error: 429"},
    // 503 for the package file only, after the index answered.
    {"pip-download-file-503", "(Caused by ResponseError('too many 503 error responses'))"},
    {"pip-install-file-503", "(Caused by ResponseError('too many 503 error responses'))"},
    {"apt-file-503", "kilnfx-demo_1.0_all.deb  503  Service Unavailable [IP: 127.0.0.1 8110]"},
    // Not there.
    {"curl-404", k_permanent},
    {"wget-404", k_permanent},
    {"pip-download-404", k_permanent},
    {"pip-install-404", k_permanent},
    {"apt-404", k_permanent},
    {"git-clone-http-404", k_permanent},
    {"pip-download-file-404", k_permanent},
    {"pip-install-file-404", k_permanent},
    {"apt-file-404", k_permanent},
};

TEST(FetchNetwork, EveryRecordingIsListed) {
  std::set<std::string> listed;
  for (const FetchRecording& recording : k_fetch_recordings) {
    EXPECT_TRUE(listed.insert(recording.name).second) << recording.name << " is listed twice";
  }
  std::set<std::string> on_disk;
  for (const auto& entry : std::filesystem::directory_iterator(k_fetch)) {
    if (entry.path().extension() == ".combined") {
      on_disk.insert(entry.path().stem().string());
    }
  }
  EXPECT_EQ(on_disk, listed);
}

TEST(FetchNetwork, RecordedTransientFailuresAreRetriedAndTheRestStayPermanent) {
  for (const FetchRecording& recording : k_fetch_recordings) {
    SCOPED_TRACE(recording.name);
    const Tail tail = read_tail(k_fetch + recording.name + ".combined");
    const FailureVerdict verdict = classify_failure(tail, std::nullopt, 1, 3, builtins());
    if (recording.matched == k_permanent) {
      EXPECT_EQ(verdict.verdict, Verdict::permanent);
      EXPECT_EQ(verdict.class_name, "") << verdict.matched_line;
      continue;
    }
    EXPECT_EQ(verdict.verdict, Verdict::retry);
    EXPECT_EQ(verdict.class_name, "fetch-network");
    EXPECT_NE(verdict.matched_line.find(recording.matched), std::string::npos)
        << verdict.matched_line;
  }
}

// A recording as buildah prints it in a RUN step: the step's echo, the output, buildah's own
// closing lines (their forms from tests/fixtures/buildah-1.28.2/build-fail-run.combined).
Tail through_buildah(const std::string& name) {
  const std::string command =
      read_tail(k_fetch + name + ".cmd").front() + " && echo 'could not resolve host: none'";
  auto output = BuildahEngine("chroot").read_output();
  output->feed("STEP 1/2: FROM localhost/kt-base:dev");
  output->feed("STEP 2/2: RUN " + command);
  for (const std::string& line : read_tail(k_fetch + name + ".combined")) {
    output->feed(line);
  }
  const std::string status = read_tail(k_fetch + name + ".rc").front();
  output->feed("subprocess exited with status " + status);
  output->feed("subprocess exited with status " + status);
  output->feed("Error: building at STEP \"RUN " + command + "\": exit status " + status);
  return output->evidence();
}

TEST(FetchNetwork, ARunStepThroughBuildahKeepsItsVerdict) {
  // The step's command names the failure in its text; only the tool's own line may count.
  const FailureVerdict reset =
      classify_failure(through_buildah("curl-reset"), std::nullopt, 1, 3, builtins());
  EXPECT_EQ(reset.class_name, "fetch-network");
  EXPECT_EQ(reset.matched_line, "curl: (56) Recv failure: Connection reset by peer");
  EXPECT_EQ(
      classify_failure(through_buildah("curl-refused"), std::nullopt, 1, 3, builtins()).verdict,
      Verdict::permanent);
  const FailureVerdict apt =
      classify_failure(through_buildah("apt-dns-dead"), std::nullopt, 1, 3, builtins());
  EXPECT_EQ(apt.class_name, "fetch-network");
  EXPECT_NE(apt.matched_line.find("Temporary failure resolving"), std::string::npos);
}

TEST(FetchNetwork, AGitCutBeforeThePackHeaderIsRetried) {
  // Where the cut lands in git's stream differs from run to run: in an earlier run of
  // record.sh, git-fetch-git-eof printed only these two lines.
  const Tail tail = {"fetch-pack: unexpected disconnect while reading sideband packet",
                     "fatal: protocol error: bad pack header"};
  const FailureVerdict verdict = classify_failure(tail, std::nullopt, 1, 3, builtins());
  EXPECT_EQ(verdict.class_name, "fetch-network");
  EXPECT_EQ(verdict.matched_line, tail.front());
}

TEST(FetchNetwork, ASecondIdenticalFetchFailureIsRefused) {
  // curl prints nothing that changes between attempts: a host that stays unresolvable fails
  // the same way twice, and the second time is not retried.
  const Tail tail = read_tail(k_fetch + "curl-dns-nxdomain.combined");
  const FailureVerdict verdict = classify_failure(tail, tail, 2, 3, builtins());
  EXPECT_EQ(verdict.verdict, Verdict::refused_identical);
  EXPECT_EQ(verdict.class_name, "fetch-network");
}

TEST(FetchNetwork, LinesThatOnlyMentionTheWordsStayPermanent) {
  for (const char* line : {
           "src/net/timeout.c:42:7: error: 'CURLE_OPERATION_TIMEDOUT' undeclared (first use in "
           "this function)",
           "src/http/read_error.c:10:1: error: expected ';' before '}' token",
           "make[2]: *** [Makefile:120: src/http/empty_reply_from_server.o] Error 1",
           "FAILED tests/test_client.py::test_could_not_resolve_host - AssertionError: assert 0 "
           "== 6",
           "tests/test_fetch.py::test_read_timeout_error PASSED",
           "cc1: fatal error: read error: Is a directory",
           "ld: error: connection_failed.o: undefined reference to `ip_address'",
           "error: RPC failed; curl 22 The requested URL returned error: 404",
           "warning: early EOF in string literal",
           "ERROR 5034: license check failed",
           "Fetched 1065 kB in 0s (24.9 MB/s)",
       }) {
    const FailureVerdict verdict = classify_failure({line}, std::nullopt, 1, 3, builtins());
    EXPECT_EQ(verdict.verdict, Verdict::permanent) << line << " matched " << verdict.class_name;
  }
}

TEST(FetchNetwork, ACompileFailureAfterWorkingFetchesIsPermanent) {
  // The fetches of the same RUN step worked; the compile after them failed.
  Tail tail;
  for (const char* name : {"curl-ok", "wget-ok", "pip-install-ok", "apt-ok", "git-clone-http-ok"}) {
    for (const std::string& line : read_tail(k_fetch + name + ".combined")) {
      tail.push_back(line);
    }
  }
  tail.push_back("src/fetch.c:12:5: error: 'timeout' undeclared (first use in this function)");
  tail.push_back("make: *** [Makefile:4: fetch.o] Error 1");
  EXPECT_EQ(classify_failure(tail, std::nullopt, 1, 3, builtins()).verdict, Verdict::permanent);
}

} // namespace
} // namespace kiln
