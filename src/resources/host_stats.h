#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <tl/expected.hpp>

namespace kiln {

/// Jiffies summed over every CPU, from the aggregate `cpu` line of /proc/stat.
struct CpuTimes {
  uint64_t busy = 0;  // total - idle - iowait: waiting on the disk is not work done
  uint64_t total = 0; // user..steal; guest time is already inside user and nice
};

/// Reads the aggregate `cpu` line. The path is injectable so tests feed hand-written text.
/// Reads into a stack buffer: the sampler calls this every tick and must stay cheap.
tl::expected<CpuTimes, std::string>
read_cpu_times(const std::filesystem::path& proc_stat = "/proc/stat");

/// Share of CPU time spent busy between two readings, 0..100; 0 when no time passed (or the
/// counters went backwards, which only a reset of the counters can cause).
double cpu_percent(const CpuTimes& before, const CpuTimes& after);

struct MemInfo {
  uint64_t total_kb = 0;     // MemTotal
  uint64_t available_kb = 0; // MemAvailable: what new work can get without swapping
  uint64_t committed_kb = 0; // Committed_AS: what processes have asked for, used or not
};

/// Reads MemTotal, MemAvailable and Committed_AS; an error names any that is missing.
tl::expected<MemInfo, std::string>
read_meminfo(const std::filesystem::path& path = "/proc/meminfo");

/// std::thread::hardware_concurrency, at least 1 (it may report 0 when it cannot tell).
int online_cores();

} // namespace kiln
