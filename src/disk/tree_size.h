#pragma once

#include <cstdint>
#include <filesystem>

#include <dirent.h>
#include <unistd.h>

namespace kiln {

/// Calls `visit(name, d_type)` for each entry of the open directory `fd` but `.` and `..`.
/// getdents64 straight into a buffer: opendir's DIR costs an extra fcntl per folder, a tenth of
/// the syscalls of a tree walk.
template <typename Visit> void for_each_entry(int fd, Visit visit) {
  alignas(struct dirent64) char buffer[32 * 1024];
  for (;;) {
    ssize_t n = ::getdents64(fd, buffer, sizeof buffer);
    if (n <= 0) {
      return;
    }
    for (ssize_t offset = 0; offset < n;) {
      const auto* entry = reinterpret_cast<const struct dirent64*>(buffer + offset);
      offset += entry->d_reclen;
      const char* name = entry->d_name;
      if (!(name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0)))) {
        visit(name, entry->d_type);
      }
    }
  }
}

/// What the regular files of a tree take, each file once however many hard links it has, on
/// the tree's own filesystem only (what is mounted below it, such as a container's merged
/// overlay, is another filesystem's data): `bytes` as their sizes add up, `allocated` as
/// `du -x` counts it (blocks in use, folders included). Symlinks are not followed.
struct TreeSize {
  uint64_t bytes = 0;
  uint64_t allocated = 0;
};

/// The size of the tree below the open directory `fd`, which it closes. A file costs one
/// fstatat and a folder one open, every lookup relative to an open folder: 10,000 cache
/// exports take well under a second (std::filesystem, resolving each full path again, took 1.7
/// times as long). What cannot be read counts as empty.
TreeSize tree_size(int fd);
TreeSize tree_size(const std::filesystem::path& root);

} // namespace kiln
