// The copy of kiln-cc that every stage is offered as the build context `kiln-tools`.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "driver/kiln_tools.h"
#include "util/fs.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

class KilnTools : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "kiln-tools-test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    m_dir = pattern;
    fs::create_directories(m_dir / "bin");
    write(source(), "#!/bin/sh\necho one\n");
    fs::permissions(source(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  fs::path source() const { return m_dir / "bin" / "kiln-cc"; }
  fs::path tools() const { return m_dir / "records" / "tools"; }
  fs::path copy() const { return tools() / "kiln-cc"; }
  static void write(const fs::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  }
  static std::string read(const fs::path& path) { return read_file(path).value_or("<unreadable>"); }
  static ino_t inode(const fs::path& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  }

  fs::path m_dir;
};

TEST_F(KilnTools, CopiesTheProgramExecutable) {
  ASSERT_TRUE(install_tool(source(), tools()).has_value());
  EXPECT_EQ(read(copy()), read(source()));
  EXPECT_NE(fs::status(copy()).permissions() & fs::perms::others_exec, fs::perms::none);
}

TEST_F(KilnTools, AnUnchangedProgramIsNotCopiedAgainWhateverItsTime) {
  // A rebuild that links the same bytes (a relink, a ccache hit) must not touch the copy: every
  // stage's build context would change for nothing.
  ASSERT_TRUE(install_tool(source(), tools()).has_value());
  ino_t first = inode(copy());
  auto time = fs::last_write_time(copy());
  write(source(), read(source()));
  fs::last_write_time(source(), time + std::chrono::hours(1));
  ASSERT_TRUE(install_tool(source(), tools()).has_value());
  EXPECT_EQ(inode(copy()), first) << "copied again";
  EXPECT_EQ(fs::last_write_time(copy()), time);
}

TEST_F(KilnTools, AChangedProgramIsCopiedEvenWithTheSameSizeAndTime) {
  ASSERT_TRUE(install_tool(source(), tools()).has_value());
  auto time = fs::last_write_time(source());
  write(source(), "#!/bin/sh\necho two\n"); // the same size
  fs::last_write_time(source(), time);
  ASSERT_TRUE(install_tool(source(), tools()).has_value());
  EXPECT_EQ(read(copy()), "#!/bin/sh\necho two\n");
}

TEST_F(KilnTools, ACopyDamagedInPlaceIsReplaced) {
  ASSERT_TRUE(install_tool(source(), tools()).has_value());
  auto time = fs::last_write_time(copy());
  write(copy(), "#!/bin/sh\necho bad\n");
  fs::last_write_time(copy(), time);
  ASSERT_TRUE(install_tool(source(), tools()).has_value());
  EXPECT_EQ(read(copy()), read(source()));
}

TEST_F(KilnTools, AMissingSourceIsAnErrorNamingIt) {
  fs::remove(source());
  auto installed = install_tool(source(), tools());
  ASSERT_FALSE(installed.has_value());
  EXPECT_NE(installed.error().find(source().string()), std::string::npos) << installed.error();
}

} // namespace
} // namespace kiln
