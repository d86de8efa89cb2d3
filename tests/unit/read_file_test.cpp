#include "util/fs.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

// One open, fstat and read: the bytes must come back whole (a NUL, a CRLF, no trailing newline,
// more than one page), and a directory or a missing file must fail with its path.
TEST(ReadFile, WholeFileDirectoryAndMissing) {
  auto dir = fs::temp_directory_path() / fmt::format("kiln-read-{}", ::getpid());
  fs::create_directories(dir);
  std::string bytes = "FROM alpine\r\nRUN echo \0x\n"s + std::string(70000, 'a');
  {
    std::ofstream out(dir / "Dockerfile", std::ios::binary);
    out << bytes;
  }
  auto text = read_file(dir / "Dockerfile");
  ASSERT_TRUE(text) << text.error();
  EXPECT_EQ(*text, bytes);
  auto as_dir = read_file(dir);
  ASSERT_FALSE(as_dir);
  EXPECT_EQ(as_dir.error(), "cannot read " + dir.string() + ": it is a directory");
  auto missing = read_file(dir / "missing");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(),
            "cannot read " + (dir / "missing").string() + ": No such file or directory");
  fs::remove_all(dir);
}

// /proc files report a size of 0: the read goes on to end of file whatever fstat said.
TEST(ReadFile, FileThatReportsNoSizeIsReadToItsEnd) {
  auto status = read_file("/proc/self/status");
  ASSERT_TRUE(status) << status.error();
  EXPECT_TRUE(status->starts_with("Name:")) << *status;
  EXPECT_NE(status->find("\nPid:"), std::string::npos);
}

// A reused buffer is replaced, never appended to.
TEST(ReadFile, IntoReplacesWhatTheBufferHeld) {
  auto file = fs::temp_directory_path() / fmt::format("kiln-read-into-{}", ::getpid());
  {
    std::ofstream out(file, std::ios::binary);
    out << "short";
  }
  std::string buffer(10000, 'x');
  ASSERT_TRUE(read_file_into(file, buffer));
  EXPECT_EQ(buffer, "short");
  EXPECT_FALSE(read_file_into(file.string() + ".missing", buffer));
  EXPECT_EQ(buffer, "");
  fs::remove(file);
}

// Compared a chunk at a time: a difference in the last byte of a file of several chunks counts,
// and so does one byte more; what cannot be read is never the same.
TEST(SameBytes, EveryByteAndTheSizeCount) {
  auto dir = fs::temp_directory_path() / fmt::format("kiln-same-{}", ::getpid());
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary | std::ios::trunc) << bytes;
    return dir / name;
  };
  std::string bytes(200000, 'x');
  bytes[7] = '\0';
  fs::path a = write("a", bytes);
  EXPECT_TRUE(same_bytes(a, write("b", bytes)));
  EXPECT_FALSE(same_bytes(a, write("last", bytes.substr(0, bytes.size() - 1) + "y")));
  EXPECT_FALSE(same_bytes(a, write("longer", bytes + "x")));
  EXPECT_FALSE(same_bytes(a, dir / "missing"));
  EXPECT_FALSE(same_bytes(dir, dir));
  EXPECT_TRUE(same_bytes(write("empty", ""), write("empty2", "")));
  fs::remove_all(dir);
}

} // namespace
} // namespace kiln
