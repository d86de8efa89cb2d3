// The manifest as the fold of a run's record events: what a run writes and `kiln records
// replay` rebuilds.
#include "driver/record_fold.h"

#include <gtest/gtest.h>

#include "driver/abandoned_runs.h"
#include "driver/events.h"
#include "driver/records.h"
#include "driver/run_folder.h"
#include "temp_dir.h"
#include "util/clock.h"
#include "util/fs.h"

namespace kiln {
namespace {

using Json = nlohmann::ordered_json;

RunRecord two_stage_run() {
  RunRecord run;
  run.run_id = "20261205-100000-abcd";
  run.chain_name = "hello";
  run.engine = "buildah";
  run.started = "2026-12-05T10:00:00Z";
  for (const char* name : {"base", "app"}) {
    StageRecord stage;
    stage.name = name;
    stage.needs =
        name == std::string("app") ? std::vector<std::string>{"base"} : std::vector<std::string>{};
    run.stages.push_back(stage);
  }
  return run;
}

/// The events a run's save() sends for `run`: every part.
std::string record_events(const RunRecord& run, long& seq) {
  std::string text =
      event_line(++seq, "2026-12-05T10:00:00Z", 0, "run.record", {{"record", run_part_json(run)}});
  for (const auto& stage : run.stages) {
    text += event_line(++seq, "2026-12-05T10:00:00Z", 0, "stage.record",
                       {{"stage", stage.name}, {"record", stage_json(stage)}});
  }
  for (const auto& target : run.published) {
    text += event_line(++seq, "2026-12-05T10:00:00Z", 0, "publish.record",
                       {{"ref", target.ref}, {"record", publish_json(target)}});
  }
  return text;
}

RecordFold fold_of(const std::string& events) {
  RecordFold fold;
  size_t start = 0;
  for (size_t end; (end = events.find('\n', start)) != std::string::npos; start = end + 1) {
    auto applied = fold.apply_line(std::string_view(events).substr(start, end - start));
    EXPECT_TRUE(applied) << applied.error();
  }
  return fold;
}

TEST(RecordFold, TheRecordsPartsFoldToTheManifestTheRecordWrites) {
  RunRecord run = two_stage_run();
  long seq = 0;
  std::string events = record_events(run, seq);
  // The run goes on: an attempt, a gate, a publish; each save sends what changed.
  run.stages[0].status = "ok";
  AttemptRecord attempt;
  attempt.number = 1;
  attempt.verdict = "ok";
  attempt.seconds = 1.2345;
  attempt.matched_line = "caf\xe9 latin-1 output"; // not UTF-8: replaced, in both
  run.stages[0].attempts.push_back(attempt);
  run.stages[0].gates.push_back(GateRecord{"residue", "image of stage base", "pass", {}, "", {}});
  PublishRecord target;
  target.ref = "127.0.0.1:5000/hello:1";
  target.status = "published";
  target.done = {"push", "tag"};
  run.published.push_back(target);
  run.status = "ok";
  run.ended = "2026-12-05T10:01:00Z";
  run.resources.push_back(PhaseSummary{"build", 1.0, 50, 90, 3.2, 40.1, 12});
  events += record_events(run, seq);
  // Non-record events change nothing.
  events += event_line(++seq, "2026-12-05T10:01:00Z", 60, "run.ended", {{"status", "ok"}});

  RecordFold fold = fold_of(events);
  EXPECT_TRUE(fold.has_run());
  EXPECT_TRUE(fold.ended());
  EXPECT_EQ(fold.manifest(), manifest_json(run));
}

TEST(RecordFold, ARecordedDemoRunReplaysToTheManifestItWrote) {
  std::filesystem::path fixtures = std::filesystem::path(KILN_TEST_FIXTURES) / "events";
  auto replayed = replay_manifest(fixtures / "demo-run.jsonl");
  ASSERT_TRUE(replayed) << replayed.error();
  auto written = read_file(fixtures / "demo-run.manifest.json");
  ASSERT_TRUE(written);
  EXPECT_EQ(*replayed, *written);
}

TEST(RecordFold, ARunPartCannotStandInForTheStagesOrThePublishTargets) {
  RunRecord run = two_stage_run();
  long seq = 0;
  std::string events = record_events(run, seq);
  Json part = run_part_json(run);
  part["stages"] = Json::array({"not a stage"});
  part["publish"] = 7;
  events += event_line(++seq, "t", 1, "run.record", {{"record", part}});
  EXPECT_EQ(fold_of(events).manifest(), manifest_json(run));
}

TEST(RecordFold, AStageKeepsThePlaceItFirstHadAndTheNewestRecord) {
  RunRecord run = two_stage_run();
  long seq = 0;
  std::string events = record_events(run, seq);
  run.stages[1].status = "running";
  events += event_line(++seq, "t", 1, "stage.record",
                       {{"stage", "app"}, {"record", stage_json(run.stages[1])}});
  RecordFold fold = fold_of(events);
  auto doc = Json::parse(fold.manifest());
  ASSERT_EQ(doc["stages"].size(), 2u);
  EXPECT_EQ(doc["stages"][0]["name"], "base");
  EXPECT_EQ(doc["stages"][1]["status"], "running");
  EXPECT_FALSE(fold.ended());
}

TEST(RecordFold, ARecordEventWithoutItsPartsIsAnErrorAndChangesNothing) {
  RecordFold fold;
  EXPECT_EQ(fold.apply_line("{\"type\":\"stage.record\",\"record\":{}}").error(),
            "a stage.record event names its stage as a \"stage\" string");
  EXPECT_EQ(fold.apply_line("{\"type\":\"run.record\",\"record\":[1]}").error(),
            "a run.record event carries its part as a \"record\" object");
  EXPECT_EQ(fold.apply_line("[1,2]").error(), "an event is a JSON object");
  EXPECT_EQ(fold.apply_line("{\"seq\":1}").error(), "the event has no \"type\" string");
  EXPECT_EQ(fold.apply_line("{\"type\":").error(), "not a JSON line");
  EXPECT_TRUE(fold.apply_line("{\"type\":\"step.started\",\"record\":7}"));
  EXPECT_FALSE(fold.has_run());
}

TEST(RecordFold, ReplayLeavesOutALineAKillCutShortAndNamesTheLineThatIsNoEvent) {
  testing::TempDir dir;
  RunRecord run = two_stage_run();
  long seq = 0;
  std::string events = record_events(run, seq);
  ASSERT_TRUE(write_file_atomic(dir.path() / "events.jsonl",
                                events + R"({"schema":2,"seq":9,"type":"stage.rec)"));
  auto replayed = replay_manifest(dir.path() / "events.jsonl");
  ASSERT_TRUE(replayed) << replayed.error();
  EXPECT_EQ(*replayed, manifest_json(run));

  ASSERT_TRUE(write_file_atomic(dir.path() / "events.jsonl", events + "garbage\n"));
  EXPECT_EQ(replay_manifest(dir.path() / "events.jsonl").error(),
            (dir.path() / "events.jsonl").string() + ":4: not a JSON line");
  ASSERT_TRUE(write_file_atomic(dir.path() / "events.jsonl", "{\"type\":\"run.started\"}\n"));
  EXPECT_NE(replay_manifest(dir.path() / "events.jsonl").error().find("no run.record event"),
            std::string::npos);
}

TEST(RecordFold, TheWriterWritesTheManifestFromTheFoldAfterTheEvents) {
  testing::TempDir dir;
  RunRecord run = two_stage_run();
  std::vector<std::pair<std::string, bool>> written;
  {
    EventLog log(dir.path() / "events.jsonl", real_clock(), nullptr,
                 [&](const std::string& manifest, bool ended) {
                   // The events are on disk before the manifest that folds them.
                   auto events = read_file(dir.path() / "events.jsonl");
                   EXPECT_TRUE(events && events->find("run.record") != std::string::npos);
                   written.emplace_back(manifest, ended);
                 });
    log.emit(EventType::step_started, {{"stage", "base"}});
    log.flush();
    EXPECT_TRUE(written.empty()); // no record event: no manifest
    log.emit(EventType::run_record, {{"record", run_part_json(run)}});
    for (const auto& stage : run.stages) {
      log.emit(EventType::stage_record, {{"stage", stage.name}, {"record", stage_json(stage)}});
    }
    log.flush();
    ASSERT_FALSE(written.empty());
    EXPECT_EQ(written.back().first, manifest_json(run));
    EXPECT_FALSE(written.back().second);
    run.ended = "2026-12-05T10:01:00Z";
    log.emit(EventType::run_record, {{"record", run_part_json(run)}});
  }
  EXPECT_EQ(written.back().first, manifest_json(run));
  EXPECT_TRUE(written.back().second);
  auto replayed = replay_manifest(dir.path() / "events.jsonl");
  ASSERT_TRUE(replayed) << replayed.error();
  EXPECT_EQ(*replayed, manifest_json(run));
}

TEST(RecordFold, ADeadRunMarkedAbandonedStaysTheFoldOfItsEvents) {
  testing::TempDir dir;
  auto folder = RunFolder::create(dir.path(), SystemTime(std::chrono::seconds(1796220000)));
  ASSERT_TRUE(folder);
  RunRecord run = two_stage_run();
  run.run_id = folder->run_id();
  run.pid = 4242;
  run.stages[0].status = "running";
  AttemptRecord attempt;
  attempt.number = 1;
  run.stages[0].attempts.push_back(attempt);
  long seq = 0;
  std::string events = record_events(run, seq);
  ASSERT_TRUE(write_file_atomic(folder->path() / "events.jsonl", events + "{\"schema\":2,\"se"));
  ASSERT_TRUE(folder->write_manifest(run));

  ASSERT_EQ(mark_abandoned_runs(dir.path()).size(), 1u);
  auto manifest = read_file(folder->path() / "manifest.json");
  auto replayed = replay_manifest(folder->path() / "events.jsonl");
  ASSERT_TRUE(manifest && replayed) << (replayed ? "" : replayed.error());
  EXPECT_EQ(*manifest, *replayed);
  auto doc = Json::parse(*manifest);
  EXPECT_EQ(doc["status"], "abandoned");
  EXPECT_EQ(doc["stages"][0]["status"], "abandoned");
  EXPECT_EQ(doc["stages"][0]["attempts"][0]["verdict"], "abandoned");
  // The cut line is gone; the stream ends with run.ended, numbered on.
  auto text = read_file(folder->path() / "events.jsonl");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->find("\"se\n"), std::string::npos);
  auto last = Json::parse(text->substr(text->rfind('\n', text->size() - 2) + 1));
  EXPECT_EQ(last["type"], "run.ended");
  EXPECT_EQ(last["status"], "abandoned");
  EXPECT_EQ(last["seq"], seq + 4); // run.record, two stage.record, run.ended
}

} // namespace
} // namespace kiln
