// Prints, one JSON line per Dockerfile, kiln's outline of it (src/dockerfile/outline.h): the
// shape bench/npm/ast_dump.js prints for npm's dockerfile-ast, so the parser differential
// (bench/parser_differential.sh) can compare the two parsers field by field.
//
// Usage: kiln_bench_dockerfile_dump FILE_OR_DIR...  (a directory means its *.Dockerfile files,
// sorted)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dockerfile/outline.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    fs::path arg = argv[i];
    if (!fs::is_directory(arg)) {
      files.push_back(arg);
      continue;
    }
    std::vector<fs::path> found;
    for (const auto& entry : fs::directory_iterator(arg)) {
      if (entry.path().extension() == ".Dockerfile") {
        found.push_back(entry.path());
      }
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  std::string out;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", file.c_str());
      return 1;
    }
    std::ostringstream text;
    text << in.rdbuf();
    nlohmann::json line = kiln::outline_dockerfile(text.str());
    line["file"] = file.string();
    out += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out += '\n';
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
