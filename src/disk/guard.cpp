#include "disk/guard.h"

#include <algorithm>
#include <exception>

#include <fmt/format.h>

#include "disk/slugs.h"
#include "util/fs.h"

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

std::string engine_name(const StoreLevers* store) {
  try {
    return store->engine();
  } catch (const std::exception&) {
    return "engine";
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

struct ImagePass {
  int dangling = 0;
  int tags = 0;
  int removed = 0;
};

} // namespace

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
    out.nothing = true;
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

  // (1) Slugs first: losing one costs export reuse for one stage, never a compile cache.
  if (p.cache_root.empty()) {
    out.lines.push_back("[disk-trim] skipped: no cache root is configured");
  } else {
    uint64_t start = gauge.free();
    TrimResult trim =
        trim_slugs(p.cache_root, target_free_bytes - start, p.keep_slugs, protected_slugs, p.path);
    out.lines.insert(out.lines.end(), trim.lines.begin(), trim.lines.end());
    out.trimmed = gain(start, gauge.measure());
  }

  // (2) The engine store's filtered prune, at most once per episode: it walks the whole store.
  if (met()) {
    out.lines.push_back(met_line("[disk-store]"));
  } else if (store == nullptr) {
    out.lines.push_back("[disk-store] skipped: no engine levers here");
  } else if (store_already_pruned) {
    out.lines.push_back("[disk-store] skipped: already pruned once here (a second prune walks "
                        "the whole store again and frees nothing)");
  } else {
    std::string note;
    double keep = effective_keep_gb(p, &note);
    if (!note.empty()) {
      out.lines.push_back(note);
    }
    uint64_t start = gauge.free();
    out.store_prune_ran = true;
    try {
      LayerPrune prune = store->prune_layers(keep);
      out.lines.insert(out.lines.end(), prune.lines.begin(), prune.lines.end());
      if (!prune.ran) {
        out.lines.push_back("[disk-store] prune did not run: " + prune.skipped);
      }
    } catch (const std::exception& error) {
      out.lines.push_back(fmt::format("[disk-store] prune failed: {}", error.what()));
    }
    out.store_freed = gain(start, gauge.measure());
  }

  // (3) Images, only between stages, measured after each removal: the unique layers an image
  // holds, not its size, are what removing it frees.
  ImagePass images;
  if (met()) {
    out.lines.push_back(met_line("[disk-image]"));
  } else if (!images_allowed) {
    out.lines.push_back("[disk-image] skipped: images are not removed while a build runs (an "
                        "image prune once took a blob out from under a running build)");
  } else if (store == nullptr) {
    out.lines.push_back("[disk-image] skipped: no engine levers here");
  } else {
    uint64_t start = gauge.free();
    std::vector<std::string> dangling;
    try {
      dangling = store->dangling_images();
    } catch (const std::exception& error) {
      out.lines.push_back(
          fmt::format("[disk-image] cannot list dangling images: {}", error.what()));
    }
    images.dangling = static_cast<int>(dangling.size());
    images.tags = static_cast<int>(removable_tags.size());
    std::vector<std::string> order = dangling;
    order.insert(order.end(), removable_tags.begin(), removable_tags.end());
    for (const std::string& reference : order) {
      if (met()) {
        break;
      }
      uint64_t before = gauge.free();
      bool removed = false;
      std::string why;
      try {
        removed = store->remove_image(reference);
      } catch (const std::exception& error) {
        why = std::string(": ") + error.what();
      }
      uint64_t after = gauge.measure();
      if (!removed) {
        out.lines.push_back(fmt::format("[disk-image] cannot remove {}{}", reference, why));
        continue;
      }
      ++images.removed;
      out.lines.push_back(fmt::format("[disk-image] removed {}: freed {} GiB; {}G free now",
                                      reference, gib_text(gain(before, after)), gib_text(after)));
    }
    out.images_freed = gain(start, gauge.measure());
  }

  uint64_t after = gauge.measure();
  out.free_after_gb = bytes_gb(after);
  std::string short_note =
      after < target_free_bytes ? fmt::format("; still short of the {}G target", target_text) : "";
  out.nothing = out.trimmed == 0 && out.store_freed == 0 && out.images_freed == 0;
  if (!out.nothing) {
    out.record =
        fmt::format("[disk-reclaim] {}: freed {} GiB of cache exports + {} GiB of "
                    "engine store + {} GiB of images ({}G -> {}G free){}",
                    where, gib_text(out.trimmed), gib_text(out.store_freed),
                    gib_text(out.images_freed), gib_text(*initial), gib_text(after), short_note);
    return out;
  }

  std::string head =
      fmt::format("WARN [disk-reclaim] {}: NOTHING was reclaimable ({}G -> {}G free)", where,
                  gib_text(*initial), gib_text(after));
  if (!images_allowed) {
    std::string unseen =
        store == nullptr
            ? std::string("the engine store and its tagged images (no engine levers here)")
            : fmt::format("{} tagged image(s) in the {} store", tagged_text(tagged_count(store)),
                          engine_name(store));
    out.record = fmt::format("{}; not looked at: {}, removable only between runs", head, unseen);
    return out;
  }
  size_t slugs = p.cache_root.empty() ? 0 : list_slugs(p.cache_root).size();
  std::string store_seen =
      store == nullptr ? std::string("no engine store (no engine levers here)")
      : store_already_pruned
          ? fmt::format("the {} store (already pruned once here)", engine_name(store))
          : fmt::format("the {} store's layer cache", engine_name(store));
  std::string images_seen =
      store == nullptr
          ? std::string("no images")
          : fmt::format("{} dangling image(s) and {} tag(s) the rest of the run does not need; "
                        "{} tagged image(s) remain in the store",
                        images.dangling, images.tags, tagged_text(tagged_count(store)));
  out.record =
      fmt::format("{}; looked at: {} cache export(s) (the newest {} and {} protected "
                  "are kept), {}, {}",
                  head, slugs, p.keep_slugs, protected_slugs.size(), store_seen, images_seen);
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
                       const std::vector<std::string>& removable_tags) {
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
                                   true, removable_tags);
  gate.lines.insert(gate.lines.end(), outcome.lines.begin(), outcome.lines.end());
  gate.lines.push_back(outcome.record);
  Gauge gauge(p.path, *free);
  uint64_t now = gauge.measure();
  if (now >= floor) {
    return gate;
  }
  gate.ok = false;
  gate.message = fmt::format(
      "{}G free on {}, stage {} needs {}G; reclaimed {} GiB of cache exports + {} GiB of engine "
      "store + {} GiB of images and it is still short by {}G: free space on {} or lower the "
      "stage's disk floor{}",
      gib_text(now), p.path.string(), stage, floor_text, gib_text(outcome.trimmed),
      gib_text(outcome.store_freed), gib_text(outcome.images_freed), shortfall_text(floor - now),
      p.path.string(), largest_folder_note(p));
  return gate;
}

} // namespace kiln
