// The parser and lint on inputs of the shapes that used to be quadratic, at sizes where a
// quadratic step would take minutes: each must finish with the right answer. How their cost
// grows is measured, not asserted here: bench/lint_scaling.cpp fits it.
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dockerfile/parser.h"
#include "lint/lint.h"

namespace kiln {
namespace {

std::string private_address(int i) {
  return fmt::format("10.{}.{}.{}", i / 62500, i / 250 % 250, i % 250 + 1);
}

// One ENV line of n variables, each a URL on a private address: n findings on one line.
std::string private_address_variables(int n) {
  std::string text = "FROM scratch\nENV";
  for (int i = 0; i < n; ++i) {
    text += fmt::format(" A{}=http://{}/", i, private_address(i));
  }
  return text + "\n";
}

LintResult lint(const std::string& text) {
  auto result = lint_dockerfile("Dockerfile", text, LintOptions{});
  EXPECT_FALSE(result.parse_error) << result.parse_error->message;
  return result;
}

TEST(LintScaling, RunWithAFlagOnEveryContinuationLine) {
  std::string text = "FROM scratch\nRUN \\\n";
  for (int i = 0; i < 200'000; ++i) {
    text += "  --a=b \\\n";
  }
  text += "  true\n";
  auto df = parse_dockerfile(text);
  ASSERT_TRUE(df);
  const auto& run = df->instructions.back();
  ASSERT_FALSE(run.flags.empty());
  EXPECT_EQ(run.flags.back().pos.line, run.end.line - 1);
}

TEST(LintScaling, ManyArgLines) {
  std::string text = "FROM scratch\n";
  for (int i = 0; i < 40'000; ++i) {
    text += fmt::format("ARG A{}\n", i);
  }
  // The last is declared in the first stage only: the one finding, on the last line.
  text += "RUN echo $A1\nFROM scratch AS second\nRUN echo $A39999\n";
  auto result = lint(text);
  ASSERT_EQ(result.findings.size(), 1u);
  EXPECT_EQ(result.findings[0].line, 40'004);
}

TEST(LintScaling, ManyOutOfScopeReferencesInOneRun) {
  // Every name is declared in the first stage and used in the second: one finding each.
  std::string args = "FROM scratch\nARG";
  std::string run = "FROM scratch\nRUN echo";
  for (int i = 0; i < 20'000; ++i) {
    args += fmt::format(" V{}", i);
    run += fmt::format(" $V{}", i);
  }
  auto result = lint(args + "\n" + run + "\n");
  EXPECT_EQ(result.findings.size(), 20'000u);
}

TEST(LintScaling, ManyReferencesInOneEnvValue) {
  std::string text = "FROM scratch\nENV X=";
  for (int i = 0; i < 40'000; ++i) {
    text += fmt::format("$N{}", i);
  }
  // Only the last reference names a build-host value: the one finding, at its column.
  std::size_t dollar = text.size() - text.rfind('\n'); // its 1-based column
  text += "${SCCACHE_WEBDAV_ENDPOINT}";
  auto result = lint(text + "\n");
  ASSERT_EQ(result.findings.size(), 1u);
  EXPECT_EQ(result.findings[0].column, static_cast<int>(dollar));
}

TEST(LintScaling, ManyAddressesInOneValue) {
  std::string text = "FROM scratch\nENV A=";
  for (int i = 0; i < 20'000; ++i) {
    text += (i == 0 ? "" : ",") + private_address(i);
  }
  auto result = lint(text + "\n");
  EXPECT_FALSE(result.findings.empty());
}

TEST(LintScaling, TtyOutputGrowsWithTheFindingsNotWithTheirLine) {
  // Each finding shows its line clipped around the caret: printing the whole line for each of
  // 10,000 findings on one line made 1.69 GB.
  auto rendered = [](int n) {
    std::string text = private_address_variables(n);
    auto result = lint(text);
    EXPECT_EQ(result.findings.size(), static_cast<std::size_t>(n));
    return static_cast<double>(render_tty(result, text).size());
  };
  double small = rendered(1'000);
  double large = rendered(8'000);
  EXPECT_LT(large / small, 8 * 1.25);
  EXPECT_LT(large, 8'000 * 700.0); // a message and two clipped lines per finding
}

} // namespace
} // namespace kiln
