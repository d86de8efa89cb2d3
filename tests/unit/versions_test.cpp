#include "chain/versions.h"

#include <filesystem>
#include <fstream>

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
