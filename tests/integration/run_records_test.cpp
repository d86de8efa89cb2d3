// What a run's record says when the run goes wrong, on real buildah: a records disk that fills,
// a kiln killed with SIGKILL, a second run on the same records, a step that stalls.
#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include <sys/mount.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "kiln_harness.h"
#include "util/fs.h"

namespace kiln::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

/// A small tmpfs mounted for the test's life.
class Tmpfs {
public:
  Tmpfs(const std::filesystem::path& at, const std::string& size) : m_at(at) {
    std::filesystem::create_directories(at);
    m_mounted =
        ::mount("tmpfs", at.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, ("size=" + size).c_str()) == 0;
  }
  ~Tmpfs() {
    if (m_mounted) {
      ::umount2(m_at.c_str(), MNT_DETACH);
    }
  }
  bool mounted() const { return m_mounted; }

private:
  std::filesystem::path m_at;
  bool m_mounted = false;
};

const std::string k_no_disk_guard = "[disk]\nfloor_gb = 0\nguard_gb = 0\n";

/// Wait until `done` holds or `limit` passed; whether it held.
template <typename F> bool wait_for(F done, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  while (!done() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

TEST(RunRecords, ALogThatFillsTheRecordsDiskIsCutVisiblyAndTheRunDoesNotEndOk) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "mounting a tmpfs needs root";
  }
  ChainDir dir;
  // About 100 MB of output from one RUN into records on a 40 MiB disk (kiln-cc and the
  // record's reserved room take some of it).
  // The disk guard measures the records disk too: its floor would stop the run before it fills.
  write_two_stage_chain(dir,
                        "RUN yes 'a line of engine output that fills the records disk' | "
                        "head -c 100000000\n",
                        3, k_no_disk_guard);
  {
    Tmpfs records(dir.path() / "records", "40m");
    ASSERT_TRUE(records.mounted());
    KilnResult result = dir.kiln({"run", "chain.toml"});
    EXPECT_EQ(result.exit_code, 4) << result.output.substr(0, 4000);
    // The manifest is valid JSON, says neither ok nor running, and names the failed write.
    json manifest = dir.latest_manifest();
    EXPECT_EQ(manifest["status"], "record-incomplete");
    ASSERT_FALSE(manifest["record_errors"].empty());
    std::string first = manifest["record_errors"][0];
    EXPECT_NE(first.find("work.attempt-1.log: No space left on device (cut at byte "),
              std::string::npos)
        << first;
    const json& attempt = manifest["stages"][1]["attempts"][0];
    EXPECT_EQ(attempt["verdict"], "ok") << "the build itself succeeded";
    ASSERT_TRUE(attempt["log_truncated_at_byte"].is_number()) << attempt;
    uint64_t cut = attempt["log_truncated_at_byte"];
    EXPECT_GT(cut, 1000000u);
    // The log ends where it was cut, with the line that says so.
    auto log = read_file(dir.path() / "records/latest" / attempt["log"].get<std::string>());
    ASSERT_TRUE(log);
    EXPECT_EQ(log->find("\n[kiln] this log was cut here, at byte " + std::to_string(cut)), cut)
        << log->substr(cut > 200 ? cut - 200 : 0, 400);
    // driver.log has its end line, and the console said what happened.
    std::string driver_log = dir.read("records/latest/driver.log");
    EXPECT_NE(driver_log.find("write(s) of the record failed, the first: "), std::string::npos);
    EXPECT_NE(driver_log.find(": record-incomplete in "), std::string::npos); // its last line
    EXPECT_NE(result.output.find("error: the run's record is incomplete: "), std::string::npos);
    dir.remove_images();
  }
}

/// A smoke stage whose log kiln itself had to cut holds no verdict on the tests: the run says
/// it could not check them (exit 4, `unverified`), never that the tests asserted nothing.
TEST(RunRecords, ASmokeLogTheRecordCutIsUnverifiedNotRefused) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "mounting a tmpfs needs root";
  }
  ChainDir dir;
  dir.write("base.Dockerfile", k_base_dockerfile);
  dir.write("smoke.Dockerfile", "FROM base\nRUN yes 'a test that talks a lot' | head -c "
                                "100000000; echo '3 passed, 0 failed, 0 skipped'\n");
  dir.write("chain.toml", "[chain]\nname = \"t" + dir.nonce() + "\"\n[defaults]\nattempts = 1\n" +
                              k_no_disk_guard +
                              "\n[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n"
                              "[[stage]]\nname = \"smoke\"\nkind = \"smoke\"\n"
                              "dockerfile = \"smoke.Dockerfile\"\nneeds = [\"base\"]\n");
  {
    Tmpfs records(dir.path() / "records", "40m");
    ASSERT_TRUE(records.mounted());
    KilnResult result = dir.kiln({"run", "chain.toml"});
    EXPECT_EQ(result.exit_code, 4) << result.output.substr(0, 4000);
    json manifest = dir.latest_manifest();
    EXPECT_EQ(manifest["status"], "unverified:smoke:smoke");
    const json& smoke = manifest["stages"][1];
    EXPECT_EQ(smoke["status"], "unverified");
    EXPECT_TRUE(smoke["attempts"][0]["log_truncated_at_byte"].is_number());
    EXPECT_NE(smoke["failure"].get<std::string>().find("the smoke gate cannot judge"),
              std::string::npos)
        << smoke["failure"];
    EXPECT_EQ(smoke["failure"].get<std::string>().find("print one"), std::string::npos);
    dir.remove_images();
  }
}

/// The gates read the final image where buildah keeps it: records on a disk smaller than the
/// image cost nothing to the gates, which used to export it there and refuse it when that
/// failed.
TEST(RunRecords, ARecordsDiskSmallerThanTheFinalImageStillGatesIt) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "mounting a tmpfs needs root";
  }
  ChainDir dir;
  write_two_stage_chain(dir, "RUN head -c 24000000 /dev/urandom > /blob\n", 1, k_no_disk_guard);
  {
    Tmpfs records(dir.path() / "records", "12m");
    ASSERT_TRUE(records.mounted());
    KilnResult result = dir.kiln({"run", "chain.toml"});
    EXPECT_EQ(result.exit_code, 0) << result.output.substr(0, 4000);
    json manifest = dir.latest_manifest();
    EXPECT_EQ(manifest["status"], "ok");
    const json& work = manifest["stages"][1];
    ASSERT_EQ(work["gates"].size(), 3u) << work.dump(2); // image-env, residue, arch
    for (const auto& gate : work["gates"]) {
      EXPECT_EQ(gate["verdict"], "pass") << gate.dump();
    }
    // Read again by the next run: the same image, its scan remembered, not read again.
    KilnResult again = dir.kiln({"run", "chain.toml"});
    EXPECT_EQ(again.exit_code, 0) << again.output.substr(0, 4000);
    json second = dir.latest_manifest();
    EXPECT_EQ(second["stages"][1]["image_id"], work["image_id"]);
    EXPECT_TRUE(second["stages"][1]["gates"][1]["remembered"]) << second["stages"][1].dump(2);
    dir.remove_images();
  }
}

TEST(RunRecords, ARecordsDiskFullAtTheStartRefusesTheRunAndLatestStays) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "mounting a tmpfs needs root";
  }
  ChainDir dir;
  write_two_stage_chain(dir, "RUN echo built\n", 3, k_no_disk_guard);
  {
    Tmpfs records(dir.path() / "records", "40m");
    ASSERT_TRUE(records.mounted());
    ASSERT_EQ(dir.kiln({"run", "chain.toml"}).exit_code, 0);
    std::string first = dir.latest_manifest()["run_id"];
    // Fill what is left, to the last block.
    {
      std::ofstream fill(dir.path() / "records" / "fill", std::ios::binary);
      std::string block(1 << 20, 'x');
      while (fill.write(block.data(), static_cast<std::streamsize>(block.size()))) {
      }
    }
    KilnResult refused = dir.kiln({"run", "chain.toml"});
    EXPECT_EQ(refused.exit_code, 4) << refused.output;
    EXPECT_NE(refused.output.find("has no room for a run's record"), std::string::npos)
        << refused.output;
    EXPECT_EQ(dir.latest_manifest()["run_id"], first);
    size_t runs = 0;
    for ([[maybe_unused]] const auto& run :
         std::filesystem::directory_iterator(dir.path() / "records" / "runs")) {
      ++runs;
    }
    EXPECT_EQ(runs, 1u) << "a refused run leaves no folder";
    dir.remove_images();
  }
}

TEST(RunRecords, SigkillOfKilnLeavesNoEngineProcessAndTheNextRunMarksItAbandoned) {
  ChainDir dir;
  std::string sleep = "sleep 4" + dir.nonce().substr(0, 3);
  write_two_stage_chain(dir, "RUN " + sleep + "\n");
  std::thread first([&] { dir.kiln({"run", "chain.toml"}); });
  ASSERT_TRUE(
      wait_for([&] { return !processes_matching(sleep).empty(); }, std::chrono::seconds(120)));
  json running = dir.latest_manifest();
  EXPECT_EQ(running["status"], "running");
  int pid = running["pid"];
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  first.join();

  // Nothing kiln started is left 5 s later: not the RUN's sleep, not buildah.
  wait_for([&] { return processes_matching(sleep).empty(); }, std::chrono::seconds(5));
  EXPECT_TRUE(processes_matching(sleep).empty());
  EXPECT_TRUE(processes_matching(dir.path().string() + "/work.Dockerfile").empty());
  EXPECT_EQ(dir.latest_manifest()["status"], "running") << "SIGKILL leaves the record as it was";

  std::string dead = running["run_id"];
  dir.write("work.Dockerfile", "FROM base\nRUN echo quick\n");
  KilnResult next = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(next.exit_code, 0) << next.output;
  EXPECT_NE(next.output.find("run " + dead + " never finished"), std::string::npos) << next.output;
  json abandoned = json::parse(dir.read("records/runs/" + dead + "/manifest.json"));
  EXPECT_EQ(abandoned["status"], "abandoned");
  EXPECT_EQ(abandoned["stages"][1]["status"], "abandoned");
  EXPECT_EQ(abandoned["stages"][1]["attempts"][0]["verdict"], "abandoned");
}

TEST(RunRecords, ASecondRunOnTheSameRecordsIsRefusedNamingTheFirst) {
  ChainDir dir;
  std::string sleep = "sleep 5" + dir.nonce().substr(0, 3);
  write_two_stage_chain(dir, "RUN " + sleep + "\n");
  CancelToken ctrl_c;
  std::thread first([&] { dir.kiln({"run", "chain.toml"}, &ctrl_c); });
  ASSERT_TRUE(
      wait_for([&] { return !processes_matching(sleep).empty(); }, std::chrono::seconds(120)));
  std::string first_id = dir.latest_manifest()["run_id"];

  KilnResult second = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_NE(second.output.find("another kiln run or command is using the records folder"), std::string::npos)
      << second.output;
  EXPECT_NE(second.output.find("run " + first_id), std::string::npos) << second.output;
  EXPECT_EQ(dir.latest_manifest()["run_id"], first_id) << "the second run recorded nothing";

  ctrl_c.cancel();
  first.join();
  EXPECT_EQ(dir.latest_manifest()["status"], "interrupted");
}

TEST(RunRecords, AStepSilentPastItsStallLimitIsStoppedRetriedAndThenRefused) {
  ChainDir dir;
  std::string sleep = "sleep 6" + dir.nonce().substr(0, 3);
  write_two_stage_chain(dir, "RUN echo fetching; " + sleep + "\n", 3, "stall_timeout_s = 2\n");
  KilnResult result = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  json work = dir.latest_manifest()["stages"][1];
  ASSERT_EQ(work["attempts"].size(), 2u) << work;
  const json& stalled = work["attempts"][0];
  EXPECT_EQ(stalled["stopped_by"], "stall");
  EXPECT_EQ(stalled["verdict"], "retry");
  EXPECT_EQ(stalled["transient_class"], "stall");
  EXPECT_EQ(stalled["last_line"], "fetching");
  EXPECT_GE(stalled["silent_seconds"].get<double>(), 2.0);
  EXPECT_EQ(work["attempts"][1]["verdict"], "refused-identical");
  EXPECT_TRUE(processes_matching(sleep).empty());
}

} // namespace
} // namespace kiln::testing
