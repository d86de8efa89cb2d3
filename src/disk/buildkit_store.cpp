#include "disk/buildkit_store.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "disk/buildkit_daemon.h"
#include "util/process.h"
#include "util/strings.h"

namespace kiln {

namespace {

// du sizes every record; on a store of a few hundred GB that takes minutes, but an address
// nobody answers must not hang a run.
constexpr std::chrono::minutes k_du_timeout{10};
// BuildKit deletes one record at a time, so a prune stopped halfway leaves a consistent store:
// the limit only bounds how long a run waits on a stuck daemon.
constexpr std::chrono::minutes k_prune_timeout{60};

constexpr std::string_view k_regular_type = "regular";
constexpr std::string_view k_cache_mount_type = "exec.cachemount";

/// Bytes the `type==regular` filter can never free: every other type, as BuildKit sums them.
uint64_t unfreeable_bytes(const std::vector<DuRecord>& records) {
  uint64_t bytes = 0;
  for (const DuRecord& record : records) {
    // Shared records are left out of the store size BuildKit compares with --keep-storage
    // (cache/manager.go pruneOnce), so adding them would keep more than asked.
    if (effective_type(record) != k_regular_type && !record.shared) {
      bytes += record.bytes;
    }
  }
  return bytes;
}

uint64_t ceil_mb(uint64_t bytes) {
  return (bytes + 999'999) / 1'000'000;
}

} // namespace

std::vector<DuRecord> parse_du_verbose(std::string_view text) {
  std::vector<DuRecord> records;
  DuRecord current;
  bool in_record = false;
  auto finish = [&] {
    if (in_record) {
      records.push_back(std::move(current));
    }
    current = DuRecord{};
    in_record = false;
  };
  for (const std::string& raw : split(text, '\n')) {
    std::string_view line = raw;
    if (trim(line).empty()) {
      finish();
      continue;
    }
    // "Key:\tvalue" (tabwriter pads short keys with a second tab). The first ":\t" ends the key:
    // values such as `Created at` and descriptions hold colons of their own.
    size_t colon = line.find(":\t");
    if (colon == std::string_view::npos) {
      continue; // a stray line (a daemon warning on stderr) is no field
    }
    std::string_view key = line.substr(0, colon);
    std::string_view value = trim(line.substr(colon + 2));
    if (key == "ID") {
      finish(); // a record always starts with its ID, even if no blank line came before it
      current.id = std::string(value);
      in_record = true;
    } else if (!in_record) {
      continue; // the `Reclaimable:`/`Total:` summary after the last record
    } else if (key == "Type") {
      current.type = std::string(value);
    } else if (key == "Size") {
      current.bytes = parse_human_size(value);
    } else if (key == "Reclaimable") {
      current.reclaimable = value == "true";
    } else if (key == "Shared") {
      current.shared = value == "true";
    } else if (key == "Description") {
      current.description = std::string(value);
    }
  }
  finish();
  return records;
}

std::string effective_type(const DuRecord& record) {
  return record.type.empty() ? std::string(k_regular_type) : record.type;
}

uint64_t regular_keep_mb(double keep_gb, const std::vector<DuRecord>& records) {
  // 0 is BuildKit's "no size limit": the filter's every idle record goes, which is what a keep
  // of nothing asks for. Adding the unfreeable part would turn it into a limit again.
  if (!(keep_gb > 0)) {
    return 0;
  }
  auto layers_mb = static_cast<uint64_t>(std::llround(keep_gb * 1000));
  return layers_mb + ceil_mb(unfreeable_bytes(records));
}

StoreUsage usage_from_records(const std::vector<DuRecord>& records) {
  StoreUsage usage;
  for (const DuRecord& record : records) {
    std::string type = effective_type(record);
    usage.bytes_by_type[type] += record.bytes;
    usage.records_by_type[type] += 1;
    usage.total_bytes += record.bytes;
    // Reclaimable here means what prune_layers can free: idle layer records. BuildKit's own
    // column also counts idle cache mounts, which kiln never frees.
    if (type == k_regular_type && record.reclaimable && !record.shared) {
      usage.reclaimable_bytes += record.bytes;
    }
  }
  return usage;
}

std::vector<std::string> BuildkitStore::prune_argv(uint64_t keep_mb) const {
  return m_engine.command({"prune", "--filter", "type==regular", "--keep-storage",
                           std::to_string(keep_mb), "--verbose"});
}

tl::expected<StoreLocation, std::string> BuildkitStore::location() const {
  return locate_buildkitd(m_address);
}

tl::expected<StoreUsage, std::string> BuildkitStore::usage() const {
  CapturedRun du = run_captured(m_engine.command({"du", "--verbose"}), k_du_timeout);
  if (!du.exit.ok()) {
    return tl::unexpected(fmt::format("buildctl du failed: {}", du.failure()));
  }
  return usage_from_records(parse_du_verbose(du.output));
}

LayerPrune BuildkitStore::prune_layers(double keep_gb) const {
  LayerPrune result;
  auto step = [&](const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
    result.commands.push_back(join(argv, " "));
    return run_captured(argv, timeout);
  };
  auto skip = [&](std::string why) {
    result.lines.push_back(
        fmt::format("[disk-store] WARN {}: layer prune skipped: {}", label(), why));
    result.summary = "skipped: " + why;
    result.skipped = std::move(why);
    return result;
  };
  // The ids of the cache-mount records, or why they could not be listed.
  auto cache_mounts = [&]() -> tl::expected<std::set<std::string>, std::string> {
    CapturedRun listed = step(
        m_engine.command({"du", "--verbose", "--filter", "type==exec.cachemount"}), k_du_timeout);
    if (!listed.exit.ok()) {
      return tl::unexpected(listed.failure());
    }
    std::set<std::string> ids;
    for (const DuRecord& record : parse_du_verbose(listed.output)) {
      if (record.type == k_cache_mount_type) {
        ids.insert(record.id);
      }
    }
    return ids;
  };

  CapturedRun du = step(m_engine.command({"du", "--verbose"}), k_du_timeout);
  if (!du.exit.ok()) {
    return skip(fmt::format("buildctl du failed: {}", du.failure()));
  }
  std::vector<DuRecord> records = parse_du_verbose(du.output);
  // Without a count before, survival could not be checked afterwards: better no prune.
  auto before = cache_mounts();
  if (!before) {
    return skip(fmt::format("cannot count the cache-mount records: {}", before.error()));
  }
  result.cache_mounts_before = static_cast<int>(before->size());

  uint64_t keep_mb = regular_keep_mb(keep_gb, records);
  uint64_t unfreeable_mb = ceil_mb(unfreeable_bytes(records));
  if (keep_mb == 0) {
    result.lines.push_back(fmt::format(
        "[disk-store] {}: pruning type==regular layer cache with --keep-storage 0 (every idle "
        "layer; the {} MB the filter cannot free stays)",
        label(), unfreeable_mb));
  } else {
    result.lines.push_back(fmt::format(
        "[disk-store] {}: pruning type==regular layer cache with --keep-storage {} MB ({:g} GB "
        "of layers + {} MB the filter cannot free)",
        label(), keep_mb, keep_gb, unfreeable_mb));
  }
  result.ran = true;
  CapturedRun prune = step(prune_argv(keep_mb), k_prune_timeout);
  if (prune.exit.ok()) {
    std::vector<DuRecord> pruned = parse_du_verbose(prune.output);
    uint64_t freed = 0;
    for (const DuRecord& record : pruned) {
      freed += record.bytes;
    }
    result.lines.push_back(fmt::format("[disk-store] {}: pruned {} layer record(s), {} freed",
                                       label(), pruned.size(), decimal_size(freed)));
    result.removed_any = !pruned.empty();
    result.summary =
        fmt::format("pruned {} layer record(s), {}", pruned.size(), decimal_size(freed));
  } else {
    result.lines.push_back(
        fmt::format("[disk-store] WARN {}: layer prune failed: {}", label(), prune.failure()));
    result.summary = "prune failed: " + prune.failure();
  }

  // Checked even after a failed prune: it may have deleted records before it failed.
  auto after = cache_mounts();
  if (!after) {
    result.lines.push_back(fmt::format(
        "[disk-store] WARN cannot count the cache-mount records after the prune ({}): whether the "
        "compile caches survived is unknown",
        after.error()));
    return result;
  }
  result.cache_mounts_after = static_cast<int>(after->size());
  // Every record seen before must still be there: a build creating a new cache mount meanwhile
  // must not hide one the prune took.
  bool all_there = std::all_of(before->begin(), before->end(),
                               [&](const std::string& id) { return after->contains(id); });
  if (all_there) {
    result.lines.push_back(fmt::format("[disk-store] all {} cache-mount record(s) survived",
                                       result.cache_mounts_before));
  } else {
    result.lines.push_back(fmt::format(
        "[disk-store] WARN cache-mount records dropped {} -> {}: compile caches are gone",
        result.cache_mounts_before, result.cache_mounts_after));
  }
  return result;
}

} // namespace kiln
