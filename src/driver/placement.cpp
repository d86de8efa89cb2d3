#include "driver/placement.h"

#include <algorithm>
#include <numeric>

namespace kiln {

namespace {

/// FNV-1a over the three names, each ended by a 0 byte so ("ab", "c") and ("a", "bc") differ,
/// then splitmix64's finaliser: FNV alone leaves names that differ in their last byte close.
uint64_t hash_names(std::initializer_list<std::string_view> names) {
  uint64_t hash = 14695981039346656037ULL;
  for (std::string_view name : names) {
    for (unsigned char c : name) {
      hash = (hash ^ c) * 1099511628211ULL;
    }
    hash = (hash ^ 0) * 1099511628211ULL;
  }
  hash ^= hash >> 30;
  hash *= 0xbf58476d1ce4e5b9ULL;
  hash ^= hash >> 27;
  hash *= 0x94d049bb133111ebULL;
  return hash ^ (hash >> 31);
}

} // namespace

uint64_t rendezvous_score(std::string_view chain, std::string_view stage, std::string_view worker) {
  return hash_names({chain, stage, worker});
}

std::vector<size_t> rank_workers(std::string_view chain, std::string_view stage,
                                 const std::vector<std::string>& workers) {
  std::vector<uint64_t> scores;
  scores.reserve(workers.size());
  for (const auto& worker : workers) {
    scores.push_back(rendezvous_score(chain, stage, worker));
  }
  std::vector<size_t> order(workers.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : workers[a] < workers[b];
  });
  return order;
}

} // namespace kiln
