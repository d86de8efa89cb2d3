// How the parser's and lint's cost grows with their input, on the shapes that were quadratic
// before (a flag on every continuation line, thousands of ARG lines, thousands of references or
// addresses in one value, thousands of findings on one line, thousands of undefined names each
// near a declared one). Lint runs with every rule on. Each case runs at four sizes, each
// eight times the last; Google Benchmark fits the times and prints the complexity it finds
// (`_BigO` and `_RMS` rows): linear is O(N) with a small RMS, a quadratic step shows as O(N^2)
// or a large RMS against O(N).
//
// Usage: kiln_bench_lint_scaling [--benchmark_filter=...]
#include <string>

#include <benchmark/benchmark.h>

#include "dockerfile/parser.h"
#include "dockerfile_shapes.h"
#include "lint/lint.h"

namespace {

using namespace kiln::testing;

void parse(benchmark::State& state, std::string (*make)(int)) {
  std::string text = make(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto parsed = kiln::parse_dockerfile(text);
    if (!parsed) {
      state.SkipWithError("the input did not parse");
      return;
    }
    benchmark::DoNotOptimize(parsed->instructions.data());
  }
  state.SetComplexityN(state.range(0));
}

void lint(benchmark::State& state, std::string (*make)(int), bool render) {
  std::string text = make(static_cast<int>(state.range(0)));
  kiln::LintOptions options;
  options.warnings = true; // every rule, as `kiln lint` runs them
  options.read_dockerignore = false;
  for (auto _ : state) {
    auto result = kiln::lint_dockerfile("Dockerfile", text, options);
    if (result.parse_error) {
      state.SkipWithError("the input did not parse");
      return;
    }
    if (render) {
      benchmark::DoNotOptimize(kiln::render_tty(result, text).size());
    }
    benchmark::DoNotOptimize(result.findings.data());
  }
  state.SetComplexityN(state.range(0));
}

void sizes(benchmark::internal::Benchmark* b, int64_t smallest) {
  for (int64_t n = smallest; n <= smallest * 512; n *= 8) {
    b->Arg(n);
  }
  b->Complexity()->Unit(benchmark::kMillisecond);
}

} // namespace

BENCHMARK_CAPTURE(parse, flag_on_every_continuation_line, flag_on_every_continuation_line)
    ->Apply([](auto* b) { sizes(b, 500); });
BENCHMARK_CAPTURE(lint, arg_lines, arg_lines, false)->Apply([](auto* b) { sizes(b, 100); });
BENCHMARK_CAPTURE(lint, out_of_scope_references, out_of_scope_references, false)
    ->Apply([](auto* b) { sizes(b, 50); });
BENCHMARK_CAPTURE(lint, references_in_one_env_value, references_in_one_env_value, false)
    ->Apply([](auto* b) { sizes(b, 100); });
BENCHMARK_CAPTURE(lint, findings_on_one_line_rendered, private_address_variables, true)
    ->Apply([](auto* b) { sizes(b, 25); });
BENCHMARK_CAPTURE(lint, addresses_in_one_value, addresses_in_one_value, false)->Apply([](auto* b) {
  sizes(b, 50);
});

BENCHMARK_CAPTURE(lint, near_miss_references, near_miss_references, false)->Apply([](auto* b) {
  sizes(b, 50);
});

BENCHMARK_MAIN();
