#include "cli/disk_command.h"

#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "cli/chain_file.h"
#include "disk/guard.h"
#include "disk/policy.h"
#include "disk/reclaim_journal.h"
#include "disk/slugs.h"
#include "disk/store_sites.h"
#include "driver/build_request.h"
#include "driver/leftovers.h"
#include "driver/records_lock.h"
#include "driver/run_loop.h"
#include "util/fs.h"
#include "util/time.h"

namespace kiln {

namespace {

std::optional<Chain> load(const DiskArgs& args) {
  return load_chain_or_report(args.chain_file, args.engine, "nothing was measured or removed");
}

std::string age_text(std::filesystem::file_time_type mtime) {
  auto age = std::filesystem::file_time_type::clock::now() - mtime;
  return human_duration(std::max(0.0, std::chrono::duration<double>(age).count()));
}

/// The work names a manual reclaim may remove that name an image now: test runs' images only
/// (work_name_removable). The store's names are listed once, so the dry run lists what the
/// reclaim would act on, not names that are already gone.
std::vector<std::string> removable_tags(const Chain& chain, const StoreLevers& store) {
  std::vector<std::string> present = store.tagged_images();
  std::vector<std::string> tags;
  for (const auto& stage : chain.stages) {
    std::string tag = work_tag(chain, stage);
    if (work_name_removable(chain, stage) &&
        std::find(present.begin(), present.end(), tag) != present.end()) {
      tags.push_back(std::move(tag));
    }
  }
  return tags;
}

} // namespace

void add_disk_command(CLI::App& app, DiskArgs& args, CLI::App*& status, CLI::App*& reclaim) {
  CLI::App* disk = app.add_subcommand("disk", "Free space, cache exports and the engine store");
  disk->require_subcommand(1);
  status = disk->add_subcommand("status", "Free space, cache exports by slug, engine store usage");
  reclaim = disk->add_subcommand(
      "reclaim", "Free space until --target-gb is free: leftovers, cache exports, the filtered "
                 "engine-store prune, then test runs' images; never an image the chain builds "
                 "on or publishes (run it between runs)");
  for (CLI::App* command : {status, reclaim}) {
    command->add_option("chain", args.chain_file, "The chain file (TOML)")->required();
    command->add_option("--engine", args.engine, "The engine instead of the chain's")
        ->check(CLI::IsMember({"buildah", "buildkit"}));
  }
  reclaim->add_option("--target-gb", args.target_gb, "Free space to reach, in G (GiB)")
      ->required()
      ->check(CLI::PositiveNumber);
  reclaim->add_flag("--dry-run", args.dry_run, "Say what would be removed; remove nothing");
}

namespace {

/// What runs of this checkout left behind, with what removes it.
void print_leftovers(const Chain& chain) {
  // Holding the lock proves no run builds: then whatever is found is left over.
  bool idle = RecordsLock::acquire(chain.records).has_value();
  Leftovers left = find_leftovers(chain, chain.engine);
  std::vector<std::string> lines = describe_leftovers(left);
  if (lines.empty()) {
    fmt::print("leftovers of earlier runs: none\n");
  } else {
    fmt::print("leftovers of earlier runs: {} ({}):\n", lines.size(),
               idle ? "kiln disk reclaim removes them, and so does the next run after one "
                      "that was killed or crashed"
                    : "a run of this checkout is in progress, so some may be its own");
    for (const auto& line : lines) {
      fmt::print("  {}\n", line);
    }
  }
  if (!left.error.empty()) {
    fmt::print("leftovers: buildah's containers could not be listed: {}\n", left.error);
  }
}

} // namespace

namespace {

/// One store's free space, where it keeps its data and what it holds.
void print_store(const StoreSite& site) {
  const StoreLevers& store = *site.levers;
  fmt::print("{}:\n", store.label());
  if (site.disk.empty()) {
    fmt::print("  free space: unknown from this host ({}): no floor, watchdog or reclaim "
               "measures it\n",
               site.disk_unknown);
  } else {
    auto free = free_bytes(site.disk);
    fmt::print("  free space: {} on {}\n", free ? gib_text(*free) + "G" : free.error(),
               site.disk.string());
    // With [disk] path set, the levers act on the store only when it shares that filesystem.
    if (auto location = store.location(); !location) {
      fmt::print("  where it keeps its data is unknown ({}): the disk guard leaves it alone\n",
                 location.error());
    } else if (location->path != site.disk) {
      fmt::print("  {}: {}\n", location->shown,
                 same_filesystem(location->path, site.disk)
                     ? fmt::format("on the filesystem of {}", site.disk.string())
                     : fmt::format("on another filesystem than {}: the disk guard leaves it "
                                   "alone",
                                   site.disk.string()));
    }
  }
  auto usage = store.usage();
  if (!usage) {
    fmt::print("  not readable: {}\n", usage.error());
    return;
  }
  fmt::print("  {}G on disk, {}G reclaimable\n", gib_text(usage->total_bytes),
             gib_text(usage->reclaimable_bytes));
  for (const auto& [type, bytes] : usage->bytes_by_type) {
    fmt::print("    {:<24} {:>6} record(s) {:>10}G\n", type.empty() ? "(no type)" : type,
               usage->records_by_type[type], gib_text(bytes));
  }
}

/// What a reclaim to `target` would do on the filesystem of `policy.path`, in order: its cache
/// exports, then the levers of `store` (nullptr: none there).
void print_reclaim_plan(const DiskPolicy& policy, const StoreLevers* store,
                        const std::string& named, uint64_t free, uint64_t target,
                        const std::vector<std::string>& tags) {
  uint64_t deficit = target - free;
  fmt::print("{}G free on {} ({}), {}G short of the target. Would, in this order, stopping once "
             "it is met:\n",
             gib_text(free), policy.path.string(), named, gib_text(deficit, true));
  if (policy.cache_root.empty()) {
    fmt::print("  no cache exports: no cache root is configured\n");
  } else if (!same_filesystem(policy.cache_root, policy.path)) {
    fmt::print("  leave the cache exports alone: {} is on another filesystem than {}\n",
               policy.cache_root.string(), policy.path.string());
  } else {
    auto slugs = list_slugs(policy.cache_root);
    size_t trimmable = slugs.size() > policy.keep_slugs ? slugs.size() - policy.keep_slugs : 0;
    uint64_t covered = 0;
    for (size_t i = 0; i < trimmable && covered < deficit; ++i) {
      fmt::print("  remove cache export {} ({}G, {} old)\n", slugs[i].name,
                 gib_text(slugs[i].bytes), age_text(slugs[i].mtime));
      covered += slugs[i].bytes;
    }
  }
  if (store == nullptr) {
    return;
  }
  if (std::string away = store_elsewhere(store, policy.path); !away.empty()) {
    fmt::print("  leave the {} and its images alone: {}\n", store->label(), away);
    return;
  }
  if (store->engine() == "buildkit") {
    // BuildKit's stage images are OCI layouts or pushes: there is no image store to remove from.
    fmt::print("  prune the layer cache of the {} (--filter type==regular), keeping {}G of "
               "layers; cache mounts are never pruned\n",
               store->label(), gib_text(effective_keep_gb(policy)));
    return;
  }
  auto stale = store->stale_images();
  fmt::print("  remove {} image(s) no build can reuse (the layer cache of tagged and recent "
             "images stays; cache-mount data is never touched){}\n",
             stale.size(), stale.empty() ? "" : ":");
  for (const auto& id : stale) {
    fmt::print("    {}\n", id);
  }
  for (const auto& tag : tags) {
    fmt::print("  remove image {} (a smoke stage's test run: nothing builds on it), measuring "
               "after it\n",
               tag);
  }
  fmt::print("  never an image a stable name holds, nor one a stage of the chain builds on, nor "
             "the final stage's\n");
}

} // namespace

int disk_status_command(const DiskArgs& args) {
  auto chain = load(args);
  if (!chain) {
    return k_exit_usage;
  }
  DiskPolicy policy = disk_policy(*chain);
  auto slugs = list_slugs(policy.cache_root);
  uint64_t total = 0;
  for (const auto& slug : slugs) {
    total += slug.bytes;
  }
  fmt::print("cache exports: {} slug(s), {}G in {} (oldest first; the newest {} are never "
             "trimmed)\n",
             slugs.size(), gib_text(total), policy.cache_root.string(), policy.keep_slugs);
  for (const auto& slug : slugs) {
    fmt::print("  {:<40} {:>10}G  {} old\n", slug.name, gib_text(slug.bytes), age_text(slug.mtime));
  }
  print_leftovers(*chain);
  StoreSites sites(*chain);
  for (const StoreSite& site : sites.all()) {
    print_store(site);
  }
  return k_exit_ok;
}

int disk_reclaim_command(const DiskArgs& args) {
  auto chain = load(args);
  if (!chain) {
    return k_exit_usage;
  }
  DiskPolicy base = disk_policy(*chain);
  for (const auto& line : normalize_policy(base)) {
    fmt::print("{}\n", line);
  }
  auto target = static_cast<uint64_t>(args.target_gb * static_cast<double>(k_gib));
  StoreSites sites(*chain);
  std::optional<RecordsLock> lock;
  if (!args.dry_run) {
    // A run of this checkout reclaims by its own plan, knowing what its builds still read: a
    // reclaim beside it could remove an image a running stage builds on.
    auto held = RecordsLock::acquire(chain->records);
    if (!held) {
      fmt::print(stderr, "kiln: error: {}\n", held.error());
      return k_exit_usage;
    }
    lock = std::move(*held);
    lock->describe("kiln disk reclaim", utc_iso8601(std::chrono::system_clock::now()));
    // What runs that could not clean up left first: a working container's mount keeps its
    // image from every removal below.
    for (const auto& line : remove_leftovers(find_leftovers(*chain, chain->engine))) {
      fmt::print("{}\n", line);
    }
  } else {
    print_leftovers(*chain); // removed first, whatever the target
  }
  for (const StoreSite& site : sites.all()) {
    if (site.disk.empty()) {
      fmt::print("{}: left alone: its free space cannot be measured from this host ({})\n",
                 site.levers->label(), site.disk_unknown);
    }
  }
  int code = k_exit_ok;
  for (const auto& [disk, store] : sites.measured_disks(base.cache_root)) {
    DiskPolicy policy = base;
    policy.path = disk;
    std::string named = store == nullptr ? std::string("cache exports") : store->label();
    auto free = free_bytes(policy.path);
    if (!free) {
      fmt::print(stderr, "kiln: error: {} ({}): {}\n", policy.path.string(), named, free.error());
      code = k_exit_failed;
      continue;
    }
    if (*free >= target) {
      fmt::print("{}G free on {} ({}): already at the {}G target; nothing to do\n", gib_text(*free),
                 policy.path.string(), named, gib_text(args.target_gb));
      continue;
    }
    std::vector<std::string> tags =
        store == nullptr ? std::vector<std::string>{} : removable_tags(*chain, *store);
    if (args.dry_run) {
      print_reclaim_plan(policy, store, named, *free, target, tags);
      continue;
    }
    ReclaimOutcome outcome =
        reclaim(policy, "kiln disk reclaim", target, {}, store, false, true, tags);
    for (const auto& line : outcome.lines) {
      fmt::print("{}\n", line);
    }
    fmt::print("{}\n", outcome.record);
    if (outcome.removed_any) {
      // What a later rebuild of unchanged inputs names as what may have taken its cache.
      journal_reclaim(chain->records, utc_iso8601(std::chrono::system_clock::now()),
                      outcome.record);
    }
    if (outcome.free_after_gb < args.target_gb) {
      code = k_exit_failed;
    }
  }
  return code;
}

} // namespace kiln
