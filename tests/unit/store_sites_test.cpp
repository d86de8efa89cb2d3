// Which stores a run's disk levers reach: the daemons its stages build on, each measured on
// this host only when it is on this host.
#include "disk/store_sites.h"

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace kiln {
namespace {

/// bk1 (a local socket), bk2 (tcp://) and a lane with a host of its own; stages `a` on bk1's
/// pool, `b` on the lane.
Chain pool_chain(const std::filesystem::path& dir) {
  Chain chain;
  chain.engine = "buildkit";
  for (const std::string& host :
       {"unix://" + (dir / "bk1.sock").string(), std::string("tcp://10.0.0.2:1234")}) {
    Worker worker;
    worker.name = "bk" + std::to_string(chain.workers.size() + 1);
    worker.host = host;
    chain.workers.push_back(worker);
  }
  Lane lane;
  lane.name = "arm";
  lane.platform = "linux/arm64";
  lane.host = "unix://" + (dir / "arm.sock").string();
  chain.lanes.push_back(lane);
  Stage a;
  a.name = "a";
  a.workers = {"bk1"};
  Stage b;
  b.name = "b";
  b.lane = "arm";
  chain.stages = {a, b};
  return chain;
}

std::vector<std::string> addresses(const StoreSites& sites) {
  std::vector<std::string> out;
  for (const StoreSite& site : sites.all()) {
    out.push_back(site.address);
  }
  return out;
}

TEST(StoreSites, OnlyTheDaemonsTheRunsStagesBuildOnAndEachOnce) {
  testing::TempDir dir;
  Chain chain = pool_chain(dir.path());
  // bk2 is a worker no stage may use; the chain's default daemon has no stage.
  EXPECT_EQ(addresses(StoreSites(chain)),
            (std::vector<std::string>{chain.workers[0].host, chain.lanes[0].host}));
  // A run of `b` alone reaches the lane's daemon only.
  std::vector<const Stage*> only_b = {&chain.stages[1]};
  EXPECT_EQ(addresses(StoreSites(chain, only_b)), (std::vector<std::string>{chain.lanes[0].host}));
  // A lane on a worker's daemon is one store.
  chain.lanes[0].host = chain.workers[0].host;
  EXPECT_EQ(addresses(StoreSites(chain)), (std::vector<std::string>{chain.workers[0].host}));
}

TEST(StoreSites, DiskPathMeasuresTheStoresOfThisHostNeverARemoteDaemon) {
  testing::TempDir dir;
  Chain chain = pool_chain(dir.path());
  chain.stages[0].workers = {"bk1", "bk2"};
  chain.disk.path = dir.path();
  StoreSites sites(chain);
  ASSERT_EQ(sites.all().size(), 3u);
  EXPECT_EQ(sites.at(chain.workers[0].host).disk, dir.path());
  const StoreSite& remote = sites.at(chain.workers[1].host);
  EXPECT_TRUE(remote.disk.empty());
  EXPECT_EQ(remote.disk_unknown, "tcp://10.0.0.2:1234 is a daemon on another host");
  // Without [disk] path a local socket nobody listens on cannot be located.
  chain.disk.path.clear();
  StoreSites located(chain);
  EXPECT_TRUE(located.at(chain.workers[0].host).disk.empty());
  EXPECT_NE(located.at(chain.workers[0].host).disk_unknown.find("cannot connect"),
            std::string::npos);
  // The exports get a measure of their own only when no store is measured on their disk.
  EXPECT_TRUE(located.one_per_disk().empty());
  std::vector<MeasuredDisk> alone = located.measured_disks(dir.path() / "cache");
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0].path, dir.path() / "cache");
  EXPECT_EQ(alone[0].levers, nullptr);
  std::vector<MeasuredDisk> shared = sites.measured_disks(dir.path() / "cache");
  ASSERT_EQ(shared.size(), 1u);
  EXPECT_EQ(shared[0].path, dir.path());
  EXPECT_NE(shared[0].levers, nullptr);
}

} // namespace
} // namespace kiln
