#include "resources/host_stats.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace kiln {

namespace {

/// /proc/meminfo is about 1.5 KiB and the `cpu` line opens /proc/stat, so 8 KiB holds all we
/// need; a fixed buffer keeps a sample free of allocation.
constexpr size_t k_read_buffer_size = 8192;

/// Reads up to k_read_buffer_size bytes of `path` into `buffer`. /proc files are generated on
/// read and may come back in several chunks, hence the loop.
tl::expected<std::string_view, std::string>
read_head(const std::filesystem::path& path, std::array<char, k_read_buffer_size>& buffer) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return tl::unexpected(fmt::format("cannot read {}: {}", path.string(), std::strerror(errno)));
  }
  size_t used = 0;
  while (used < buffer.size()) {
    ssize_t n = ::read(fd, buffer.data() + used, buffer.size() - used);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      int saved = errno;
      ::close(fd);
      return tl::unexpected(fmt::format("cannot read {}: {}", path.string(), std::strerror(saved)));
    }
    if (n == 0) {
      break;
    }
    used += static_cast<size_t>(n);
  }
  ::close(fd);
  return std::string_view(buffer.data(), used);
}

/// The next line of `text` (without its newline); consumes it.
std::string_view next_line(std::string_view& text) {
  size_t end = text.find('\n');
  std::string_view line = text.substr(0, end);
  text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  return line;
}

/// Parses the leading unsigned number of `text` after any blanks; consumes both.
bool next_number(std::string_view& text, uint64_t& value) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc()) {
    return false;
  }
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  return true;
}

} // namespace

tl::expected<CpuTimes, std::string> read_cpu_times(const std::filesystem::path& proc_stat) {
  std::array<char, k_read_buffer_size> buffer;
  auto text = read_head(proc_stat, buffer);
  if (!text) {
    return tl::unexpected(text.error());
  }
  std::string_view rest = *text;
  while (!rest.empty()) {
    std::string_view line = next_line(rest);
    // `cpu ` with its blank: `cpu0`.. are the per-CPU lines.
    if (!line.starts_with("cpu ")) {
      continue;
    }
    line.remove_prefix(3);
    // user nice system idle iowait irq softirq steal guest guest_nice; older kernels print
    // fewer, so only the first four are required.
    std::array<uint64_t, 10> fields{};
    size_t count = 0;
    while (count < fields.size() && next_number(line, fields[count])) {
      ++count;
    }
    if (count < 4) {
      return tl::unexpected(fmt::format("{}: the cpu line has {} numbers, expected at least 4",
                                        proc_stat.string(), count));
    }
    // guest and guest_nice (fields 8 and 9) are already counted in user and nice by the
    // kernel; adding them again would count a VM host's guest time twice.
    CpuTimes times;
    for (size_t i = 0; i < std::min<size_t>(count, 8); ++i) {
      times.total += fields[i];
    }
    times.busy = times.total - fields[3] - fields[4];
    return times;
  }
  return tl::unexpected(fmt::format("{}: no aggregate cpu line", proc_stat.string()));
}

double cpu_percent(const CpuTimes& before, const CpuTimes& after) {
  if (after.total <= before.total || after.busy < before.busy) {
    return 0;
  }
  double busy = static_cast<double>(after.busy - before.busy);
  double total = static_cast<double>(after.total - before.total);
  return std::clamp(100.0 * busy / total, 0.0, 100.0);
}

tl::expected<MemInfo, std::string> read_meminfo(const std::filesystem::path& path) {
  std::array<char, k_read_buffer_size> buffer;
  auto text = read_head(path, buffer);
  if (!text) {
    return tl::unexpected(text.error());
  }
  struct Key {
    std::string_view name;
    uint64_t MemInfo::*field;
    bool found = false;
  };
  std::array<Key, 3> keys{{{"MemTotal", &MemInfo::total_kb},
                           {"MemAvailable", &MemInfo::available_kb},
                           {"Committed_AS", &MemInfo::committed_kb}}};
  MemInfo info;
  size_t found = 0;
  std::string_view rest = *text;
  while (!rest.empty() && found < keys.size()) {
    std::string_view line = next_line(rest);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      continue;
    }
    std::string_view name = line.substr(0, colon);
    for (Key& key : keys) {
      if (key.found || key.name != name) {
        continue;
      }
      std::string_view value = line.substr(colon + 1);
      if (!next_number(value, info.*key.field)) {
        return tl::unexpected(fmt::format("{}: {} has no number", path.string(), name));
      }
      key.found = true;
      ++found;
    }
  }
  for (const Key& key : keys) {
    if (!key.found) {
      return tl::unexpected(fmt::format("{}: no {} line", path.string(), key.name));
    }
  }
  return info;
}

int online_cores() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

} // namespace kiln
