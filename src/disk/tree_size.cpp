#include "disk/tree_size.h"

#include <set>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>

namespace kiln {

namespace {

class TreeWalk {
public:
  explicit TreeWalk(dev_t device) : m_device(device) {}

  void walk(int fd) {
    for_each_entry(fd, [&](const char* name, unsigned char /*type*/) {
      struct stat st {};
      if (::fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != m_device) {
        return;
      }
      if (S_ISDIR(st.st_mode)) {
        m_size.allocated += static_cast<uint64_t>(st.st_blocks) * 512;
        int child = ::openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (child >= 0) {
          walk(child);
        }
        return;
      }
      if (st.st_nlink > 1 && !m_linked.insert({st.st_dev, st.st_ino}).second) {
        return; // another name of a file already counted
      }
      m_size.allocated += static_cast<uint64_t>(st.st_blocks) * 512;
      if (S_ISREG(st.st_mode)) {
        m_size.bytes += static_cast<uint64_t>(st.st_size);
      }
    });
    ::close(fd);
  }

  TreeSize size() const { return m_size; }

private:
  dev_t m_device;
  std::set<std::pair<dev_t, ino_t>> m_linked;
  TreeSize m_size;
};

} // namespace

TreeSize tree_size(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return {};
  }
  TreeWalk walk(st.st_dev);
  walk.walk(fd);
  TreeSize size = walk.size();
  size.allocated += static_cast<uint64_t>(st.st_blocks) * 512; // the root folder, as du counts it
  return size;
}

TreeSize tree_size(const std::filesystem::path& root) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return fd < 0 ? TreeSize{} : tree_size(fd);
}

} // namespace kiln
