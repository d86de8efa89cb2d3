// Lint and the parser stay linear in their input: each case is run at two sizes, eight times
// apart, and the larger must cost about eight times the smaller, never the sixty-four times a
// quadratic step gives. CPU time of this thread, the least of a few runs: a ratio between two
// sizes, not a duration, so a slow or busy host changes both sides alike.
#include <algorithm>
#include <ctime>
#include <functional>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dockerfile/parser.h"
#include "lint/lint.h"

namespace kiln {
namespace {

constexpr int k_factor = 8;
// Linear growth gives about 8 (up to 14 measured, as larger sets outgrow the caches), quadratic
// about 64 (46 to 94 measured before the fixes): the bound sits between them.
constexpr double k_max_growth = 32;

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// The least CPU time of three runs of `work` on `text`.
double cost(const std::string& text, const std::function<void(const std::string&)>& work) {
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    double start = thread_cpu_seconds();
    work(text);
    best = std::min(best, thread_cpu_seconds() - start);
  }
  return best;
}

// How much more `work` costs on make(n * k_factor) than on make(n).
double growth(int n, const std::function<std::string(int)>& make,
              const std::function<void(const std::string&)>& work) {
  double small = cost(make(n), work);
  double large = cost(make(n * k_factor), work);
  return large / std::max(small, 1e-6);
}

void lint(const std::string& text) {
  auto result = lint_dockerfile("Dockerfile", text, LintOptions{});
  ASSERT_FALSE(result.parse_error) << result.parse_error->message;
}

TEST(LintScaling, RunWithAFlagOnEveryContinuationLine) {
  auto make = [](int n) {
    std::string text = "FROM scratch\nRUN \\\n";
    for (int i = 0; i < n; ++i) {
      text += "  --a=b \\\n";
    }
    return text + "  true\n";
  };
  auto parse = [](const std::string& text) {
    auto df = parse_dockerfile(text);
    ASSERT_TRUE(df);
    ASSERT_EQ(df->instructions.back().flags.back().pos.line, df->instructions.back().end.line - 1);
  };
  EXPECT_LT(growth(25'000, make, parse), k_max_growth);
}

TEST(LintScaling, ManyArgLines) {
  auto make = [](int n) {
    std::string text = "FROM scratch\n";
    for (int i = 0; i < n; ++i) {
      text += fmt::format("ARG A{}\n", i);
    }
    return text + "RUN echo $A1\n";
  };
  EXPECT_LT(growth(5'000, make, lint), k_max_growth);
}

TEST(LintScaling, ManyOutOfScopeReferencesInOneRun) {
  // Every name is declared in the first stage and used in the second: one finding each.
  auto make = [](int n) {
    std::string args = "FROM scratch\nARG";
    std::string run = "FROM scratch\nRUN echo";
    for (int i = 0; i < n; ++i) {
      args += fmt::format(" V{}", i);
      run += fmt::format(" $V{}", i);
    }
    return args + "\n" + run + "\n";
  };
  auto work = [](const std::string& text) {
    auto result = lint_dockerfile("Dockerfile", text, LintOptions{});
    ASSERT_FALSE(result.findings.empty());
  };
  EXPECT_LT(growth(2'500, make, work), k_max_growth);
}

TEST(LintScaling, ManyReferencesInOneEnvValue) {
  auto make = [](int n) {
    std::string text = "FROM scratch\nENV X=";
    for (int i = 0; i < n; ++i) {
      text += fmt::format("$N{}", i);
    }
    return text + "\n";
  };
  EXPECT_LT(growth(5'000, make, lint), k_max_growth);
}

std::string private_addresses(int n) {
  std::string text = "FROM scratch\nENV";
  for (int i = 0; i < n; ++i) {
    text += fmt::format(" A{}=http://10.{}.{}.{}/", i, i / 62500, i / 250 % 250, i % 250 + 1);
  }
  return text + "\n";
}

TEST(LintScaling, ManyFindingsOnOneLine) {
  auto work = [](const std::string& text) {
    auto result = lint_dockerfile("Dockerfile", text, LintOptions{});
    ASSERT_FALSE(result.findings.empty());
    render_tty(result, text);
  };
  EXPECT_LT(growth(1'250, private_addresses, work), k_max_growth);
}

TEST(LintScaling, ManyAddressesInOneValue) {
  auto make = [](int n) {
    std::string text = "FROM scratch\nENV A=";
    for (int i = 0; i < n; ++i) {
      text +=
          fmt::format("{}10.{}.{}.{}", i == 0 ? "" : ",", i / 62500, i / 250 % 250, i % 250 + 1);
    }
    return text + "\n";
  };
  auto work = [](const std::string& text) {
    auto result = lint_dockerfile("Dockerfile", text, LintOptions{});
    ASSERT_FALSE(result.findings.empty());
  };
  EXPECT_LT(growth(2'500, make, work), k_max_growth);
}

TEST(LintScaling, TtyOutputGrowsWithTheFindingsNotWithTheirLine) {
  // Each finding shows its line clipped around the caret: printing the whole line for each of
  // 10,000 findings on one line made 1.69 GB.
  auto rendered = [](int n) {
    std::string text = private_addresses(n);
    auto result = lint_dockerfile("Dockerfile", text, LintOptions{});
    EXPECT_EQ(result.findings.size(), static_cast<std::size_t>(n));
    return static_cast<double>(render_tty(result, text).size());
  };
  double small = rendered(1'000);
  double large = rendered(1'000 * k_factor);
  EXPECT_LT(large / small, k_factor * 1.25);
  EXPECT_LT(large, 1'000 * k_factor * 700.0); // a message and two clipped lines per finding
}

} // namespace
} // namespace kiln
