#include "disk/buildah_store.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "disk/sizes.h"
#include "disk/slugs.h"
#include "disk/tree_size.h"
#include "engine/buildah_layers.h"
#include "util/process.h"
#include "util/strings.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

// Listing and removing images takes seconds even on a big store; a limit only keeps a stuck
// store lock from hanging a run.
constexpr std::chrono::minutes k_command_timeout{10};
// Ids per removal command, so a store with thousands of dangling images stays within ARG_MAX.
constexpr size_t k_ids_per_removal = 100;
// Ids a one-line summary names before it only counts the rest.
constexpr size_t k_ids_named = 5;

/// An id as buildah's own messages show it.
std::string short_id(std::string_view id) {
  return std::string(id.substr(0, 12));
}

std::string shown_dirs(const std::vector<fs::path>& dirs) {
  std::vector<std::string> shown;
  for (const fs::path& dir : dirs) {
    shown.push_back(dir.string());
  }
  return join(shown, " and ");
}

/// `ids` as short ids, the first `at_most` only.
std::string named_ids(const std::vector<std::string>& ids, size_t at_most) {
  std::vector<std::string> shown;
  for (const std::string& id : ids) {
    shown.push_back(short_id(id));
  }
  return first_names(shown, at_most);
}

bool is_prefix(const std::vector<std::string>& part, const std::vector<std::string>& whole) {
  return part.size() <= whole.size() && std::equal(part.begin(), part.end(), whole.begin());
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

StaleImages find_stale_images(
    const std::vector<BuildahImage>& images, const std::set<std::string>& dangling,
    const std::function<tl::expected<BuildahImageSteps, std::string>(const std::string&)>& steps,
    int64_t now, std::chrono::seconds min_age) {
  StaleImages result;
  auto recent = [&](const BuildahImage& image) { return now - image.created < min_age.count(); };

  std::vector<std::pair<const BuildahImage*, BuildahImageSteps>> candidates;
  for (const BuildahImage& image : images) {
    if (!image.names.empty() || image.read_only || !dangling.contains(image.id)) {
      continue;
    }
    if (recent(image)) {
      ++result.young;
      result.kept.insert(image.id);
      continue;
    }
    auto read = steps(image.id);
    if (!read) {
      ++result.unreadable;
      result.kept.insert(image.id);
      result.errors.push_back(read.error());
      continue;
    }
    if (read->diff_ids.empty()) {
      ++result.layerless;
      result.kept.insert(image.id);
      continue;
    }
    candidates.emplace_back(&image, std::move(*read));
  }
  if (candidates.empty()) {
    return result;
  }

  // What builds still want: tagged images and recent ones (a running or just failed build).
  std::vector<BuildahImageSteps> wanted;
  for (const BuildahImage& image : images) {
    if (image.names.empty() && !recent(image)) {
      continue;
    }
    auto read = steps(image.id);
    if (!read) {
      // Whether a candidate is this image's layer cache cannot be told: keep them all.
      result.errors.push_back(read.error());
      result.unreadable += static_cast<int>(candidates.size());
      for (const auto& candidate : candidates) {
        result.kept.insert(candidate.first->id);
      }
      return result;
    }
    wanted.push_back(std::move(*read));
  }
  for (const auto& [image, own] : candidates) {
    bool reused = std::any_of(wanted.begin(), wanted.end(), [&own = own](const auto& other) {
      return is_prefix(own.history, other.history) && is_prefix(own.diff_ids, other.diff_ids);
    });
    if (reused) {
      ++result.reused;
      result.kept.insert(image->id);
      continue;
    }
    result.stale.push_back(image->id);
    result.stale_bytes += image->bytes;
  }
  return result;
}

std::map<std::string, LayerShare> layer_bytes_by_kind(
    const std::vector<StoreIndexEntry>& images, const std::vector<StoreIndexEntry>& layers,
    const std::map<std::string, std::string>& kind_of, const std::vector<std::string>& kinds) {
  std::map<std::string_view, const StoreIndexEntry*> layer_by_id;
  for (const StoreIndexEntry& layer : layers) {
    layer_by_id[layer.id] = &layer;
  }
  // Strongest kind first: a layer already claimed was claimed with its parents, by a kind at
  // least as strong, so each walk stops there and every layer is visited once.
  std::map<std::string_view, const std::string*> owner;
  for (const std::string& kind : kinds) {
    for (const StoreIndexEntry& image : images) {
      auto found = kind_of.find(image.id);
      if (found == kind_of.end() || found->second != kind) {
        continue;
      }
      for (auto layer = layer_by_id.find(image.layer);
           layer != layer_by_id.end() && owner.try_emplace(layer->first, &kind).second;
           layer = layer_by_id.find(layer->second->parent)) {
      }
    }
  }
  std::map<std::string, LayerShare> shares;
  for (const StoreIndexEntry& layer : layers) {
    auto held = owner.find(layer.id);
    LayerShare& share = shares[held == owner.end() ? std::string("no image") : *held->second];
    share.bytes += layer.diff_size;
    share.layers += 1;
  }
  return shares;
}

std::vector<fs::path> buildah_cache_dirs() {
  // buildah's GetTempDir: $TMPDIR when set, else /var/tmp; kiln starts buildah with its own
  // environment, so both see the same value.
  const char* tmpdir = std::getenv("TMPDIR");
  fs::path base = tmpdir != nullptr && *tmpdir != '\0' ? fs::path(tmpdir) : fs::path("/var/tmp");
  return {base / "buildah-cache", base / fmt::format("buildah-cache-{}", ::getuid())};
}

CacheDirCount count_cache_dirs(const std::vector<fs::path>& dirs) {
  CacheDirCount count;
  for (const fs::path& dir : dirs) {
    std::error_code error;
    for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, error);
         !error && it != fs::directory_iterator(); it.increment(error)) {
      if (it->is_directory(error)) {
        ++count.mounts;
      }
    }
    error.clear();
    for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied,
                                             error);
         !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
      std::error_code entry_error;
      if (it->is_regular_file(entry_error)) {
        ++count.files;
        count.bytes += it->file_size(entry_error);
      }
    }
  }
  return count;
}

std::vector<std::string> BuildahStore::command(std::initializer_list<std::string> args) const {
  std::vector<std::string> argv = {"buildah"};
  argv.insert(argv.end(), m_options.global_flags.begin(), m_options.global_flags.end());
  argv.insert(argv.end(), args);
  return argv;
}

tl::expected<BuildahStore::Listing, std::string>
BuildahStore::list(const std::function<void(const std::vector<std::string>&)>& ran) const {
  auto step = [&](const std::vector<std::string>& argv) {
    if (ran) {
      ran(argv);
    }
    return run_captured(argv, k_command_timeout);
  };
  CapturedRun listed = step(command({"images", "--all", "--json", "--no-trunc"}));
  if (!listed.exit.ok()) {
    return tl::unexpected(fmt::format("buildah images failed: {}", listed.failure()));
  }
  auto images = parse_buildah_images(listed.output);
  if (!images) {
    return tl::unexpected(images.error());
  }
  CapturedRun dangling =
      step(command({"images", "--filter", "dangling=true", "--quiet", "--no-trunc"}));
  if (!dangling.exit.ok()) {
    return tl::unexpected(fmt::format("buildah images failed: {}", dangling.failure()));
  }
  return Listing{std::move(*images), parse_buildah_ids(dangling.output)};
}

tl::expected<BuildahImageSteps, std::string>
BuildahStore::steps(const std::string& reference, const std::optional<BuildahStorePlace>& place,
                    const std::function<void(const std::vector<std::string>&)>& ran) const {
  if (place) {
    if (auto blob = buildah_config_blob(*place, reference)) {
      if (auto steps = parse_config_steps(*blob)) {
        return steps;
      }
    }
  }
  std::vector<std::string> argv = command({"inspect", "--type", "image", "--", reference});
  if (ran) {
    ran(argv);
  }
  CapturedRun inspected = run_captured(argv, k_command_timeout);
  if (!inspected.exit.ok()) {
    return tl::unexpected(
        fmt::format("buildah inspect {} failed: {}", short_id(reference), inspected.failure()));
  }
  auto steps = parse_buildah_inspect(inspected.output);
  if (!steps) {
    return tl::unexpected(fmt::format("{}: {}", short_id(reference), steps.error()));
  }
  return steps;
}

StaleImages
BuildahStore::stale(const Listing& listing,
                    const std::function<void(const std::vector<std::string>&)>& ran) const {
  // Each config is read in place when the store can be located: a file read where a `buildah
  // inspect` takes 0.2 s, and a store holds thousands of images.
  std::optional<BuildahStorePlace> place;
  if (auto located = this->place(ran)) {
    place = *located;
  }
  auto read = [&](const std::string& id) { return steps(id, place, ran); };
  return find_stale_images(listing.images, listing.dangling, read, unix_now(),
                           m_options.min_dangling_age);
}

tl::expected<BuildahStorePlace, std::string>
BuildahStore::place(const std::function<void(const std::vector<std::string>&)>& ran) const {
  std::lock_guard lock(m_place_mutex);
  if (m_place) {
    return *m_place;
  }
  std::vector<std::string> argv = command({"info"});
  if (ran) {
    ran(argv);
  }
  CapturedRun info = run_captured(argv, k_command_timeout);
  if (!info.exit.ok()) {
    return tl::unexpected(fmt::format("buildah info failed: {}", info.failure()));
  }
  auto place = parse_buildah_info(info.output);
  if (place) {
    m_place = *place;
  }
  return place;
}

tl::expected<StoreLocation, std::string> BuildahStore::location() const {
  return place().map([](const BuildahStorePlace& place) {
    return StoreLocation{place.root, fmt::format("the buildah store {}", place.root.string())};
  });
}

tl::expected<StoreUsage, std::string> BuildahStore::usage() const {
  auto place = this->place();
  if (!place) {
    return tl::unexpected(place.error());
  }
  auto indexes = read_store_indexes(*place);
  if (!indexes) {
    return tl::unexpected(indexes.error());
  }
  auto listing = list();
  if (!listing) {
    return tl::unexpected(listing.error());
  }
  StaleImages verdict = stale(*listing);
  std::set<std::string> stale_ids(verdict.stale.begin(), verdict.stale.end());

  StoreUsage usage;
  std::map<std::string, std::string> kind_of;
  for (const BuildahImage& image : listing->images) {
    std::string kind = !image.names.empty()           ? "image"
                       : stale_ids.contains(image.id) ? "dangling"
                                                      : "intermediate";
    usage.records_by_type[kind] += 1;
    kind_of[image.id] = std::move(kind);
  }
  for (const auto& [kind, share] : layer_bytes_by_kind(*indexes->images, *indexes->layers, kind_of,
                                                       {"image", "intermediate", "dangling"})) {
    usage.bytes_by_type[kind] = share.bytes;
    if (kind == "no image") {
      usage.records_by_type[kind] = share.layers; // no image to count: its layers
    }
  }
  usage.reclaimable_bytes = usage.bytes_by_type["dangling"];
  usage.total_bytes = tree_size(place->root).allocated;
  CacheDirCount cache = count_cache_dirs(buildah_cache_dirs());
  usage.bytes_by_type["cache-mount"] += cache.bytes;
  usage.records_by_type["cache-mount"] += cache.mounts;
  usage.total_bytes += cache.bytes;
  return usage;
}

LayerPrune BuildahStore::prune_layers(double keep_gb) const {
  LayerPrune result;
  auto note = [&](const std::vector<std::string>& argv) {
    result.commands.push_back(join(argv, " "));
  };
  auto skip = [&](std::string why) {
    result.lines.push_back(fmt::format("[disk-store] WARN buildah layer prune skipped: {}", why));
    result.summary = "skipped: " + why;
    result.skipped = std::move(why);
    return result;
  };

  std::vector<fs::path> cache_dirs = buildah_cache_dirs();
  CacheDirCount before = count_cache_dirs(cache_dirs);

  auto listing = list(note);
  if (!listing) {
    return skip(listing.error());
  }
  result.ran = true;
  result.cache_mounts_before = before.mounts;

  StaleImages verdict = stale(*listing, note);
  result.lines.push_back(fmt::format(
      "[disk-store] buildah: removing {} dangling image(s) no build can reuse ({} as listed); "
      "keep {:g} GB does not apply: buildah has no size-bounded prune, and its layer cache stays",
      verdict.stale.size(), decimal_size(verdict.stale_bytes), keep_gb));
  if (verdict.reused > 0) {
    result.lines.push_back(fmt::format(
        "[disk-store] buildah: kept {} dangling image(s) that tagged or recent images build on: "
        "they are layer cache a build reuses",
        verdict.reused));
  }
  if (verdict.layerless > 0) {
    result.lines.push_back(fmt::format(
        "[disk-store] buildah: kept {} dangling image(s) without a layer: they free nothing, and "
        "buildah cannot see what builds on them",
        verdict.layerless));
  }
  if (verdict.young > 0) {
    result.lines.push_back(fmt::format(
        "[disk-store] buildah: kept {} dangling image(s) younger than {} s: a running build may "
        "be about to start its next step from them",
        verdict.young, m_options.min_dangling_age.count()));
  }
  if (verdict.unreadable > 0) {
    result.lines.push_back(fmt::format(
        "[disk-store] WARN buildah: kept {} dangling image(s) whose history could not be read: {}",
        verdict.unreadable, join(verdict.errors, "; ")));
  }

  BuildahRemoval removal;
  for (size_t first = 0; first < verdict.stale.size(); first += k_ids_per_removal) {
    std::vector<std::string> argv = command({"rmi", "--"});
    size_t last = std::min(verdict.stale.size(), first + k_ids_per_removal);
    argv.insert(argv.end(), verdict.stale.begin() + static_cast<std::ptrdiff_t>(first),
                verdict.stale.begin() + static_cast<std::ptrdiff_t>(last));
    note(argv);
    CapturedRun removed = run_captured(argv, k_command_timeout);
    if (!removed.exit.spawn_error.empty() || removed.exit.timed_out) {
      removal.errors.push_back(removed.failure());
      continue;
    }
    read_buildah_removal(removed.output, removal);
  }
  if (!removal.removed.empty()) {
    result.lines.push_back(
        fmt::format("[disk-store] buildah: removed {} image(s) (the dangling ones and the "
                    "parents only they used): {}",
                    removal.removed.size(), named_ids(removal.removed, removal.removed.size())));
  }
  std::vector<std::string> lost;
  for (const std::string& id : removal.removed) {
    if (verdict.kept.contains(id)) {
      lost.push_back(id);
    }
  }
  if (!lost.empty()) {
    // buildah removes a parent it finds dangling; one it misjudged is lost cache.
    result.lines.push_back(
        fmt::format("[disk-store] WARN buildah also removed {} image(s) kiln meant to keep: {}",
                    lost.size(), named_ids(lost, lost.size())));
  }
  if (removal.in_use > 0) {
    result.lines.push_back(fmt::format(
        "[disk-store] buildah: kept {} dangling image(s) a container uses", removal.in_use));
  }
  for (const std::string& error : removal.errors) {
    result.lines.push_back(
        fmt::format("[disk-store] WARN buildah image removal failed: {}", error));
  }
  result.removed_any = !removal.removed.empty();
  int kept = static_cast<int>(verdict.kept.size()) + removal.in_use;
  result.summary =
      result.removed_any ? fmt::format("removed {} image(s) ({})", removal.removed.size(),
                                       named_ids(removal.removed, k_ids_named))
      : kept == 0        ? std::string("removed nothing (no dangling image)")
                         : fmt::format("removed nothing (kept {} dangling image(s) a build can "
                                              "reuse, without a layer, recent or in use)",
                                       kept);

  CacheDirCount after = count_cache_dirs(cache_dirs);
  result.cache_mounts_after = after.mounts;
  if (after.mounts < before.mounts) {
    result.lines.push_back(fmt::format(
        "[disk-store] WARN cache-mount records dropped {} -> {}: compile caches are gone",
        before.mounts, after.mounts));
  } else {
    result.lines.push_back(
        fmt::format("[disk-store] all {} cache-mount record(s) survived ({} file(s) under {})",
                    before.mounts, after.files, shown_dirs(cache_dirs)));
  }
  if (after.files < before.files) {
    // Not proof of a fault: a compile cache evicts its own files, and a build may run meanwhile.
    result.lines.push_back(fmt::format(
        "[disk-store] WARN cache-mount files dropped {} -> {} under {} (a build running meanwhile "
        "may have evicted them itself)",
        before.files, after.files, shown_dirs(cache_dirs)));
  }
  return result;
}

std::vector<std::string> BuildahStore::stale_images() const {
  auto listing = list();
  if (!listing) {
    return {};
  }
  return stale(*listing).stale;
}

std::vector<std::string> BuildahStore::tagged_images() const {
  CapturedRun listed =
      run_captured(command({"images", "--all", "--json", "--no-trunc"}), k_command_timeout);
  if (!listed.exit.ok()) {
    return {};
  }
  auto images = parse_buildah_images(listed.output);
  if (!images) {
    return {};
  }
  std::vector<std::string> tags;
  for (const BuildahImage& image : *images) {
    for (const std::string& name : image.names) {
      if (name.find("<none>") == std::string::npos) {
        tags.push_back(name);
      }
    }
  }
  return tags;
}

tl::expected<void, std::string> BuildahStore::remove_image(const std::string& reference) const {
  auto own = steps(reference, std::nullopt);
  if (!own) {
    return tl::unexpected(own.error());
  }
  if (own->diff_ids.empty()) {
    return tl::unexpected(std::string("it holds no layer: removing it frees nothing, and buildah "
                                      "would take the layerless images it builds on along"));
  }
  // Without force: removing an image a container uses fails instead of taking it away.
  std::vector<std::string> argv = command({"rmi", "--", reference});
  CapturedRun removed = run_captured(argv, k_command_timeout);
  if (!removed.exit.ok()) {
    return tl::unexpected(removed.failure());
  }
  return {};
}

} // namespace kiln
