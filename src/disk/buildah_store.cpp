#include "disk/buildah_store.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "disk/buildkit_store.h"
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

bool is_image_id(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
         });
}

std::string bare_id(std::string_view id) {
  if (id.starts_with("sha256:")) {
    id.remove_prefix(7);
  }
  return std::string(id);
}

/// The bare ids `buildah images --filter dangling=true --quiet --no-trunc` prints.
std::set<std::string> parse_id_lines(std::string_view text) {
  std::set<std::string> ids;
  for (const std::string& line : split(text, '\n')) {
    std::string id = bare_id(trim(line));
    if (is_image_id(id)) {
      ids.insert(id);
    }
  }
  return ids;
}

std::string format_size(uint64_t bytes) {
  static constexpr const char* k_units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1000 && unit + 1 < std::size(k_units)) {
    value /= 1000;
    ++unit;
  }
  return unit == 0 ? fmt::format("{}B", bytes) : fmt::format("{:.2f}{}", value, k_units[unit]);
}

std::string shown_dirs(const std::vector<fs::path>& dirs) {
  std::vector<std::string> shown;
  for (const fs::path& dir : dirs) {
    shown.push_back(dir.string());
  }
  return join(shown, " and ");
}

/// What one removal command said: the ids it removed (a dangling image's parents that nothing
/// else uses go with it) and the errors it printed, those about an image in use set apart.
struct Removal {
  std::vector<std::string> removed;
  int in_use = 0;
  std::vector<std::string> errors;
};

/// buildah prints each removed id on a line of its own, `untagged: <name>` for names, and on
/// failure `Error: <n> errors occurred:` followed by one `\t* <error>` line per image.
void read_removal(std::string_view output, Removal& removal) {
  for (const std::string& raw : split(output, '\n')) {
    std::string_view line = trim(raw);
    if (is_image_id(line)) {
      removal.removed.emplace_back(line);
      continue;
    }
    std::string_view error;
    if (line.starts_with("* ")) {
      error = line.substr(2);
    } else if (line.starts_with("Error: ") && !line.ends_with("occurred:")) {
      error = line.substr(7);
    } else {
      continue;
    }
    // Expected, not a fault: a build's working container uses it (storage.ErrImageUsedByContainer).
    if (error.find("in use by a container") != std::string_view::npos) {
      ++removal.in_use;
    } else {
      removal.errors.emplace_back(error);
    }
  }
}

} // namespace

tl::expected<std::vector<BuildahImage>, std::string> parse_buildah_images(std::string_view text) {
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_array()) {
    return tl::unexpected(std::string("buildah images --json printed no JSON list"));
  }
  std::vector<BuildahImage> images;
  for (const auto& entry : doc) {
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_string()) {
      return tl::unexpected(std::string("buildah images --json: an entry without an id"));
    }
    BuildahImage image;
    image.id = bare_id(entry["id"].get<std::string>());
    if (auto names = entry.find("names"); names != entry.end() && names->is_array()) {
      for (const auto& name : *names) {
        if (name.is_string()) {
          image.names.push_back(name.get<std::string>());
        }
      }
    }
    if (auto size = entry.find("size"); size != entry.end() && size->is_string()) {
      // "2.13 MB": buildah's own formattedSize, %.3g and B KB MB GB TB by 1000s.
      image.bytes = parse_human_size(size->get<std::string>());
    }
    if (auto created = entry.find("created"); created != entry.end() && created->is_number()) {
      image.created = created->get<int64_t>();
    }
    if (auto read_only = entry.find("readonly");
        read_only != entry.end() && read_only->is_boolean()) {
      image.read_only = read_only->get<bool>();
    }
    images.push_back(std::move(image));
  }
  return images;
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

tl::expected<StoreUsage, std::string> BuildahStore::usage() const {
  CapturedRun listed =
      run_captured(command({"images", "--all", "--json", "--no-trunc"}), k_command_timeout);
  if (!listed.exit.ok()) {
    return tl::unexpected(fmt::format("buildah images failed: {}", listed.failure()));
  }
  auto images = parse_buildah_images(listed.output);
  if (!images) {
    return tl::unexpected(images.error());
  }
  CapturedRun dangling = run_captured(
      command({"images", "--filter", "dangling=true", "--quiet", "--no-trunc"}), k_command_timeout);
  if (!dangling.exit.ok()) {
    return tl::unexpected(fmt::format("buildah images failed: {}", dangling.failure()));
  }
  std::set<std::string> dangling_ids = parse_id_lines(dangling.output);

  StoreUsage usage;
  for (const BuildahImage& image : *images) {
    std::string type = !image.names.empty()              ? "image"
                       : dangling_ids.contains(image.id) ? "dangling"
                                                         : "intermediate";
    usage.bytes_by_type[type] += image.bytes;
    usage.records_by_type[type] += 1;
    usage.total_bytes += image.bytes;
    if (type == "dangling") {
      usage.reclaimable_bytes += image.bytes;
    }
  }
  CacheDirCount cache = count_cache_dirs(buildah_cache_dirs());
  usage.bytes_by_type["cache-mount"] += cache.bytes;
  usage.records_by_type["cache-mount"] += cache.mounts;
  usage.total_bytes += cache.bytes;
  return usage;
}

LayerPrune BuildahStore::prune_layers(double keep_gb) const {
  LayerPrune result;
  auto step = [&](const std::vector<std::string>& argv) {
    result.commands.push_back(join(argv, " "));
    return run_captured(argv, k_command_timeout);
  };
  auto skip = [&](std::string why) {
    result.lines.push_back(fmt::format("[disk-store] WARN buildah layer prune skipped: {}", why));
    result.skipped = std::move(why);
    return result;
  };

  std::vector<fs::path> cache_dirs = buildah_cache_dirs();
  CacheDirCount before = count_cache_dirs(cache_dirs);

  CapturedRun listed = step(command({"images", "--all", "--json", "--no-trunc"}));
  if (!listed.exit.ok()) {
    return skip(fmt::format("buildah images failed: {}", listed.failure()));
  }
  auto images = parse_buildah_images(listed.output);
  if (!images) {
    return skip(images.error());
  }
  CapturedRun dangling =
      step(command({"images", "--filter", "dangling=true", "--quiet", "--no-trunc"}));
  if (!dangling.exit.ok()) {
    return skip(fmt::format("buildah images failed: {}", dangling.failure()));
  }
  std::set<std::string> dangling_ids = parse_id_lines(dangling.output);
  result.ran = true;
  result.cache_mounts_before = before.mounts;

  auto now = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  std::vector<std::string> doomed;
  uint64_t doomed_bytes = 0;
  int young = 0;
  for (const BuildahImage& image : *images) {
    if (!image.names.empty() || image.read_only || !dangling_ids.contains(image.id)) {
      continue;
    }
    if (now - image.created < m_options.min_dangling_age.count()) {
      ++young;
      continue;
    }
    doomed.push_back(image.id);
    doomed_bytes += image.bytes;
  }
  result.lines.push_back(fmt::format(
      "[disk-store] buildah: removing {} dangling image(s) ({} as listed); keep {:g} GB does not "
      "apply: buildah has no size-bounded prune, and its layer cache (intermediate images) stays",
      doomed.size(), format_size(doomed_bytes), keep_gb));
  if (young > 0) {
    result.lines.push_back(fmt::format(
        "[disk-store] buildah: kept {} dangling image(s) younger than {} s: a running build may "
        "be about to start its next step from them",
        young, m_options.min_dangling_age.count()));
  }

  Removal removal;
  for (size_t first = 0; first < doomed.size(); first += k_ids_per_removal) {
    std::vector<std::string> argv = command({"rmi"});
    size_t last = std::min(doomed.size(), first + k_ids_per_removal);
    argv.insert(argv.end(), doomed.begin() + static_cast<std::ptrdiff_t>(first),
                doomed.begin() + static_cast<std::ptrdiff_t>(last));
    CapturedRun removed = step(argv);
    if (!removed.exit.spawn_error.empty() || removed.exit.timed_out) {
      removal.errors.push_back(removed.failure());
      continue;
    }
    read_removal(removed.output, removal);
  }
  if (!doomed.empty()) {
    result.lines.push_back(fmt::format(
        "[disk-store] buildah: removed {} image(s) (dangling ones and the parents only they used)",
        removal.removed.size()));
  }
  if (removal.in_use > 0) {
    result.lines.push_back(fmt::format(
        "[disk-store] buildah: kept {} dangling image(s) a container uses", removal.in_use));
  }
  for (const std::string& error : removal.errors) {
    result.lines.push_back(
        fmt::format("[disk-store] WARN buildah image removal failed: {}", error));
  }

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

std::vector<std::string> BuildahStore::dangling_images() const {
  CapturedRun listed = run_captured(
      command({"images", "--filter", "dangling=true", "--quiet", "--no-trunc"}), k_command_timeout);
  if (!listed.exit.ok()) {
    return {};
  }
  std::set<std::string> ids = parse_id_lines(listed.output);
  return {ids.begin(), ids.end()};
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

bool BuildahStore::remove_image(const std::string& reference) const {
  // Without force: removing an image a container uses fails instead of taking it away.
  std::vector<std::string> argv = command({"rmi"});
  argv.push_back(reference);
  return run_captured(argv, k_command_timeout).exit.ok();
}

} // namespace kiln
