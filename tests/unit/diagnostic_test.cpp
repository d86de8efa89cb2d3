// util/diagnostic: what a diagnostic shows of the line it points into.
#include "util/diagnostic.h"

#include <gtest/gtest.h>

#include "chain/chain_loader.h"
#include "temp_dir.h"

namespace kiln {
namespace {

TEST(Excerpt, AShortLineIsShownWholeWithTheCaretUnderTheColumn) {
  EXPECT_EQ(excerpt("name = 3", 8), "  name = 3\n         ^\n");
  EXPECT_EQ(excerpt("\tname = 3", 9), "  \tname = 3\n  \t       ^\n");
}

TEST(Excerpt, AHugeLineIsClippedAroundTheCaret) {
  std::string line = std::string(5'000'000, 'a') + "!" + std::string(5'000'000, 'b');
  std::string shown = excerpt(line, 5'000'001);
  std::string text = shown.substr(0, shown.find('\n'));
  std::string caret = shown.substr(shown.find('\n') + 1);
  EXPECT_LE(text.size(), 2 + 3 + k_excerpt_columns + 3);
  EXPECT_EQ(text.substr(0, 5), "  ...");
  EXPECT_EQ(text.substr(text.size() - 3), "...");
  // The caret is under the '!'.
  EXPECT_EQ(text[caret.find('^')], '!');
}

TEST(Excerpt, ControlBytesAndInvalidUtf8AreEscapedAndTheCaretStaysOnItsByte) {
  // An escape sequence would act on the terminal; a NUL would end a C string early.
  std::string line = std::string("a\x1b[2Jb") + '\0' + "c\x81" + "d";
  std::string shown = excerpt(line, 9); // the \x81
  EXPECT_EQ(shown.substr(0, shown.find('\n')), "  a\\x1B[2Jb\\x00c\\x81d");
  std::string caret = shown.substr(shown.find('\n') + 1);
  EXPECT_EQ(caret.find('^'), std::string("  a\\x1B[2Jb\\x00c").size());
}

TEST(Excerpt, UnicodeIsKeptAndCountsOneColumn) {
  EXPECT_EQ(excerpt("név = 1", 6), "  név = 1\n      ^\n");
}

TEST(Printable, KeepsNewlinesAndEscapesTheRest) {
  EXPECT_EQ(printable("one\ntwo\x07"), "one\ntwo\\x07");
}

TEST(FormatDiagnostic, AChainFileWithA10MbLineShowsAClippedExcerpt) {
  testing::TempDir dir;
  dir.write("chain.toml", "[chain]\nname = \"" + std::string(10'000'000, 'x') + "\n");
  auto chain = load_chain(dir.path() / "chain.toml");
  ASSERT_FALSE(chain);
  std::string shown = format_diagnostic(chain.error()[0]);
  EXPECT_LT(shown.size(), 1000u) << shown.substr(0, 300);
  EXPECT_NE(shown.find("..."), std::string::npos);
}

TEST(FormatDiagnostic, TheCaretOfInvalidUtf8IsUnderTheByte) {
  testing::TempDir dir;
  dir.write("chain.toml", "[chain]\nname = \"ab\x81"
                          "cd\"\n");
  auto chain = load_chain(dir.path() / "chain.toml");
  ASSERT_FALSE(chain);
  const Diagnostic& d = chain.error()[0];
  EXPECT_EQ(d.pos.line, 2);
  EXPECT_EQ(d.pos.column, 11); // the \x81, not the 'b' before it
  std::string shown = format_diagnostic(d);
  EXPECT_NE(shown.find("  name = \"ab\\x81cd\"\n            ^\n"), std::string::npos) << shown;
  EXPECT_EQ(shown.find('\x81'), std::string::npos) << "the raw byte is not echoed";
}

/// A chain file whose one [[transient]] class has `pattern`.
std::string chain_with_pattern(const std::string& pattern) {
  return "[chain]\nname = \"t\"\n[[transient]]\nname = \"big\"\npatterns = ['" + pattern +
         "']\n[[stage]]\nname = \"a\"\ndockerfile = \"Dockerfile\"\n";
}

TEST(LoadPatterns, AHundredThousandCharacterPatternLoadsAndATooLargeOneIsALoadError) {
  // std::regex crashed compiling either; RE2 compiles what fits its memory bound and says so
  // of what does not, at the pattern's line.
  testing::TempDir dir;
  dir.write("Dockerfile", "FROM scratch\n");
  dir.write("chain.toml", chain_with_pattern(std::string(99'990, 'x') + "(y|z)+$"));
  auto loaded = load_chain(dir.path() / "chain.toml");
  ASSERT_TRUE(loaded) << loaded.error()[0].message.substr(0, 300);
  EXPECT_EQ(loaded->transient[0].patterns[0].source().size(), 99'997u);

  dir.write("chain.toml", chain_with_pattern("((a{100}){100}){100}"));
  auto refused = load_chain(dir.path() / "chain.toml");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error()[0].message.find("invalid regular expression"), std::string::npos)
      << refused.error()[0].message;
  EXPECT_EQ(refused.error()[0].pos.line, 5);
}

} // namespace
} // namespace kiln
