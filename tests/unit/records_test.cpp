// driver/records on real files.
#include <fstream>
#include <set>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "driver/abandoned_runs.h"
#include "driver/records.h"
#include "driver/run_folder.h"
#include "util/fs.h"

namespace kiln {
namespace {

class RecordsTest : public ::testing::Test {
protected:
  void SetUp() override {
    m_root = std::filesystem::temp_directory_path() /
             ("kiln-records-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(m_root);
  }
  void TearDown() override { std::filesystem::remove_all(m_root); }

  /// 2026-12-02T14:00:00Z plus `seconds`.
  static SystemTime at(long seconds) {
    return SystemTime(std::chrono::seconds(1796220000 + seconds));
  }

  static RunRecord sample(const std::string& id, const std::string& status, double seconds) {
    RunRecord run;
    run.run_id = id;
    run.chain_name = "hello";
    run.engine = "buildah";
    run.engine_version = "1.28.2";
    run.status = status;
    StageRecord stage;
    stage.name = "base";
    stage.status = status == "ok" ? "ok" : "failed";
    stage.seconds = seconds;
    AttemptRecord attempt;
    attempt.number = 1;
    attempt.verdict = "retry";
    attempt.transient_class = "registry-network";
    attempt.matched_line = "dial tcp: i/o timeout";
    attempt.seconds = 1.23456;
    attempt.log = RunFolder::attempt_log("base", 1);
    stage.attempts.push_back(attempt);
    run.stages.push_back(stage);
    return run;
  }

  std::filesystem::path m_root;
};

TEST_F(RecordsTest, CreatesTheRunFolderAndPointsLatestAtItOnlyWhenAsked) {
  auto first = RunFolder::create(m_root, at(0));
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(first->run_id().substr(0, 16), "20261202-140000-");
  EXPECT_EQ(first->run_id().size(), 20u);
  EXPECT_TRUE(std::filesystem::is_directory(m_root / "runs" / first->run_id() / "stages"));
  // The record's room is set aside at once, and `latest` waits for the first manifest.
  EXPECT_EQ(std::filesystem::file_size(first->path() / ".record-headroom"), k_record_headroom);
  EXPECT_FALSE(std::filesystem::exists(m_root / "latest"));
  ASSERT_TRUE(first->point_latest());
  EXPECT_EQ(std::filesystem::read_symlink(m_root / "latest"), "runs/" + first->run_id());
  auto second = RunFolder::create(m_root, at(60));
  ASSERT_TRUE(second);
  ASSERT_TRUE(second->point_latest());
  EXPECT_EQ(std::filesystem::read_symlink(m_root / "latest"), "runs/" + second->run_id());
  EXPECT_FALSE(std::filesystem::exists(m_root / ("latest.tmp-" + second->run_id())));
}

TEST_F(RecordsTest, RunsStartedInTheSameSecondNeverShareAFolder) {
  std::set<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    auto folder = RunFolder::create(m_root, at(0));
    ASSERT_TRUE(folder) << folder.error();
    ids.insert(folder->run_id());
  }
  EXPECT_EQ(ids.size(), 50u);
}

TEST_F(RecordsTest, ManifestIsVersionedAndCarriesEveryAttempt) {
  auto folder = RunFolder::create(m_root, at(0));
  ASSERT_TRUE(folder);
  ASSERT_TRUE(folder->write_manifest(sample("20261202-140000-aaaa", "failed:base", 2.5)));
  std::ifstream in(folder->path() / "manifest.json");
  auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["schema"], k_manifest_schema);
  EXPECT_EQ(doc["status"], "failed:base");
  EXPECT_EQ(doc["engine"]["version"], "1.28.2");
  const auto& attempt = doc["stages"][0]["attempts"][0];
  EXPECT_EQ(attempt["transient_class"], "registry-network");
  EXPECT_EQ(attempt["matched_line"], "dial tcp: i/o timeout");
  EXPECT_EQ(attempt["seconds"], 1.235);
  EXPECT_EQ(attempt["log"], "stages/base.attempt-1.log");
  // Nothing but the manifest: the temporary file of the atomic write is gone.
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(folder->path())) {
    ++files;
  }
  EXPECT_EQ(files, 4u); // driver.log, manifest.json, stages/, the record's reserved room
}

TEST_F(RecordsTest, CompileReportsAreSummedAndRecorded) {
  RunRecord run = sample("20261202-140000-aaaa", "failed:base", 1);
  CompileReport report;
  report.add({10, 8, 2, 0, 1});
  report.add({5, 5, 0, 0, 0});
  run.stages[0].attempts[0].compile = report;
  run.stages[0].min_compile_requests = 20;
  run.stages[0].failure = "only 15 compile request(s) reached the compile cache";
  auto doc = nlohmann::json::parse(manifest_json(run));
  const auto& compile = doc["stages"][0]["attempts"][0]["compile"];
  EXPECT_EQ(compile["compile_requests"], 15);
  EXPECT_EQ(compile["hits"], 13);
  EXPECT_EQ(compile["misses"], 2);
  EXPECT_EQ(compile["bypasses"], 1);
  EXPECT_EQ(compile["reports"], 2);
  EXPECT_EQ(doc["stages"][0]["min_compile_requests"], 20);
  EXPECT_EQ(doc["stages"][0]["failure"], "only 15 compile request(s) reached the compile cache");
  run.stages[0].attempts[0].compile.reset();
  EXPECT_TRUE(
      nlohmann::json::parse(manifest_json(run))["stages"][0]["attempts"][0]["compile"].is_null());
}

// Each step's count may be as large as a stats line allows; their sum must not wrap.
TEST_F(RecordsTest, CompileReportSumsHoldAtTheLargestCount) {
  CompileReport report;
  for (int i = 0; i < 10; ++i) {
    report.add({1'000'000'000'000, 1, 0, 0, 0});
  }
  EXPECT_EQ(report.totals.compile_requests, 1'000'000'000'000);
  EXPECT_EQ(report.totals.hits, 10);
  EXPECT_EQ(report.reports, 10);
}

TEST_F(RecordsTest, InvalidUtf8InAQuotedLineStillWritesTheManifest) {
  RunRecord run = sample("20261202-140000-aaaa", "failed:base", 1);
  run.stages[0].attempts[0].matched_line = "caf\xe9: connection reset by peer";
  auto doc = nlohmann::json::parse(manifest_json(run));
  EXPECT_EQ(doc["stages"][0]["attempts"][0]["matched_line"],
            "caf\xef\xbf\xbd: connection reset by peer");
}

TEST_F(RecordsTest, DriverLogLinesAreTimestampedInUtc) {
  auto folder = RunFolder::create(m_root, at(0));
  ASSERT_TRUE(folder);
  folder->log("stage base: attempt 1/3 start");
  std::ifstream in(folder->path() / "driver.log");
  std::string line;
  std::getline(in, line);
  ASSERT_EQ(line.size(), 21 + std::string("stage base: attempt 1/3 start").size());
  EXPECT_EQ(line[10], 'T');
  EXPECT_EQ(line[19], 'Z');
  EXPECT_EQ(line.substr(21), "stage base: attempt 1/3 start");
}

TEST_F(RecordsTest, ALogCutByAFullDiskSaysWhereAndEveryOtherLogStops) {
  auto folder = RunFolder::create(m_root, at(0));
  ASSERT_TRUE(folder);
  auto other = folder->open_log("stages/other.attempt-1.log");
  ASSERT_TRUE(other);
  ASSERT_TRUE(other->write("before\n"));
  // /dev/full refuses every write with ENOSPC, as a full disk does.
  std::filesystem::create_symlink("/dev/full", folder->path() / "stages" / "full.attempt-1.log");
  auto full = folder->open_log("stages/full.attempt-1.log");
  ASSERT_TRUE(full);
  EXPECT_FALSE(full->write("lost\n"));
  EXPECT_EQ(full->cut_at(), 0u);
  ASSERT_EQ(folder->write_errors().size(), 1u);
  EXPECT_NE(folder->write_errors()[0].find("No space left on device (cut at byte 0)"),
            std::string::npos)
      << folder->write_errors()[0];
  // The reserved room went back to the filesystem, for the manifest.
  EXPECT_FALSE(std::filesystem::exists(folder->path() / ".record-headroom"));
  // Another engine log stops at its next write, with a line saying why; driver.log goes on.
  EXPECT_FALSE(other->write("after\n"));
  EXPECT_EQ(other->cut_at(), 7u);
  folder->log("the end");
  std::ifstream in(folder->path() / "stages/other.attempt-1.log");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("before\n\n[kiln] this log was cut here, at byte 7: the run's record ran "
                       "out of room",
                       0),
            0u)
      << text;
  std::ifstream driver(folder->path() / "driver.log");
  std::string log((std::istreambuf_iterator<char>(driver)), std::istreambuf_iterator<char>());
  EXPECT_NE(log.find("the end"), std::string::npos);
}

TEST_F(RecordsTest, AWriteThatFailedForAnotherReasonCutsOnlyItsOwnFileAndSaysWhy) {
  auto folder = RunFolder::create(m_root, at(0));
  ASSERT_TRUE(folder);
  auto other = folder->open_log("stages/other.attempt-1.log");
  ASSERT_TRUE(other);
  // A folder where the log should be: its open fails with EISDIR, not for want of room.
  std::filesystem::create_directories(folder->path() / "stages" / "odd.attempt-1.log");
  auto odd = folder->open_log("stages/odd.attempt-1.log");
  ASSERT_FALSE(odd);
  ASSERT_EQ(folder->write_errors().size(), 1u);
  EXPECT_NE(folder->write_errors()[0].find("Is a directory"), std::string::npos)
      << folder->write_errors()[0];
  // No room was given back and the other logs go on.
  EXPECT_TRUE(std::filesystem::exists(folder->path() / ".record-headroom"));
  EXPECT_TRUE(other->write("after\n"));
  EXPECT_FALSE(other->cut_at());
}

TEST(OutOfRoom, OnlyNoSpaceAndQuotaAreWantOfRoom) {
  EXPECT_TRUE(is_out_of_room("cannot write /r/x.log: No space left on device (cut at byte 7)"));
  EXPECT_TRUE(is_out_of_room("cannot write /r/manifest.json: Disk quota exceeded"));
  EXPECT_FALSE(is_out_of_room("cannot write /r/x.log: Too many open files"));
  EXPECT_FALSE(is_out_of_room("cannot write /r/x.log: Permission denied"));
}

TEST_F(RecordsTest, ADeadRunStillSayingRunningIsMarkedAbandoned) {
  auto dead = RunFolder::create(m_root, at(0));
  ASSERT_TRUE(dead);
  RunRecord run = sample(dead->run_id(), "running", 1);
  run.pid = 4242;
  run.host = "builder-7";
  run.stages[0].status = "running";
  run.stages[0].attempts[0].verdict = "running";
  ASSERT_TRUE(dead->write_manifest(run));
  auto done = RunFolder::create(m_root, at(60));
  ASSERT_TRUE(done->write_manifest(sample(done->run_id(), "ok", 1)));

  std::vector<std::string> marked = mark_abandoned_runs(m_root);
  ASSERT_EQ(marked.size(), 1u);
  EXPECT_NE(marked[0].find(dead->run_id()), std::string::npos);
  std::ifstream in(dead->path() / "manifest.json");
  auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["status"], "abandoned");
  EXPECT_NE(doc["status_reason"].get<std::string>().find("pid 4242 on builder-7"),
            std::string::npos);
  EXPECT_FALSE(doc["ended"].get<std::string>().empty());
  EXPECT_EQ(doc["stages"][0]["status"], "abandoned");
  EXPECT_EQ(doc["stages"][0]["attempts"][0]["verdict"], "abandoned");
  std::ifstream ok(done->path() / "manifest.json");
  EXPECT_EQ(nlohmann::json::parse(ok)["status"], "ok");
  EXPECT_TRUE(mark_abandoned_runs(m_root).empty());
}

TEST_F(RecordsTest, AnOlderManifestWithOtherTypesIsReadNotThrown) {
  auto folder = RunFolder::create(m_root, at(0));
  std::ofstream(folder->path() / "manifest.json")
      << R"({"status": 3, "stages": [{"name": "base", "status": "ok", "seconds": "forty"},)"
      << R"( 7, {"name": ["x"], "status": "ok"}]})";
  auto builds = last_ok_builds(m_root);
  ASSERT_EQ(builds.count("base"), 1u);
  EXPECT_EQ(builds["base"].seconds, 0);
  EXPECT_TRUE(mark_abandoned_runs(m_root).empty());
}

TEST_F(RecordsTest, EtaOfACachedBuildGivesWayToOneThatRanSteps) {
  auto ran = RunFolder::create(m_root, at(0));
  RunRecord built = sample("20261202-140000-aaaa", "ok", 300);
  built.stages[0].attempts[0].verdict = "ok";
  built.stages[0].attempts[0].steps_run = 5;
  built.stages[0].attempts[0].steps_cached = 1;
  ASSERT_TRUE(ran->write_manifest(built));
  auto cached = RunFolder::create(m_root, at(60));
  RunRecord all_cached = sample("20261202-140100-bbbb", "ok", 0.4);
  all_cached.stages[0].attempts[0].verdict = "ok";
  all_cached.stages[0].attempts[0].steps_run = 5;
  all_cached.stages[0].attempts[0].steps_cached = 5;
  ASSERT_TRUE(cached->write_manifest(all_cached));
  EXPECT_EQ(last_ok_builds(m_root)["base"].seconds, 300);
}

TEST_F(RecordsTest, EtaComesFromTheNewestSuccessfulRun) {
  auto old_ok = RunFolder::create(m_root, at(-86400));
  ASSERT_TRUE(old_ok->write_manifest(sample("20261201-100000-aaaa", "ok", 40)));
  auto newer_ok = RunFolder::create(m_root, at(0));
  ASSERT_TRUE(newer_ok->write_manifest(sample("20261202-100000-bbbb", "ok", 30)));
  auto newest_failed = RunFolder::create(m_root, at(3600));
  ASSERT_TRUE(newest_failed->write_manifest(sample("20261202-110000-cccc", "failed:base", 5)));
  auto builds = last_ok_builds(m_root);
  ASSERT_EQ(builds.count("base"), 1u);
  EXPECT_EQ(builds["base"].seconds, 30);
  EXPECT_EQ(builds["base"].run_id, newer_ok->run_id());
  EXPECT_TRUE(last_ok_builds(m_root / "nowhere").empty());
}

TEST(CriticalPath, IsTheChainOfNeedsWhoseBuildTimesAddUpToTheMost) {
  RunRecord run;
  auto stage = [&](std::string name, double seconds, std::vector<std::string> needs) {
    StageRecord& s = run.stages.emplace_back();
    s.name = std::move(name);
    s.seconds = seconds;
    s.needs = std::move(needs);
  };
  stage("base", 10, {});
  stage("ffmpeg", 300, {"base"});
  stage("opencv", 200, {"base"});
  stage("tvm", 100, {"opencv"});
  stage("merge", 20, {"ffmpeg", "tvm"});
  stage("docs", 5, {"base"});
  mark_critical_path(run);
  EXPECT_EQ(run.critical_path, (std::vector<std::string>{"base", "ffmpeg", "merge"}));
  EXPECT_DOUBLE_EQ(run.critical_path_seconds, 330);
  RunRecord empty;
  mark_critical_path(empty);
  EXPECT_TRUE(empty.critical_path.empty());
}

} // namespace
} // namespace kiln
