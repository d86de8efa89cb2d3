// docs/tutorial.md, run as written: every ```sh block and every `$ ` command of a ```console
// block, in order, from one folder, on real buildah, with a real registry for the publish. A
// console block's other lines are what the command prints: each must be a line of its output,
// in order, `...` standing for any text. The page cannot drift from what kiln does.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kiln_harness.h"
#include "local_registry.h"
#include "util/process.h"
#include "util/strings.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

struct Step {
  std::string command;
  std::vector<std::string> prints; // what the page says it prints
  int line = 0;                    // of the page
};

/// The steps of a Markdown page: its sh blocks whole, its console blocks' `$ ` lines.
std::vector<Step> steps_of(const fs::path& page) {
  std::ifstream in(page);
  std::vector<Step> steps;
  std::string line;
  std::string fence; // the open block's language, "" outside a block
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (fence.empty()) {
      if (line.starts_with("```sh") || line.starts_with("```console")) {
        fence = line.substr(3);
        if (fence == "sh") {
          steps.push_back({"", {}, number + 1});
        }
      }
      continue;
    }
    if (line.starts_with("```")) {
      fence.clear();
    } else if (fence == "sh") {
      steps.back().command += line + "\n";
    } else if (line.starts_with("$ ")) {
      steps.push_back({line.substr(2), {}, number});
    } else if (!steps.empty() && !line.empty()) {
      steps.back().prints.push_back(line);
    }
  }
  return steps;
}

/// A printed line as the page shows it, `...` for any text.
std::regex as_pattern(const std::string& shown) {
  std::string pattern;
  for (size_t i = 0; i < shown.size(); ++i) {
    if (shown.compare(i, 3, "...") == 0) {
      pattern += ".*";
      i += 2;
    } else if (std::string("\\^$.|?*+()[]{}").find(shown[i]) != std::string::npos) {
      pattern += std::string("\\") + shown[i];
    } else {
      pattern += shown[i];
    }
  }
  return std::regex(pattern);
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

TEST(Tutorial, ThePageRunsAsWritten) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  std::vector<Step> steps = steps_of(fs::path(KILN_SOURCE_DIR) / "docs" / "tutorial.md");
  ASSERT_GE(steps.size(), 10u);
  const fs::path cwd_file = dir.path() / "cwd";
  std::ofstream(cwd_file) << dir.path().string();
  const std::string path =
      fs::path(KILN_BINARY).parent_path().string() + ":" + std::string(std::getenv("PATH"));
  for (Step& step : steps) {
    SCOPED_TRACE("docs/tutorial.md:" + std::to_string(step.line) + ": " + step.command);
    // The page's registry is the usual 127.0.0.1:5000; this test's is on a free port.
    replace_all(step.command, "127.0.0.1:5000", registry.host());
    for (auto& shown : step.prints) {
      replace_all(shown, "127.0.0.1:5000", registry.host());
    }
    std::string output;
    int code = run_process({{"bash", "-c",
                             "cd \"$(cat \"$1\")\" || exit 99\n" + step.command +
                                 "\nrc=$?; pwd > \"$1\"; exit $rc",
                             "step", cwd_file.string()},
                            {{"PATH", path}}},
                           [&](std::string_view text) { output += text; })
                   .exit_code;
    ASSERT_EQ(code, 0) << output;
    std::vector<std::string> lines = split(output, '\n');
    size_t at = 0;
    for (const auto& shown : step.prints) {
      std::regex pattern = as_pattern(shown);
      while (at < lines.size() && !std::regex_match(lines[at], pattern)) {
        ++at;
      }
      ASSERT_LT(at, lines.size()) << "the page shows\n  " << shown
                                  << "\nwhich is not a line of what it printed (in order):\n"
                                  << output;
      ++at;
    }
  }
  dir.remove_images(dir.path() / "myapp" / "records");
}

} // namespace
} // namespace kiln::testing
