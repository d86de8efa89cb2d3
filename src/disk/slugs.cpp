#include "disk/slugs.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "disk/tree_size.h"
#include "util/fs.h"
#include "util/time.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

fs::file_time_type file_time(const struct timespec& t) {
  auto since_epoch = std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
  return std::chrono::file_clock::from_sys(std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(since_epoch)));
}

std::string age_text(fs::file_time_type mtime) {
  auto age = fs::file_time_type::clock::now() - mtime;
  double seconds = std::chrono::duration<double>(age).count();
  return human_duration(std::max(seconds, 0.0));
}

std::string free_now_text(const fs::path& measure_path) {
  auto free = free_bytes(measure_path);
  if (!free) {
    return fmt::format("free space unknown now ({})", free.error());
  }
  return fmt::format("{}G free now", gib_text(*free));
}

} // namespace

std::string gib_text(double gib, bool round_up) {
  if (!(gib > 0)) {
    return "0";
  }
  // Below 1 G, three significant digits: a lever that freed 200 MB must not read as 0. Below
  // 100 KiB the digits say nothing a reader needs (0.000000978G): it reads as under 0.0001.
  if (gib < 0.0001) {
    return round_up ? "0.0001" : "<0.0001";
  }
  int decimals = gib >= 100  ? 0
                 : gib >= 10 ? 1
                 : gib >= 1
                     ? 2
                     : std::min(6, std::max(3, 2 - static_cast<int>(std::floor(std::log10(gib)))));
  if (round_up) {
    double scale = std::pow(10.0, decimals);
    return gib_text(std::ceil(gib * scale - 1e-9) / scale, false);
  }
  return fmt::format("{:.{}f}", gib, decimals);
}

std::string gib_text(uint64_t bytes, bool round_up) {
  return gib_text(static_cast<double>(bytes) / static_cast<double>(k_gib), round_up);
}

bool same_filesystem(const fs::path& a, const fs::path& b) {
  auto da = filesystem_device(a);
  auto db = filesystem_device(b);
  return da && db && *da == *db;
}

std::vector<Slug> list_slugs(const fs::path& root) {
  std::vector<Slug> slugs;
  int root_fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    return slugs;
  }
  for_each_entry(root_fd, [&](const char* name, unsigned char type) {
    if (type != DT_DIR && type != DT_UNKNOWN) {
      return; // files and symlinks (to folders too) are not slugs
    }
    // O_NOFOLLOW: a symlink is never opened as a slug, whatever getdents reported.
    int fd = ::openat(root_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      return; // gone meanwhile, or not a folder
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return;
    }
    Slug slug;
    slug.name = name;
    slug.path = root / slug.name;
    slug.mtime = file_time(st.st_mtim);
    slug.bytes = tree_size(fd).bytes;
    slugs.push_back(std::move(slug));
  });
  ::close(root_fd);
  std::sort(slugs.begin(), slugs.end(), [](const Slug& a, const Slug& b) {
    return a.mtime != b.mtime ? a.mtime < b.mtime : a.name < b.name;
  });
  return slugs;
}

TrimResult trim_slugs(const fs::path& root, uint64_t deficit_bytes, size_t keep_newest,
                      const std::vector<std::string>& protected_names,
                      const fs::path& measure_path) {
  TrimResult result;
  auto finish = [&]() {
    result.lines.push_back(fmt::format("[disk-trim] removed {} slug(s), freed {} GiB; {}",
                                       result.removed, gib_text(result.freed_bytes),
                                       free_now_text(measure_path)));
    return result;
  };
  if (deficit_bytes == 0) {
    return finish();
  }
  // A cache root of `/` (an empty setting resolved against nothing) would list the system.
  if (root.empty() || root == root.root_path()) {
    result.lines.push_back(fmt::format(
        "[disk-trim] skipped: '{}' is not a cache root kiln would trim", root.string()));
    return finish();
  }
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    return finish();
  }
  if (!same_filesystem(root, measure_path)) {
    result.lines.push_back(fmt::format("[disk-trim] skipped: {} is on another filesystem than {}, "
                                       "so removing cache exports there frees nothing here",
                                       root.string(), measure_path.string()));
    return finish();
  }

  std::vector<Slug> slugs = list_slugs(root);
  result.listed = slugs.size();
  size_t candidates = slugs.size() > keep_newest ? slugs.size() - keep_newest : 0;
  uint64_t nominal = 0;
  for (size_t i = 0; i < candidates; ++i) {
    const Slug& slug = slugs[i];
    if (std::find(protected_names.begin(), protected_names.end(), slug.name) !=
        protected_names.end()) {
      continue;
    }
    auto before = free_bytes(measure_path);
    std::error_code remove_error;
    fs::remove_all(slug.path, remove_error);
    auto after = free_bytes(measure_path);
    if (before && after) {
      // A partial removal still freed what it freed.
      result.freed_bytes += *after > *before ? *after - *before : 0;
    } else if (!remove_error) {
      result.freed_bytes += slug.bytes;
    }
    if (remove_error) {
      result.lines.push_back(fmt::format("[disk-trim] cannot remove {}: {}; skipped", slug.name,
                                         remove_error.message()));
      continue;
    }
    ++result.removed;
    result.names.push_back(slug.name);
    nominal += slug.bytes;
    result.lines.push_back(fmt::format("[disk-trim] removed {} ({} GiB, {} old)", slug.name,
                                       gib_text(slug.bytes), age_text(slug.mtime)));
    if (result.freed_bytes >= deficit_bytes) {
      break;
    }
    if (nominal >= deficit_bytes) {
      result.lines.push_back(fmt::format(
          "[disk-trim] stopped: the removed slugs held {} GiB, the deficit, but free space rose "
          "by only {} GiB (something else is writing to the disk, or it frees blocks late)",
          gib_text(nominal), gib_text(result.freed_bytes)));
      break;
    }
  }
  return finish();
}

} // namespace kiln
