#include "resources/sampler.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "util/diagnostic.h"
#include "util/time.h"

namespace kiln {

namespace {

constexpr double k_kib_per_gib = 1024.0 * 1024.0;
constexpr double k_bytes_per_gib = 1024.0 * 1024.0 * 1024.0;

/// A phase is a label: a line break in it would split its CSV row in two, so it becomes a blank.
std::string_view one_line(std::string_view phase, std::string& storage) {
  if (phase.find_first_of("\r\n") == std::string_view::npos) {
    return phase;
  }
  storage.assign(phase);
  std::replace(storage.begin(), storage.end(), '\n', ' ');
  std::replace(storage.begin(), storage.end(), '\r', ' ');
  return storage;
}

/// Splits one CSV line into fields; a field may be quoted, with `""` for a quote inside.
tl::expected<std::vector<std::string>, std::string> split_csv_line(std::string_view line) {
  std::vector<std::string> fields;
  size_t pos = 0;
  while (true) {
    std::string field;
    if (pos < line.size() && line[pos] == '"') {
      ++pos;
      while (true) {
        if (pos >= line.size()) {
          return tl::unexpected(std::string("unterminated quote"));
        }
        if (line[pos] == '"') {
          if (pos + 1 < line.size() && line[pos + 1] == '"') {
            field += '"';
            pos += 2;
            continue;
          }
          ++pos;
          break;
        }
        field += line[pos++];
      }
      if (pos < line.size() && line[pos] != ',') {
        return tl::unexpected(std::string("text after a closing quote"));
      }
    } else {
      size_t end = std::min(line.find(',', pos), line.size());
      field.assign(line.substr(pos, end - pos));
      pos = end;
    }
    fields.push_back(std::move(field));
    if (pos >= line.size()) {
      return fields;
    }
    ++pos; // the comma
  }
}

bool parse_double(std::string_view text, double& value) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && !text.empty();
}

} // namespace

double cpu_since(CpuBaseline& baseline, const CpuTimes& now) {
  if (baseline.last.total != 0 && now.total >= baseline.last.total &&
      now.total - baseline.last.total < k_min_cpu_ticks) {
    return cpu_percent(baseline.before, now);
  }
  double percent = cpu_percent(baseline.last, now);
  baseline.before = baseline.last;
  baseline.last = now;
  return percent;
}

ResourceRow sample_once(const std::string& phase, const std::filesystem::path& disk_path,
                        CpuBaseline& cpu) {
  ResourceRow row;
  row.time = utc_iso8601(std::chrono::system_clock::now());
  row.phase = phase;
  if (auto now = read_cpu_times()) {
    row.cpu_pct = cpu_since(cpu, *now);
  }
  if (auto mem = read_meminfo()) {
    row.free_ram_gb = static_cast<double>(mem->available_kb) / k_kib_per_gib;
    row.committed_gb = static_cast<double>(mem->committed_kb) / k_kib_per_gib;
  }
  if (auto bytes = free_bytes(disk_path)) {
    row.free_disk_gb = static_cast<double>(*bytes) / k_bytes_per_gib;
  }
  return row;
}

void append_resource_row(AppendFile& file, const ResourceRow& row) {
  // A stack buffer: formatting a row allocates nothing.
  fmt::memory_buffer line;
  auto out = std::back_inserter(line);
  std::string storage;
  std::string_view phase = one_line(row.phase, storage);
  fmt::format_to(out, "{},", row.time);
  if (phase.find_first_of(",\"") == std::string_view::npos) {
    fmt::format_to(out, "{}", phase);
  } else {
    line.push_back('"');
    for (char c : phase) {
      if (c == '"') {
        line.push_back('"');
      }
      line.push_back(c);
    }
    line.push_back('"');
  }
  // fmt formats in the C locale whatever the process locale is: `12.5`, never `12,5`.
  fmt::format_to(out, ",{:.1f},{:.1f},{:.1f},{:.1f}\n", row.cpu_pct, row.free_ram_gb,
                 row.committed_gb, row.free_disk_gb);
  file.write(std::string_view(line.data(), line.size()));
}

ResourceSampler::ResourceSampler(std::filesystem::path csv, std::filesystem::path disk_path,
                                 std::chrono::milliseconds interval)
    : m_csv(std::move(csv)), m_disk_path(std::move(disk_path)),
      // A zero interval would make the thread spin.
      m_interval(std::max(interval, std::chrono::milliseconds(1))) {}

ResourceSampler::~ResourceSampler() {
  stop();
}

tl::expected<void, std::string> ResourceSampler::start() {
  std::lock_guard lock(m_mutex);
  if (m_started) {
    return tl::unexpected(fmt::format("resource sampler for {} already started", m_csv.string()));
  }
  if (m_csv.has_parent_path()) {
    std::error_code error;
    std::filesystem::create_directories(m_csv.parent_path(), error);
    if (error) {
      return tl::unexpected(
          fmt::format("cannot create {}: {}", m_csv.parent_path().string(), error.message()));
    }
  }
  if (auto written = write_file_atomic(m_csv, k_resource_csv_header); !written) {
    return written;
  }
  if (auto opened = m_file.open(m_csv); !opened) {
    return opened;
  }
  m_started = true;
  m_running = true;
  write_row_locked();
  m_thread = std::thread([this] { run(); });
  return {};
}

void ResourceSampler::set_phase(std::string phase) {
  std::lock_guard lock(m_mutex);
  if (phase == m_phase) {
    return;
  }
  m_phase = std::move(phase);
  if (m_running) {
    write_row_locked();
  }
}

void ResourceSampler::stop() {
  {
    std::lock_guard lock(m_mutex);
    // m_stopping too: a second stop() racing the first must not join the thread again.
    if (!m_running || m_stopping) {
      return;
    }
    m_stopping = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable()) {
    m_thread.join();
  }
  std::lock_guard lock(m_mutex);
  write_row_locked();
  m_running = false;
  m_file = AppendFile();
}

void ResourceSampler::run() {
  std::unique_lock lock(m_mutex);
  auto next = std::chrono::steady_clock::now() + m_interval;
  while (!m_wake.wait_until(lock, next, [this] { return m_stopping; })) {
    write_row_locked();
    next += m_interval;
    // After a suspend or a stall, carry on from now rather than write a burst of rows.
    auto now = std::chrono::steady_clock::now();
    if (next <= now) {
      next = now + m_interval;
    }
  }
}

void ResourceSampler::write_row_locked() {
  append_resource_row(m_file, sample_once(m_phase, m_disk_path, m_cpu));
}

tl::expected<std::vector<ResourceRow>, std::string>
read_resource_csv(const std::filesystem::path& csv) {
  auto text = read_file(csv);
  if (!text) {
    return tl::unexpected(text.error());
  }
  std::vector<ResourceRow> rows;
  std::string_view rest = *text;
  size_t number = 0;
  bool header_seen = false;
  while (!rest.empty()) {
    size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    ++number;
    if (line.ends_with('\r')) {
      line.remove_suffix(1);
    }
    auto fail = [&](const std::string& what) {
      return tl::unexpected(fmt::format("{}:{}: {}", csv.string(), number, what));
    };
    if (!header_seen) {
      std::string_view header = k_resource_csv_header.substr(0, k_resource_csv_header.size() - 1);
      if (line != header) {
        return fail(fmt::format("expected the header `{}`", header));
      }
      header_seen = true;
      continue;
    }
    if (line.empty()) {
      continue;
    }
    auto fields = split_csv_line(line);
    if (!fields) {
      return fail(fields.error());
    }
    if (fields->size() != 6) {
      return fail(fmt::format("expected 6 fields, found {}", fields->size()));
    }
    ResourceRow row;
    row.time = (*fields)[0];
    if (!parse_utc(row.time)) {
      return fail(fmt::format("time `{}` is not UTC ISO-8601", row.time));
    }
    row.phase = (*fields)[1];
    // The sampler writes a percentage and sizes in GiB. Anything else (nan, inf, 1e308, a
    // negative size) comes from an edit or a damaged file and would poison every sum, average
    // and minimum of its phase, so it is refused rather than summarised.
    struct Column {
      std::string_view name;
      double* value;
      double max;
    };
    constexpr double k_max_gb = 1e9; // an exabyte: more than any host has
    const Column columns[] = {{"cpu_pct", &row.cpu_pct, 100},
                              {"free_ram_gb", &row.free_ram_gb, k_max_gb},
                              {"committed_gb", &row.committed_gb, k_max_gb},
                              {"free_disk_gb", &row.free_disk_gb, k_max_gb}};
    for (size_t i = 0; i < 4; ++i) {
      const Column& column = columns[i];
      std::string_view text = (*fields)[i + 2];
      if (!parse_double(text, *column.value)) {
        return fail(fmt::format("{} `{}` is not a number", column.name, printable(text)));
      }
      if (!(*column.value >= 0 && *column.value <= column.max)) {
        return fail(fmt::format("{} `{}` is not a number from 0 to {} as the sampler writes; "
                                "correct the line or delete it",
                                column.name, printable(text), static_cast<long long>(column.max)));
      }
    }
    rows.push_back(std::move(row));
  }
  if (!header_seen) {
    return tl::unexpected(fmt::format("{}: empty, expected a header line", csv.string()));
  }
  return rows;
}

std::vector<PhaseSummary> summarize(const std::vector<ResourceRow>& rows) {
  std::vector<PhaseSummary> phases;
  std::vector<double> cpu_sums;
  std::unordered_map<std::string, size_t> index;
  std::optional<double> next_time = rows.empty() ? std::nullopt : parse_utc(rows[0].time);
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResourceRow& row = rows[i];
    std::optional<double> time = next_time;
    next_time = i + 1 < rows.size() ? parse_utc(rows[i + 1].time) : std::nullopt;
    auto [it, inserted] = index.try_emplace(row.phase, phases.size());
    if (inserted) {
      PhaseSummary first;
      first.phase = row.phase;
      first.peak_cpu = row.cpu_pct;
      first.min_free_ram_gb = row.free_ram_gb;
      first.min_free_disk_gb = row.free_disk_gb;
      phases.push_back(std::move(first));
      cpu_sums.push_back(0);
    }
    PhaseSummary& phase = phases[it->second];
    ++phase.samples;
    cpu_sums[it->second] += row.cpu_pct;
    phase.peak_cpu = std::max(phase.peak_cpu, row.cpu_pct);
    phase.min_free_ram_gb = std::min(phase.min_free_ram_gb, row.free_ram_gb);
    phase.min_free_disk_gb = std::min(phase.min_free_disk_gb, row.free_disk_gb);
    // A clock stepped backwards adds nothing rather than a negative time.
    if (time && next_time && *next_time > *time) {
      phase.minutes += (*next_time - *time) / 60;
    }
  }
  for (size_t i = 0; i < phases.size(); ++i) {
    phases[i].avg_cpu = cpu_sums[i] / phases[i].samples;
  }
  return phases;
}

std::string format_summary(const std::vector<PhaseSummary>& phases) {
  size_t width = 5; // "phase"
  for (const PhaseSummary& phase : phases) {
    width = std::max(width, phase.phase.size());
  }
  // Numbers right-aligned under the last character of their column's name.
  std::string text = fmt::format(
      "{:<{}}  minutes  avg_cpu  peak_cpu  min_free_ram_gb  min_free_disk_gb\n", "phase", width);
  for (const PhaseSummary& phase : phases) {
    text += fmt::format("{:<{}}  {:>7.1f}  {:>7.1f}  {:>8.1f}  {:>15.1f}  {:>16.1f}\n", phase.phase,
                        width, phase.minutes, phase.avg_cpu, phase.peak_cpu, phase.min_free_ram_gb,
                        phase.min_free_disk_gb);
  }
  return text;
}

} // namespace kiln
