// Lint on any text with every rule on, rendered every way kiln renders it: a finding must
// point into the file, the terminal text must hold no byte a terminal would act on, JSON, SARIF
// and BuildKit's JSON must be valid JSON whatever bytes the file holds, and each GitHub
// annotation must stay on its one line.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "lint/lint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  static const LintOptions options = [] {
    LintOptions o;
    o.extra_names = {"EVIL*", "MYCORP_CACHE"};
    o.per_file_dirs = {"ci/scripts", "./conf/"};
    o.warnings = true;
    // copy-ignored-file's patterns under fuzzing too, without reading the working folder.
    o.dockerignore = "build/\n*.o\n**/secret*\nsrc/[a-c]?.txt\n";
    return o;
  }();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  LintResult result = lint_dockerfile("fuzz.Dockerfile", text, options);
  auto lines = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
  for (const auto& f : result.findings) {
    FUZZ_CHECK(f.line >= 1 && f.line <= lines && f.column >= 1 && !f.rule.empty() &&
               !f.message.empty());
  }
  FUZZ_CHECK(lint_exit_code({result}) == (result.parse_error        ? 2
                                          : result.findings.empty() ? 0
                                                                    : 1));

  std::string tty = render_tty(result, text);
  for (char c : tty) {
    auto byte = static_cast<unsigned char>(c);
    FUZZ_CHECK(byte >= 0x20 || c == '\n' || c == '\t');
    FUZZ_CHECK(byte != 0x7F);
  }
  auto json = nlohmann::json::parse(render_json({result}), nullptr, false);
  FUZZ_CHECK(!json.is_discarded() &&
             json.size() == result.findings.size() + (result.parse_error ? 1 : 0));
  auto sarif = nlohmann::json::parse(render_sarif({result}), nullptr, false);
  FUZZ_CHECK(!sarif.is_discarded());
  auto buildkit = nlohmann::json::parse(render_buildkit_json({result}, {{"fuzz.Dockerfile", text}}),
                                        nullptr, false);
  FUZZ_CHECK(!buildkit.is_discarded() && buildkit["sources"].size() == 1);
  FUZZ_CHECK(buildkit["warnings"].is_null()
                 ? result.findings.empty()
                 : buildkit["warnings"].size() == result.findings.size());
  std::string github = render_github({result});
  FUZZ_CHECK(static_cast<std::size_t>(std::count(github.begin(), github.end(), '\n')) ==
             result.findings.size() + (result.parse_error ? 1 : 0));
  return 0;
}
