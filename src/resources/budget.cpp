#include "resources/budget.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kiln {

namespace {

constexpr double k_kib_per_gib = 1024.0 * 1024.0;
constexpr double k_min_reserve_gb = 2;
// The field notes' host: 22 of 61 GB usable had to stay with the host and the engine (36 %);
// with 8 GB a build deadlocked at 0 % CPU for two hours.
constexpr double k_reserve_share = 0.36;
constexpr double k_min_memory_limit_gb = 1;

} // namespace

double default_host_reserve_gb(double total_gb) {
  return std::max(k_min_reserve_gb, k_reserve_share * total_gb);
}

Budget job_budget(const MemInfo& mem, int cores, std::optional<double> host_reserve_gb,
                  std::optional<double> memory_limit_gb, double mem_per_job_gb,
                  std::optional<int> jobs_override) {
  Budget budget;
  budget.cores = std::max(1, cores);
  double total_gb = static_cast<double>(mem.total_kb) / k_kib_per_gib;

  std::string memory_reason;
  if (memory_limit_gb) {
    budget.memory_limit_gb = std::max(k_min_memory_limit_gb, *memory_limit_gb);
    budget.host_reserve_gb = std::max(0.0, total_gb - budget.memory_limit_gb);
    memory_reason = fmt::format("memory limit {:.1f} GB set explicitly", budget.memory_limit_gb);
  } else {
    budget.host_reserve_gb =
        host_reserve_gb ? std::max(0.0, *host_reserve_gb) : default_host_reserve_gb(total_gb);
    double left = total_gb - budget.host_reserve_gb;
    budget.memory_limit_gb = std::max(k_min_memory_limit_gb, left);
    memory_reason = fmt::format("memory limit {:.1f} GB = {:.1f} GB RAM - {:.1f} GB {}reserve",
                                budget.memory_limit_gb, total_gb, budget.host_reserve_gb,
                                host_reserve_gb ? "" : "default ");
    if (left < k_min_memory_limit_gb) {
      memory_reason += fmt::format(", raised to the {:.1f} GB floor", k_min_memory_limit_gb);
    }
  }

  std::string jobs_reason;
  if (jobs_override) {
    budget.jobs = std::max(1, *jobs_override);
    budget.slots = budget.jobs;
    jobs_reason = fmt::format("jobs {} set explicitly", budget.jobs);
  } else if (mem_per_job_gb <= 0) {
    budget.jobs = budget.cores;
    budget.slots = budget.cores;
    jobs_reason =
        fmt::format("jobs {} = {} cores (no memory per job given)", budget.jobs, budget.cores);
  } else {
    // The epsilon keeps 1.2 / 0.4 (2.9999...) from flooring to 2.
    double by_memory = std::floor(budget.memory_limit_gb / mem_per_job_gb + 1e-9);
    int fit = static_cast<int>(std::min<double>(budget.cores, by_memory));
    budget.jobs = std::max(1, fit);
    budget.slots = std::max(1, static_cast<int>(std::min(by_memory, 1e6)));
    jobs_reason = fmt::format("jobs {} = min({} cores, {:.1f} GB / {:.1f} GB per job){}",
                              budget.jobs, budget.cores, budget.memory_limit_gb, mem_per_job_gb,
                              fit < 1 ? ", at least 1" : "");
  }
  budget.reason = jobs_reason + "; " + memory_reason;
  return budget;
}

Budget budget_share(const Budget& whole, int slots, std::optional<double> mem_per_job_gb) {
  Budget share = whole;
  int all = std::max(1, whole.slots);
  share.slots = std::clamp(slots, 1, all);
  share.memory_limit_gb = whole.memory_limit_gb * share.slots / all;
  // Rounded to the nearest: seven of eight slots of a 2-job budget are 2 jobs, not 1. It never
  // passes the share's slots (jobs <= slots), so the jobs' memory stays within the share's.
  share.jobs = std::max(1, (whole.jobs * share.slots + all / 2) / all);
  share.reason =
      fmt::format("{} of the run's {} slot(s): jobs {} of {}, {:.1f} of {:.1f} GB", share.slots,
                  all, share.jobs, whole.jobs, share.memory_limit_gb, whole.memory_limit_gb);
  if (mem_per_job_gb && *mem_per_job_gb > 0) {
    int fit = std::max(1, static_cast<int>(share.memory_limit_gb / *mem_per_job_gb + 1e-9));
    if (fit < share.jobs) {
      share.reason += fmt::format("; jobs {} = {:.1f} GB / {:.1f} GB per job (the stage's "
                                  "mem_per_job_gb)",
                                  fit, share.memory_limit_gb, *mem_per_job_gb);
      share.jobs = fit;
    }
  }
  return share;
}

Budget worker_budget(std::optional<double> memory_gb, std::optional<int> cores, int max_parallel,
                     const Budget& measured, double mem_per_job_gb) {
  Budget whole;
  whole.memory_limit_gb = memory_gb.value_or(measured.memory_limit_gb);
  whole.cores = std::max(1, cores.value_or(measured.cores));
  whole.jobs = whole.cores;
  if (mem_per_job_gb > 0) {
    whole.jobs =
        std::clamp(static_cast<int>(whole.memory_limit_gb / mem_per_job_gb + 1e-9), 1, whole.cores);
  }
  whole.slots = std::max(1, max_parallel);
  Budget share = budget_share(whole, 1, std::nullopt);
  std::string unknown = !memory_gb && !cores ? "its memory and cores are this host's"
                        : !memory_gb         ? "its memory is this host's"
                        : !cores             ? "its cores are this host's"
                                             : "";
  share.reason = fmt::format("the worker's {:.1f} GB and {} core(s) shared {} way(s): jobs {}, "
                             "{:.1f} GB{}",
                             whole.memory_limit_gb, whole.cores, whole.slots, share.jobs,
                             share.memory_limit_gb,
                             unknown.empty() ? std::string()
                                             : fmt::format(" ({}: its [[worker]] table does "
                                                           "not say)",
                                                           unknown));
  return share;
}

std::string budget_file_text(const Budget& b) {
  return fmt::format("export JOBS={}\nexport MEMORY_LIMIT_GB={:.1f}\n", b.jobs, b.memory_limit_gb);
}

} // namespace kiln
