// The parser and lint on inputs of the shapes that used to be quadratic, at sizes where a
// quadratic step would take minutes: each must finish with the right answer. How their cost
// grows is measured, not asserted here: bench/lint_scaling.cpp fits it on the same shapes.
#include <string>

#include <gtest/gtest.h>

#include "dockerfile/parser.h"
#include "dockerfile_shapes.h"
#include "lint/lint.h"

namespace kiln::testing {
namespace {

LintResult lint(const std::string& text) {
  auto result = lint_dockerfile("Dockerfile", text, LintOptions{});
  EXPECT_FALSE(result.parse_error) << result.parse_error->message;
  return result;
}

TEST(LintScaling, RunWithAFlagOnEveryContinuationLine) {
  auto df = parse_dockerfile(flag_on_every_continuation_line(200'000));
  ASSERT_TRUE(df);
  const auto& run = df->instructions.back();
  ASSERT_EQ(run.flags.size(), 200'000u);
  EXPECT_EQ(run.flags.back().pos.line, run.end.line - 1);
}

TEST(LintScaling, ManyArgLines) {
  auto result = lint(arg_lines(40'000));
  ASSERT_EQ(result.findings.size(), 1u);
  EXPECT_EQ(result.findings[0].line, 40'004);
}

TEST(LintScaling, ManyOutOfScopeReferencesInOneRun) {
  EXPECT_EQ(lint(out_of_scope_references(20'000)).findings.size(), 20'000u);
}

TEST(LintScaling, ManyReferencesInOneEnvValue) {
  std::string text = references_in_one_env_value(40'000);
  text.pop_back(); // its newline
  // Only the last reference names a build-host value: the one finding, at its column.
  std::size_t dollar = text.size() - text.rfind('\n'); // its 1-based column
  text += "${SCCACHE_WEBDAV_ENDPOINT}\n";
  auto result = lint(text);
  ASSERT_EQ(result.findings.size(), 1u);
  EXPECT_EQ(result.findings[0].column, static_cast<int>(dollar));
}

TEST(LintScaling, ManyAddressesInOneValue) {
  EXPECT_FALSE(lint(addresses_in_one_value(20'000)).findings.empty());
}

TEST(LintScaling, ManyNearMissesOfManyDeclaredNames) {
  // Every rule on: 40,000 undefined names, each one edit from one of 40,000 declared names.
  // An unbounded "did you mean" search would compare 1.6 billion pairs.
  LintOptions options;
  options.warnings = true;
  options.read_dockerignore = false;
  auto result = lint_dockerfile("Dockerfile", near_miss_references(40'000), options);
  ASSERT_FALSE(result.parse_error);
  EXPECT_EQ(result.findings.size(), 40'000u);
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
} // namespace kiln::testing
