#pragma once

#include <optional>
#include <string>

#include "resources/host_stats.h"

namespace kiln {

/// How much parallelism a build may use: memory bounds it as much as cores do, because a build
/// that runs out of memory does not slow down, it stalls or gets killed. GB here are GiB.
struct Budget {
  double memory_limit_gb = 0; // what the build's jobs may use together
  int jobs = 1;
  /// How many jobs the memory holds, cores aside: the units the stages building at once share
  /// (a stage holds at least one), so their memory never adds up to more than the limit.
  int slots = 1;
  int cores = 1;
  double host_reserve_gb = 0; // RAM left to the host and the engine daemon
  std::string reason;         // the arithmetic, in one sentence, for the run log
};

/// RAM to keep out of the build's reach: max(2 GB, 36% of total). The host and the engine
/// daemon must stay alive under a full build; with a reserve too small, a build once
/// deadlocked at 0% CPU (a host with 61 GB usable needed 22 GB, 36 %). 2 GB is the floor a small host needs for
/// its kernel, daemon and shell.
double default_host_reserve_gb(double total_gb);

/// memory limit = `memory_limit_gb` when given, else total RAM - reserve (`host_reserve_gb`
/// when given, else default_host_reserve_gb), never below 1 GB. jobs = `jobs_override` when
/// given (at least 1), else max(1, min(cores, floor(memory limit / mem_per_job_gb))), or the
/// cores when `mem_per_job_gb` <= 0. With an explicit memory limit, host_reserve_gb reports
/// what that limit leaves of the RAM (0 when it leaves nothing).
Budget job_budget(const MemInfo& mem, int cores, std::optional<double> host_reserve_gb,
                  std::optional<double> memory_limit_gb, double mem_per_job_gb,
                  std::optional<int> jobs_override);

/// The part of `whole` a stage builds with when it holds `slots` of its slots: that fraction of
/// the memory limit, and that fraction of the jobs (rounded, at least 1); with its own
/// `mem_per_job_gb`, no more jobs than its memory holds. The memory of the shares of stages
/// building at once adds up to no more than `whole`'s.
Budget budget_share(const Budget& whole, int slots, std::optional<double> mem_per_job_gb);

/// The budget of a worker of a pool, which its stages share `max_parallel` ways: its
/// `memory_gb` and `cores` where the chain file gives them, the client's `measured` figures
/// where it does not (the reason says which), jobs bounded by `mem_per_job_gb` as job_budget's.
Budget worker_budget(std::optional<double> memory_gb, std::optional<int> cores, int max_parallel,
                     const Budget& measured, double mem_per_job_gb);

/// `export JOBS=<n>\nexport MEMORY_LIMIT_GB=<limit, 1 decimal>\n`: a Dockerfile mounts it as a
/// secret, so the budget of the host that builds never becomes part of a layer's cache key.
/// Exported, so what the sourcing shell starts (`sh -c`, a compiler launcher) sees them too.
std::string budget_file_text(const Budget& b);

} // namespace kiln
