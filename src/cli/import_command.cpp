#include "cli/import_command.h"

#include <cstdio>
#include <system_error>

#include <fmt/format.h>

#include "chain/written_chain.h"
#include "dockerfile/declared_args.h"
#include "dockerfile/source.h"
#include "driver/run_loop.h"
#include "import/bake_chain.h"
#include "import/bake_file.h"
#include "util/diagnostic.h"
#include "util/fs.h"

namespace kiln {

namespace fs = std::filesystem;

CLI::App* add_import_command(CLI::App& app, ImportArgs& args) {
  CLI::App* import = app.add_subcommand("import", "Write a chain file from another tool's "
                                                  "build description");
  import->require_subcommand(1);
  CLI::App* bake = import->add_subcommand(
      "bake", "Write a chain file from the JSON `docker buildx bake --print` prints");
  bake->add_option("file", args.file, "The bake JSON; its paths are relative to its folder")
      ->required();
  bake->add_option("-o,--output", args.output,
                   "The chain file to write, never one that exists (default chain.toml; - for "
                   "stdout)");
  bake->add_option("--group", args.group,
                   "The group whose targets to import (default: group default, else every "
                   "target)");
  return bake;
}

int import_bake_command(const ImportArgs& args) {
  auto text = read_file(args.file);
  if (!text) {
    fmt::print(stderr, "kiln: error: {}\n", printable(text.error()));
    return k_exit_usage;
  }
  auto bake = parse_bake_json(*text, args.file);
  if (!bake) {
    std::fputs(format_diagnostic(bake.error()).c_str(), stderr);
    fmt::print(stderr, "kiln: nothing was imported\n");
    return k_exit_usage;
  }
  bool to_stdout = args.output == "-";
  std::error_code ec;
  if (!to_stdout && fs::symlink_status(args.output, ec).type() != fs::file_type::not_found) {
    fmt::print(stderr,
               "kiln: error: {} already exists; kiln import never overwrites a file: remove it "
               "or name another with -o\n",
               printable(args.output));
    return k_exit_usage;
  }
  BakeImport options;
  options.bake_file = fs::absolute(args.file).lexically_normal();
  options.chain_dir =
      to_stdout ? fs::current_path() : fs::absolute(args.output).lexically_normal().parent_path();
  if (!args.group.empty()) {
    options.group = args.group;
    options.group_given = true;
  }
  std::string folder = options.bake_file.parent_path().filename().string();
  options.chain_name = folder.empty() ? "imported" : as_stage_name(folder);
  options.declared_args =
      [](const fs::path& dockerfile) -> std::optional<std::vector<std::string>> {
    auto source = load_dockerfile(dockerfile);
    if (!source) {
      return std::nullopt;
    }
    return declared_args((*source)->parsed);
  };
  options.is_file = [](const fs::path& path) {
    std::error_code error;
    return fs::is_regular_file(path, error);
  };
  auto chain = bake_to_chain(*bake, options);
  if (!chain) {
    fmt::print(stderr, "kiln: error: {}: {}\n", printable(args.file), printable(chain.error()));
    return k_exit_usage;
  }
  for (const auto& line : chain->dropped) {
    fmt::print(stderr, "kiln: could not carry over: {}\n", printable(line));
  }
  if (to_stdout) {
    std::fwrite(chain->toml.data(), 1, chain->toml.size(), stdout);
    return 0;
  }
  if (auto written = write_new_file(args.output, chain->toml); !written) {
    fmt::print(stderr, "kiln: error: {}\n", printable(written.error()));
    return k_exit_usage;
  }
  fmt::print(stderr, "kiln: wrote {}; `kiln run {} --dry-run` shows what it builds\n",
             printable(args.output), printable(args.output));
  return 0;
}

} // namespace kiln
