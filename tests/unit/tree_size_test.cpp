#include "disk/tree_size.h"

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

uint64_t allocated(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

TEST(TreeSize, EachFileCountsOnceAndSymlinksAreNotFollowed) {
  TempDir dir;
  fs::path root = dir.path() / "tree";
  fs::path big = dir.write("tree/a/big", std::string(10000, 'x'));
  fs::path small = dir.write("tree/a/b/small", "hi");
  fs::create_hard_link(big, root / "a" / "b" / "again");
  dir.write("outside/huge", std::string(50000, 'y'));
  fs::create_directory_symlink(dir.path() / "outside", root / "link");

  TreeSize size = tree_size(root);
  EXPECT_EQ(size.bytes, 10002u) << "the hard link is the same file; the symlink's target is not "
                                   "in the tree";
  uint64_t expected = allocated(root) + allocated(root / "a") + allocated(root / "a" / "b") +
                      allocated(big) + allocated(small) + allocated(root / "link");
  EXPECT_EQ(size.allocated, expected) << "as du counts it";

  EXPECT_EQ(tree_size(dir.path() / "missing").bytes, 0u);
  EXPECT_EQ(tree_size(big).bytes, 0u) << "a file is no tree";
}

} // namespace
} // namespace kiln
