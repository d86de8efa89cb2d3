// `kiln records prune` and `[records] keep` on the records of real kiln runs, built by the fake
// buildctl (tests/fake_buildctl): run folders and their history rows go together, never the run
// `latest` names, never one said to be running while the records lock is held.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sqlite3.h>

#include <gtest/gtest.h>

#include "driver/records_lock.h"
#include "kiln_harness.h"

namespace kiln::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string file_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// A one-stage BuildKit chain over the recorded Dockerfile; `extra` goes at the end.
void write_chain(const ChainDir& dir, const std::string& extra = "") {
  dir.write("work.Dockerfile",
            file_text(std::string(KILN_TEST_FIXTURES) + "/buildkit-v0.11.6/Dockerfile.used"));
  dir.write("chain.toml", "[chain]\nname = \"rp" + dir.nonce() +
                              "\"\nengine = \"buildkit\"\n\n[defaults]\ncooldown_s = 0\n\n"
                              "[[stage]]\nname = \"work\"\ndockerfile = \"work.Dockerfile\"\n"
                              "target = \"work\"\nlane = \"amd64\"\n" +
                              extra);
}

/// The run folders under records/runs, in id order.
std::vector<std::string> run_ids(const ChainDir& dir) {
  std::vector<std::string> ids;
  for (const auto& entry : fs::directory_iterator(dir.path() / "records/runs")) {
    ids.push_back(entry.path().filename().string());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

/// The run ids the history database holds rows of in `table` (runs or stages), in id order.
std::vector<std::string> history_ids(const ChainDir& dir, const char* table) {
  sqlite3* db = nullptr;
  std::vector<std::string> ids;
  if (sqlite3_open_v2((dir.path() / "records/history.db").c_str(), &db, SQLITE_OPEN_READONLY,
                      nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open history.db";
    sqlite3_close(db);
    return ids;
  }
  std::string sql = std::string("SELECT DISTINCT run_id FROM ") + table + " ORDER BY run_id";
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    ids.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return ids;
}

/// Change a top-level field of a run's manifest (its events stay: the harness checks that every
/// run left is their fold, so a test removes or restores what it changed).
void set_manifest_field(const ChainDir& dir, const std::string& id, const std::string& key,
                        const std::string& value) {
  std::string path = "records/runs/" + id + "/manifest.json";
  json manifest = json::parse(dir.read(path));
  manifest[key] = value;
  dir.write(path, manifest.dump(2));
}

/// `runs` runs of the chain; their ids, oldest first (as `latest` named each: two runs started in
/// one second sort by their random part).
std::vector<std::string> run_times(const ChainDir& dir, const FakeBuildkit& fake, int runs) {
  std::vector<std::string> ids;
  for (int i = 0; i < runs; ++i) {
    KilnResult run = dir.kiln({"run", "chain.toml"}, nullptr, fake.env());
    EXPECT_EQ(run.exit_code, 0) << run.output;
    ids.push_back(dir.latest_manifest().value("run_id", ""));
  }
  return ids;
}

std::vector<std::string> sorted(std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(RecordsPrune, KeepOneLeavesOneRunFolderAndOneHistoryRow) {
  ChainDir dir;
  write_chain(dir);
  FakeBuildkit fake(dir);
  std::vector<std::string> ids = run_times(dir, fake, 3);
  ASSERT_EQ(run_ids(dir), sorted(ids));
  ASSERT_EQ(history_ids(dir, "runs"), sorted(ids));

  KilnResult dry =
      dir.kiln({"records", "prune", "--keep", "1", "--chain", "chain.toml", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("kiln: would remove run " + ids[0]), std::string::npos) << dry.output;
  EXPECT_NE(dry.output.find("would remove 2 of 3 run(s)"), std::string::npos) << dry.output;
  EXPECT_EQ(run_ids(dir), sorted(ids)) << "a dry run removed something";
  EXPECT_EQ(history_ids(dir, "runs"), sorted(ids));

  KilnResult pruned = dir.kiln({"records", "prune", "--keep", "1", "--chain", "chain.toml"});
  ASSERT_EQ(pruned.exit_code, 0) << pruned.output;
  EXPECT_NE(pruned.output.find("kiln: removed run " + ids[0]), std::string::npos) << pruned.output;
  EXPECT_NE(pruned.output.find("kiln: removed run " + ids[1]), std::string::npos) << pruned.output;
  EXPECT_NE(pruned.output.find("removed 2 of 3 run(s), freed "), std::string::npos)
      << pruned.output;
  EXPECT_NE(pruned.output.find("the run history forgot 2"), std::string::npos) << pruned.output;
  EXPECT_EQ(run_ids(dir), std::vector<std::string>{ids[2]});
  EXPECT_EQ(history_ids(dir, "runs"), std::vector<std::string>{ids[2]});
  EXPECT_EQ(history_ids(dir, "stages"), std::vector<std::string>{ids[2]});
  EXPECT_EQ(dir.latest_manifest()["run_id"], ids[2]);
  // The history does not index the removed runs again: their folders are gone.
  EXPECT_EQ(dir.kiln({"history", "--chain", "chain.toml"}).exit_code, 0);
  EXPECT_EQ(history_ids(dir, "runs"), std::vector<std::string>{ids[2]});
}

TEST(RecordsPrune, ARunSaidToBeRunningIsKeptWhileTheRecordsLockIsHeld) {
  ChainDir dir;
  write_chain(dir);
  FakeBuildkit fake(dir);
  std::vector<std::string> ids = run_times(dir, fake, 3);
  // The oldest run's record as a live run's says it, and the lock held as that run holds it.
  set_manifest_field(dir, ids[0], "status", "running");
  {
    auto lock = RecordsLock::acquire(dir.path() / "records");
    ASSERT_TRUE(lock.has_value()) << lock.error();
    lock->describe("run " + ids[0], "2026-12-02T14:03:00Z");
    KilnResult pruned = dir.kiln({"records", "prune", "--keep", "1", "--records", "records"});
    ASSERT_EQ(pruned.exit_code, 0) << pruned.output;
    EXPECT_NE(pruned.output.find("kiln: kept run " + ids[0] +
                                 ": its manifest says running and the records lock is not free "
                                 "(held by run " +
                                 ids[0]),
              std::string::npos)
        << pruned.output;
    EXPECT_EQ(run_ids(dir), sorted({ids[0], ids[2]})) << pruned.output;
  }
  // Once the lock is free, taking it proves that run dead: it goes.
  KilnResult after = dir.kiln({"records", "prune", "--keep", "1", "--records", "records"});
  ASSERT_EQ(after.exit_code, 0) << after.output;
  EXPECT_EQ(run_ids(dir), std::vector<std::string>{ids[2]}) << after.output;
  EXPECT_EQ(history_ids(dir, "runs"), std::vector<std::string>{ids[2]});
}

TEST(RecordsPrune, OlderThanRemovesTheRunsThatStartedBeforeThatAge) {
  ChainDir dir;
  write_chain(dir);
  FakeBuildkit fake(dir);
  std::vector<std::string> ids = run_times(dir, fake, 2);
  set_manifest_field(dir, ids[0], "started", "2020-01-01T00:00:00Z");

  KilnResult pruned =
      dir.kiln({"records", "prune", "--older-than", "30d", "--chain", "chain.toml"});
  ASSERT_EQ(pruned.exit_code, 0) << pruned.output;
  EXPECT_NE(pruned.output.find("removed 1 of 2 run(s)"), std::string::npos) << pruned.output;
  EXPECT_EQ(run_ids(dir), std::vector<std::string>{ids[1]});
  EXPECT_EQ(history_ids(dir, "runs"), std::vector<std::string>{ids[1]});
  // `latest` is never removed, however old.
  std::string manifest = dir.read("records/runs/" + ids[1] + "/manifest.json");
  set_manifest_field(dir, ids[1], "started", "2020-01-01T00:00:00Z");
  KilnResult kept = dir.kiln({"records", "prune", "--older-than", "2w", "--chain", "chain.toml"});
  ASSERT_EQ(kept.exit_code, 0) << kept.output;
  EXPECT_NE(kept.output.find("kiln: kept run " + ids[1] + ": `latest` names it"), std::string::npos)
      << kept.output;
  EXPECT_EQ(run_ids(dir), std::vector<std::string>{ids[1]});
  // What the harness checks of every run left: its manifest is the fold of its events.
  dir.write("records/runs/" + ids[1] + "/manifest.json", manifest);
}

TEST(RecordsPrune, ABadAgeOrRuleIsAUsageError) {
  ChainDir dir;
  fs::create_directories(dir.path() / "records/runs");
  KilnResult bad = dir.kiln({"records", "prune", "--older-than", "3x"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--older-than '3x' is not an age"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("like 90m, 12h, 30d or 2w"), std::string::npos) << bad.output;
  KilnResult neither = dir.kiln({"records", "prune"});
  EXPECT_EQ(neither.exit_code, 2) << neither.output;
  EXPECT_NE(neither.output.find("needs one of --keep N"), std::string::npos) << neither.output;
  EXPECT_EQ(dir.kiln({"records", "prune", "--keep", "1", "--older-than", "1d"}).exit_code, 2);
  EXPECT_EQ(dir.kiln({"records", "prune", "--keep", "0"}).exit_code, 2);
}

TEST(RecordsPrune, RecordsKeepPrunesAtTheEndOfEachRun) {
  ChainDir dir;
  write_chain(dir, "\n[records]\nkeep = 2\n");
  FakeBuildkit fake(dir);
  std::vector<std::string> first = run_times(dir, fake, 2);
  KilnResult third = dir.kiln({"run", "chain.toml"}, nullptr, fake.env());
  ASSERT_EQ(third.exit_code, 0) << third.output;
  std::string newest = dir.latest_manifest().value("run_id", "");
  EXPECT_NE(third.output.find("records: removed 1 run(s) beyond the newest 2 ([records] keep)"),
            std::string::npos)
      << third.output;
  EXPECT_EQ(run_ids(dir), sorted({first[1], newest}));
  EXPECT_EQ(history_ids(dir, "runs"), sorted({first[1], newest}));
  // Its driver.log names what went; the manifest was final before.
  EXPECT_NE(dir.read("records/latest/driver.log").find("records: removed 1 run(s)"),
            std::string::npos);
}

TEST(RecordsPrune, RecordsKeepBelowOneIsAChainError) {
  ChainDir dir;
  write_chain(dir, "\n[records]\nkeep = 0\n");
  KilnResult run = dir.kiln({"run", "chain.toml", "--dry-run"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("'keep' in [records] must be at least 1, not 0"), std::string::npos)
      << run.output;
}

} // namespace
} // namespace kiln::testing
