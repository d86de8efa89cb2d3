#include "disk/guard.h"

#include <algorithm>
#include <exception>
#include <optional>

#include <fmt/format.h>

#include "disk/slugs.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kiln {

namespace {

uint64_t gb_bytes(double gb) {
  return gb <= 0 ? 0 : static_cast<uint64_t>(gb * static_cast<double>(k_gib));
}

double bytes_gb(uint64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(k_gib);
}

std::string shortfall_text(uint64_t bytes) {
  return gib_text(bytes, true);
}

uint64_t gain(uint64_t before, uint64_t after) {
  return after > before ? after - before : 0;
}

/// Free space on the guarded path; keeps the last good figure when a measurement fails, so a
/// transient statvfs error reads as "nothing changed" rather than as space freed or lost.
class Gauge {
public:
  Gauge(std::filesystem::path path, uint64_t initial) : m_path(std::move(path)), m_free(initial) {}
  uint64_t measure() {
    if (auto free = free_bytes(m_path)) {
      m_free = *free;
    }
    return m_free;
  }
  uint64_t free() const { return m_free; }

private:
  std::filesystem::path m_path;
  uint64_t m_free;
};

std::string largest_folder_note(const DiskPolicy& p) {
  if (p.cache_root.empty()) {
    return "";
  }
  std::vector<Slug> slugs = list_slugs(p.cache_root);
  uint64_t total = 0;
  for (const Slug& slug : slugs) {
    total += slug.bytes;
  }
  return fmt::format("; the largest folder kiln manages is {} ({} GiB in {} cache export(s), the "
                     "newest {} of which are always kept)",
                     p.cache_root.string(), gib_text(total), slugs.size(), p.keep_slugs);
}

std::string store_label(const StoreLevers* store) {
  try {
    return store->label();
  } catch (const std::exception&) {
    return "engine store";
  }
}

int tagged_count(const StoreLevers* store) {
  try {
    return static_cast<int>(store->tagged_images().size());
  } catch (const std::exception&) {
    return -1;
  }
}

std::string tagged_text(int count) {
  return count < 0 ? std::string("an unknown number of") : std::to_string(count);
}

/// Why freeing space under `path` does nothing for the filesystem short of space (device
/// `short_device`, at `short_path`), or nothing when it is that filesystem. A device that
/// cannot be read counts as another: a lever acts only where it is known to help.
std::optional<std::string> elsewhere(const std::filesystem::path& path,
                                     const tl::expected<uint64_t, std::string>& short_device,
                                     const std::filesystem::path& short_path) {
  if (!short_device) {
    return fmt::format("cannot be compared with {} ({})", short_path.string(),
                       short_device.error());
  }
  auto device = filesystem_device(path);
  if (!device) {
    return fmt::format("cannot be compared with {} ({})", short_path.string(), device.error());
  }
  if (*device != *short_device) {
    return fmt::format("is on another filesystem than {}", short_path.string());
  }
  return std::nullopt;
}

/// How many removed things a record names before it only counts the rest.
constexpr size_t k_names_shown = 5;

} // namespace

std::string store_elsewhere(const StoreLevers* store, const std::filesystem::path& path) {
  tl::expected<StoreLocation, std::string> location = tl::unexpected(std::string());
  try {
    location = store->location();
  } catch (const std::exception& error) {
    location = tl::unexpected(std::string(error.what()));
  }
  if (!location) {
    return fmt::format("where the {} keeps its data is unknown ({}), so it is not pruned for {}",
                       store_label(store), location.error(), path.string());
  }
  if (auto away = elsewhere(location->path, filesystem_device(path), path)) {
    return fmt::format("{} {}", location->shown, *away);
  }
  return "";
}

double effective_keep_gb(const DiskPolicy& policy, std::string* note) {
  double keep = policy.buildkit_keep_gb;
  if (note != nullptr) {
    note->clear();
  }
  if (keep > 0 && keep < k_min_buildkit_keep_gb) {
    if (note != nullptr) {
      *note = fmt::format("[disk] buildkit_keep_gb {} raised to {}: with less layer cache kept, "
                          "the next stages recompiled what they should have pulled from cache "
                          "(0 reclaims every regenerable layer)",
                          keep, k_min_buildkit_keep_gb);
    }
    return k_min_buildkit_keep_gb;
  }
  return std::max(keep, 0.0);
}

std::vector<std::string> normalize_policy(DiskPolicy& policy) {
  std::string note;
  policy.buildkit_keep_gb = effective_keep_gb(policy, &note);
  return note.empty() ? std::vector<std::string>{} : std::vector<std::string>{note};
}

ReclaimOutcome reclaim(const DiskPolicy& p, const std::string& where, uint64_t target_free_bytes,
                       const std::vector<std::string>& protected_slugs, const StoreLevers* store,
                       bool store_already_pruned, bool images_allowed,
                       const std::vector<std::string>& removable_tags) {
  ReclaimOutcome out;
  auto initial = free_bytes(p.path);
  if (!initial) {
    out.record =
        fmt::format("WARN [disk-reclaim] {}: {}; nothing reclaimed", where, initial.error());
    return out;
  }
  Gauge gauge(p.path, *initial);
  out.free_before_gb = bytes_gb(*initial);
  std::string target_text = gib_text(target_free_bytes);
  auto met = [&]() { return gauge.free() >= target_free_bytes; };
  auto met_line = [&](const char* prefix) {
    return fmt::format("{} skipped: {}G free meets the {}G target", prefix, gib_text(gauge.free()),
                       target_text);
  };

  if (met()) {
    out.record = fmt::format("[disk-reclaim] {}: nothing to do ({}G free, target {}G)", where,
                             gib_text(gauge.free()), target_text);
    out.free_after_gb = out.free_before_gb;
    return out;
  }
  // Every lever frees space only on its own filesystem: one whose storage is elsewhere is left
  // alone, however short this one is (records on a tmpfs once had 40 images of the store on /
  // removed for them, freeing nothing there).
  auto short_device = filesystem_device(p.path);

  // (1) Slugs first: losing one costs export reuse for one stage, never a compile cache.
  if (p.cache_root.empty()) {
    out.lines.push_back("[disk-trim] skipped: no cache root is configured");
    out.parts.push_back("cache exports: none configured");
  } else if (auto away = elsewhere(p.cache_root, short_device, p.path)) {
    out.lines.push_back(fmt::format("[disk-trim] skipped: {} {}", p.cache_root.string(), *away));
    out.parts.push_back(
        fmt::format("cache exports: untouched ({} {})", p.cache_root.string(), *away));
  } else {
    uint64_t start = gauge.free();
    TrimResult trim =
        trim_slugs(p.cache_root, target_free_bytes - start, p.keep_slugs, protected_slugs, p.path);
    out.lines.insert(out.lines.end(), trim.lines.begin(), trim.lines.end());
    out.trimmed = gain(start, gauge.measure());
    out.removed_any = out.removed_any || trim.removed > 0;
    out.parts.push_back(
        trim.removed > 0
            ? fmt::format("cache exports: removed {} ({}), freed {} GiB", trim.removed,
                          first_names(trim.names, k_names_shown), gib_text(out.trimmed))
        : trim.listed == 0 ? fmt::format("cache exports: none under {}", p.cache_root.string())
                           : fmt::format("cache exports: removed none of {} (the newest {} and {} "
                                         "protected are kept)",
                                         trim.listed, p.keep_slugs, protected_slugs.size()));
  }

  // The engine store's two levers share one question: is the store on this filesystem?
  std::string store_name = store == nullptr ? std::string("engine store") : store_label(store);
  std::string store_away; // why the store is left alone, or ""
  if (store != nullptr && !met()) {
    store_away = store_elsewhere(store, p.path);
    if (!store_away.empty()) {
      out.lines.push_back(fmt::format("[disk-store] skipped: {}", store_away));
      out.parts.push_back(fmt::format("{} and its images: untouched ({})", store_name, store_away));
    }
  }

  // (2) The engine store's filtered prune, at most once per episode: it walks the whole store.
  if (met()) {
    out.lines.push_back(met_line("[disk-store]"));
  } else if (store == nullptr) {
    out.lines.push_back("[disk-store] skipped: no engine levers here");
    out.parts.push_back("engine store: no engine levers here");
  } else if (!store_away.empty()) {
    // said above, once for both levers
  } else if (store_already_pruned) {
    out.lines.push_back("[disk-store] skipped: already pruned once here (a second prune walks "
                        "the whole store again and frees nothing)");
    out.parts.push_back(fmt::format("{}: already pruned once here", store_name));
  } else {
    std::string note;
    double keep = effective_keep_gb(p, &note);
    if (!note.empty()) {
      out.lines.push_back(note);
    }
    uint64_t start = gauge.free();
    out.store_prune_ran = true;
    std::string summary;
    try {
      LayerPrune prune = store->prune_layers(keep);
      out.lines.insert(out.lines.end(), prune.lines.begin(), prune.lines.end());
      if (!prune.ran) {
        out.lines.push_back("[disk-store] prune did not run: " + prune.skipped);
      }
      out.removed_any = out.removed_any || prune.removed_any;
      summary = prune.summary.empty() ? std::string("pruned") : prune.summary;
    } catch (const std::exception& error) {
      out.lines.push_back(fmt::format("[disk-store] prune failed: {}", error.what()));
      summary = fmt::format("prune failed: {}", error.what());
    }
    out.store_freed = gain(start, gauge.measure());
    out.parts.push_back(
        fmt::format("{}: {}, freed {} GiB", store_name, summary, gib_text(out.store_freed)));
  }

  // (3) Images, only between stages, measured after each removal: the unique layers an image
  // holds, not its size, are what removing it frees.
  if (met()) {
    out.lines.push_back(met_line("[disk-image]"));
  } else if (store == nullptr || !store_away.empty()) {
    // said above
  } else if (!images_allowed) {
    out.lines.push_back("[disk-image] skipped: images are not removed while a build runs (an "
                        "image prune once took a blob out from under a running build)");
    out.parts.push_back(
        fmt::format("images: not looked at while a build runs ({} tagged image(s) in the {}, "
                    "removable only between stages)",
                    tagged_text(tagged_count(store)), store_name));
  } else {
    uint64_t start = gauge.free();
    std::vector<std::string> stale;
    try {
      stale = store->stale_images();
    } catch (const std::exception& error) {
      out.lines.push_back(fmt::format("[disk-image] cannot list stale images: {}", error.what()));
    }
    std::vector<std::string> order = stale;
    order.insert(order.end(), removable_tags.begin(), removable_tags.end());
    std::vector<std::string> removed;
    for (const std::string& reference : order) {
      if (met()) {
        break;
      }
      uint64_t before = gauge.free();
      tl::expected<void, std::string> done = tl::unexpected(std::string());
      try {
        done = store->remove_image(reference);
      } catch (const std::exception& error) {
        done = tl::unexpected(std::string(error.what()));
      }
      uint64_t after = gauge.measure();
      if (!done) {
        out.lines.push_back(fmt::format("[disk-image] kept {}: {}", reference, done.error()));
        continue;
      }
      removed.push_back(reference);
      out.lines.push_back(fmt::format("[disk-image] removed {}: freed {} GiB; {}G free now",
                                      reference, gib_text(gain(before, after)), gib_text(after)));
    }
    out.images_freed = gain(start, gauge.measure());
    out.removed_any = out.removed_any || !removed.empty();
    out.parts.push_back(
        !removed.empty()
            ? fmt::format("images: removed {} ({}), freed {} GiB", removed.size(),
                          first_names(removed, k_names_shown), gib_text(out.images_freed))
            : fmt::format("images: removed none of {} stale image(s) and {} tag(s) the rest of "
                          "the run does not need",
                          stale.size(), removable_tags.size()));
  }

  uint64_t after = gauge.measure();
  out.free_after_gb = bytes_gb(after);
  std::string short_note =
      after < target_free_bytes ? fmt::format("; still short of the {}G target", target_text) : "";
  std::string head =
      out.removed_any
          ? fmt::format("[disk-reclaim] {}: freed {} GiB", where, gib_text(gain(*initial, after)))
          : fmt::format("WARN [disk-reclaim] {}: NOTHING was removed", where);
  out.record = fmt::format("{} ({}G -> {}G free{}); {}", head, gib_text(*initial), gib_text(after),
                           short_note, join(out.parts, "; "));
  return out;
}

GateResult preflight(const DiskPolicy& p) {
  GateResult gate;
  if (p.need_gb <= 0) {
    return gate;
  }
  uint64_t need = gb_bytes(p.need_gb);
  auto free = free_bytes(p.path);
  if (!free) {
    // Refusing on a failed measurement would stop runs for no disk reason; the stage gates
    // and the watchdog measure again.
    gate.lines.push_back(fmt::format("WARN [disk] preflight skipped: {}", free.error()));
    return gate;
  }
  std::string need_text = gib_text(p.need_gb);
  if (*free >= need) {
    gate.lines.push_back(fmt::format("[disk] preflight: {}G free on {}, the chain needs {}G",
                                     gib_text(*free), p.path.string(), need_text));
    return gate;
  }
  gate.lines.push_back(fmt::format("[disk] preflight: {}G free on {}, the chain needs {}G: "
                                   "trimming cache exports",
                                   gib_text(*free), p.path.string(), need_text));
  TrimResult trim;
  if (p.cache_root.empty()) {
    gate.lines.push_back("[disk-trim] skipped: no cache root is configured");
  } else {
    trim = trim_slugs(p.cache_root, need - *free, p.keep_slugs, {}, p.path);
    gate.lines.insert(gate.lines.end(), trim.lines.begin(), trim.lines.end());
  }
  Gauge gauge(p.path, *free);
  uint64_t now = gauge.measure();
  if (now >= need) {
    gate.lines.push_back(fmt::format("[disk] preflight: {}G free on {} after trimming, the chain "
                                     "needs {}G",
                                     gib_text(now), p.path.string(), need_text));
    return gate;
  }
  gate.ok = false;
  gate.message = fmt::format("{}G free on {}, the chain needs {}G; trimmed {} cache export(s) ({} "
                             "GiB) and it is still short by {}G: free space on {} or lower [disk] "
                             "need_gb{}",
                             gib_text(now), p.path.string(), need_text, trim.removed,
                             gib_text(trim.freed_bytes), shortfall_text(need - now),
                             p.path.string(), largest_folder_note(p));
  return gate;
}

GateResult stage_floor(const DiskPolicy& p, const std::string& stage, double floor_gb,
                       const std::vector<std::string>& protected_slugs, const StoreLevers* store,
                       const std::vector<std::string>& removable_tags, bool images_allowed) {
  GateResult gate;
  if (floor_gb <= 0) {
    return gate;
  }
  uint64_t floor = gb_bytes(floor_gb);
  auto free = free_bytes(p.path);
  if (!free) {
    gate.lines.push_back(
        fmt::format("WARN [disk] stage {}: floor check skipped: {}", stage, free.error()));
    return gate;
  }
  std::string floor_text = gib_text(floor_gb);
  gate.lines.push_back(fmt::format("[disk] stage {}: {}G free on {}, floor {}G", stage,
                                   gib_text(*free), p.path.string(), floor_text));
  if (*free >= floor) {
    return gate;
  }
  ReclaimOutcome outcome = reclaim(p, "before stage " + stage, floor, protected_slugs, store, false,
                                   images_allowed, removable_tags);
  gate.lines.insert(gate.lines.end(), outcome.lines.begin(), outcome.lines.end());
  gate.lines.push_back(outcome.record);
  Gauge gauge(p.path, *free);
  uint64_t now = gauge.measure();
  if (now >= floor) {
    return gate;
  }
  gate.ok = false;
  gate.message = fmt::format(
      "{}G free on {}, stage {} needs {}G and is still short by {}G after a reclaim ({}): free "
      "space on {} or lower the stage's disk floor{}",
      gib_text(now), p.path.string(), stage, floor_text, shortfall_text(floor - now),
      outcome.parts.empty() ? std::string("nothing reclaimed") : join(outcome.parts, "; "),
      p.path.string(), largest_folder_note(p));
  return gate;
}

} // namespace kiln
