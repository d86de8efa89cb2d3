#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// The score of `worker` for one stage of one chain, by rendezvous (highest random weight)
/// hashing: each (chain, stage) ranks the workers by it, so a stage returns to the worker whose
/// cache holds its last build, and a worker joining or leaving the pool moves only the stages
/// that rank it first.
uint64_t rendezvous_score(std::string_view chain, std::string_view stage, std::string_view worker);

/// `workers` (names) as positions into it, highest score first; ties (never seen in practice)
/// by name.
std::vector<size_t> rank_workers(std::string_view chain, std::string_view stage,
                                 const std::vector<std::string>& workers);

} // namespace kiln
