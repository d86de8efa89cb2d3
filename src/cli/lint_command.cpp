#include "cli/lint_command.h"

#include <algorithm>

#include <fmt/format.h>

#include "cli/chain_file.h"
#include "dockerfile/instructions.h"
#include "driver/run_loop.h"
#include "lint/lint.h"

namespace kiln {

CLI::App* add_lint_command(CLI::App& app, LintArgs& args) {
  CLI::App* lint = app.add_subcommand(
      "lint", "Find build-host leaks, out-of-scope ARGs and cache mistakes in Dockerfiles");
  lint->add_option("files", args.files,
                   "Dockerfiles to check (default with --chain: every stage's Dockerfile)");
  lint->add_option("--chain", args.chain_file,
                   "A chain file: its [gates] table sets the options below, which add to it");
  lint->add_option("--format", args.format, "tty (default), json or sarif")
      ->check(CLI::IsMember({"tty", "json", "sarif"}));
  lint->add_option("--name", args.names,
                   "Another build-host variable name, NAME or PREFIX* (repeatable)");
  lint->add_option("--cache-target", args.cache_targets,
                   "A compile-cache mount target (repeatable; replaces the defaults)");
  lint->add_option("--cache-arg", args.cache_arg,
                   "The ARG a stage needs to reach the compile cache (SCCACHE_WEBDAV_ENDPOINT)");
  lint->add_option("--per-file-dir", args.per_file_dirs,
                   "A directory to mount or copy file by file, never whole (repeatable)");
  return lint;
}

int lint_command(const LintArgs& args) {
  LintOptions options;
  std::vector<std::string> files = args.files;
  if (!args.chain_file.empty()) {
    auto chain = load_chain_or_report(args.chain_file, "", "nothing was linted");
    if (!chain) {
      return k_exit_usage;
    }
    options = lint_options(chain->gates);
    if (files.empty()) {
      for (const auto& stage : chain->stages) {
        if (std::find(files.begin(), files.end(), stage.dockerfile.string()) == files.end()) {
          files.push_back(stage.dockerfile.string());
        }
      }
    }
  } else if (files.empty()) {
    fmt::print(stderr, "kiln: error: lint needs Dockerfiles to check, or --chain CHAIN\n");
    return k_exit_usage;
  }
  options.extra_names.insert(options.extra_names.end(), args.names.begin(), args.names.end());
  if (!args.cache_targets.empty()) {
    options.cache_targets = args.cache_targets;
  }
  if (!args.cache_arg.empty()) {
    options.cache_endpoint_arg = args.cache_arg;
  }
  options.per_file_dirs.insert(options.per_file_dirs.end(), args.per_file_dirs.begin(),
                               args.per_file_dirs.end());
  std::vector<LintResult> results;
  std::string tty;
  for (const auto& file : files) {
    auto text = read_dockerfile(file);
    if (!text) {
      fmt::print(stderr, "kiln: error: {}\n", text.error());
      return k_exit_usage;
    }
    results.push_back(lint_dockerfile(file, *text, options));
    tty += render_tty(results.back(), *text);
  }
  if (args.format == "json") {
    fmt::print("{}\n", render_json(results));
  } else if (args.format == "sarif") {
    fmt::print("{}\n", render_sarif(results));
  } else {
    fmt::print("{}", tty);
  }
  return lint_exit_code(results);
}

} // namespace kiln
