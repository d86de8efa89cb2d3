#include "driver/placement.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kiln {
namespace {

std::vector<std::string> names(size_t count) {
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    out.push_back("bk" + std::to_string(i + 1));
  }
  return out;
}

TEST(Placement, RankingIsStableAndEveryWorkerOnce) {
  std::vector<std::string> pool = names(3);
  std::vector<size_t> ranked = rank_workers("media", "amd64/ffmpeg", pool);
  EXPECT_EQ(ranked.size(), 3u);
  EXPECT_EQ(ranked, rank_workers("media", "amd64/ffmpeg", pool)) << "the same every run";
  std::vector<size_t> sorted = ranked;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<size_t>{0, 1, 2}));
  // Listed in another order, the pool ranks the same workers the same way.
  std::vector<std::string> reversed(pool.rbegin(), pool.rend());
  std::vector<size_t> again = rank_workers("media", "amd64/ffmpeg", reversed);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(reversed[again[i]], pool[ranked[i]]);
  }
  EXPECT_NE(rendezvous_score("ab", "c", "w"), rendezvous_score("a", "bc", "w"));
}

TEST(Placement, AWorkerJoiningMovesOnlyTheStagesThatRankItFirst) {
  std::vector<std::string> three = names(3);
  std::vector<std::string> four = names(4);
  std::map<std::string, int> per_worker;
  int moved = 0;
  const int stages = 1000;
  for (int i = 0; i < stages; ++i) {
    std::string stage = "lib" + std::to_string(i);
    const std::string& before = three[rank_workers("chain", stage, three).front()];
    const std::string& after = four[rank_workers("chain", stage, four).front()];
    ++per_worker[before];
    if (before != after) {
      ++moved;
      EXPECT_EQ(after, "bk4") << stage << " moved between workers that both stayed";
    }
  }
  // About a quarter move (to the new worker); the three share the stages about evenly.
  EXPECT_GT(moved, stages / 6);
  EXPECT_LT(moved, stages / 3);
  for (const auto& [worker, count] : per_worker) {
    EXPECT_GT(count, stages / 4) << worker;
    EXPECT_LT(count, stages / 2) << worker;
  }
}

} // namespace
} // namespace kiln
