// The golden corpus of BuildKit's checks (tests/fixtures/lint/buildkit): each file names the
// findings it must yield in `# expect: rule:line ...` comments, or `# expect: nothing`. Most
// are BuildKit's own test cases (frontend/dockerfile/dockerfile_check_test.go) re-expressed,
// with their line numbers kept. A `<file>.dockerignore` beside one is its context's, as
// BuildKit reads it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "lint/lint.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path k_corpus = fs::path(KILN_TEST_FIXTURES) / "lint" / "buildkit";

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(k_corpus)) {
    if (entry.path().extension() == ".Dockerfile") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> expected(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# expect:", 0) != 0) {
      continue;
    }
    std::istringstream words(line.substr(9));
    for (std::string word; words >> word;) {
      if (word != "nothing") {
        out.push_back(word);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

LintOptions corpus_options() {
  LintOptions options;
  options.warnings = true;
  return options;
}

TEST(LintCorpus, EveryFileYieldsExactlyItsExpectedFindings) {
  auto files = corpus_files();
  ASSERT_GT(files.size(), 60u);
  for (const auto& path : files) {
    std::string text = read(path);
    auto result = lint_dockerfile(path.string(), text, corpus_options());
    ASSERT_FALSE(result.parse_error) << path << ": " << result.parse_error->message;
    std::vector<std::string> got;
    for (const auto& f : result.findings) {
      got.push_back(f.rule + ":" + std::to_string(f.line));
    }
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected(text)) << path.filename();
  }
}

TEST(LintCorpus, EveryWarningRuleHasFilesThatFireAndFilesThatDoNot) {
  std::map<std::string, std::set<std::string>> kinds; // rule -> {"bad", "good"}
  for (const auto& path : corpus_files()) {
    std::string stem = path.stem().string();
    for (const char* kind : {"bad", "good"}) {
      auto at = stem.find(std::string("-") + kind);
      if (at != std::string::npos) {
        kinds[stem.substr(0, at)].insert(kind);
      }
    }
  }
  for (const auto& rule : lint_rules()) {
    if (rule.buildkit.empty() && rule.severity == Severity::error) {
      continue; // kiln's build-host rules have their fixtures in lint_test.cpp
    }
    EXPECT_EQ(kinds[std::string(rule.id)], (std::set<std::string>{"bad", "good"})) << rule.id;
  }
}

TEST(LintCorpus, EachBadFileIsCleanWithItsRulesSkippedByTheirBuildKitNames) {
  for (const auto& path : corpus_files()) {
    std::string text = read(path);
    auto want = expected(text);
    if (want.empty() || text.starts_with("# check=")) {
      continue;
    }
    std::set<std::string> names;
    for (const auto& finding : want) {
      const RuleInfo* rule = find_rule(finding.substr(0, finding.find(':')));
      ASSERT_NE(rule, nullptr) << finding;
      names.insert(std::string(rule->buildkit.empty() ? rule->id : rule->buildkit));
    }
    std::string skip;
    for (const auto& name : names) {
      skip += (skip.empty() ? "" : ",") + name;
    }
    auto result =
        lint_dockerfile(path.string(), "# check=skip=" + skip + "\n" + text, corpus_options());
    // kiln's own rules (no BuildKit name) are not BuildKit's to skip: they stay.
    bool kiln_rule = std::any_of(want.begin(), want.end(), [](const std::string& finding) {
      return find_rule(finding.substr(0, finding.find(':')))->buildkit.empty();
    });
    EXPECT_EQ(result.findings.empty(), !kiln_rule) << path.filename();
  }
}

} // namespace
} // namespace kiln
