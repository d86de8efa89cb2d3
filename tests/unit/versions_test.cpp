#include "chain/versions.h"

#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path k_chains = fs::path(KILN_TEST_FIXTURES) / "chains";

TEST(LoadVersions, ParsesEveryForm) {
  auto versions = load_versions(k_chains / "versions" / "good.env");
  ASSERT_TRUE(versions);
  EXPECT_EQ(*versions, (KeyValues{
                           {"PLAIN", "1.2.3"},
                           {"EXPORTED", "yes"},
                           {"SPACED", "value"},
                           {"DOUBLE", "with spaces"},
                           {"SINGLE", "single"},
                           {"MISMATCHED", "\"half'"},
                           {"URL", "https://example.com/?a=b&c=d"},
                           {"EMPTY", ""},
                           {"QUOTED_EMPTY", ""},
                           {"INNER", "a\"b"},
                           {"DOLLAR", "$HOME"},
                           {"TABBED", "tab"},
                           {"export", "not a prefix"},
                       }));
}

TEST(LoadVersions, ToleratesCrlfLineEnds) {
  fs::path file = fs::temp_directory_path() / "kiln-versions-crlf.env";
  std::ofstream(file) << "A=1\r\nB=\"two\"\r\n";
  auto versions = load_versions(file);
  fs::remove(file);
  ASSERT_TRUE(versions);
  EXPECT_EQ(*versions, (KeyValues{{"A", "1"}, {"B", "two"}}));
}

TEST(LoadVersions, ReportsEveryBadLine) {
  fs::path file = k_chains / "versions_errors" / "bad.env";
  auto versions = load_versions(file);
  ASSERT_FALSE(versions);
  const Diagnostics& errors = versions.error();
  ASSERT_EQ(errors.size(), 4u);
  for (const auto& error : errors) {
    EXPECT_EQ(error.pos.file, file.string());
  }

  EXPECT_EQ(errors[0].pos.line, 3);
  EXPECT_EQ(errors[0].pos.column, 10);
  EXPECT_EQ(errors[0].message, "'BAD-KEY' is not a valid variable name");
  EXPECT_EQ(errors[0].hint, "use letters, digits and '_', not starting with a digit");

  EXPECT_EQ(errors[1].pos.line, 4);
  EXPECT_EQ(errors[1].pos.column, 1);
  EXPECT_EQ(errors[1].message, "expected KEY=VALUE but the line has no '='");

  EXPECT_EQ(errors[2].pos.line, 5);
  EXPECT_EQ(errors[2].pos.column, 1);
  EXPECT_EQ(errors[2].message, "duplicate key 'GOOD' in versions file");
  EXPECT_EQ(errors[2].hint, "'GOOD' is first set on line 2; keep one of them");

  EXPECT_EQ(errors[3].pos.line, 6);
  EXPECT_EQ(errors[3].pos.column, 1);
  EXPECT_EQ(errors[3].message, "'1X' is not a valid variable name");
}

// A versions file is named by the user: a FIFO once blocked the load in open() for ever, and a
// link to /dev/zero was read until memory ran out.
TEST(LoadVersions, RefusesWhatIsNotARegularFile) {
  fs::path fifo = fs::temp_directory_path() / ("kiln-versions-fifo-" + std::to_string(::getpid()));
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto from_fifo = load_versions(fifo); // no writer ever comes
  fs::remove(fifo);
  ASSERT_FALSE(from_fifo);
  EXPECT_EQ(from_fifo.error()[0].message, "cannot read versions file: not a regular file");

  auto from_device = load_versions("/dev/zero");
  ASSERT_FALSE(from_device);
  EXPECT_EQ(from_device.error()[0].message, "cannot read versions file: not a regular file");
}

TEST(LoadVersions, RefusesAFileLargerThanAnyVersionsFile) {
  fs::path file = fs::temp_directory_path() / ("kiln-versions-big-" + std::to_string(::getpid()));
  std::ofstream(file) << "A=1\n";
  fs::resize_file(file, k_chain_file_limit + 1);
  auto versions = load_versions(file);
  fs::remove(file);
  ASSERT_FALSE(versions);
  EXPECT_EQ(versions.error()[0].message,
            "cannot read versions file: 16777217 bytes, more than the 16777216 allowed");
}

TEST(LoadVersions, MissingFile) {
  fs::path file = k_chains / "versions" / "absent.env";
  auto versions = load_versions(file);
  ASSERT_FALSE(versions);
  ASSERT_EQ(versions.error().size(), 1u);
  EXPECT_EQ(versions.error()[0].pos.file, file.string());
  EXPECT_EQ(versions.error()[0].pos.line, 0);
  EXPECT_EQ(versions.error()[0].message, "cannot read versions file: No such file or directory");
}

} // namespace
} // namespace kiln
