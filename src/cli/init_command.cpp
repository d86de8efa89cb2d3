#include "cli/init_command.h"

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "chain/chain_loader.h"
#include "driver/run_loop.h"
#include "init/chain_draft.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kiln {

namespace fs = std::filesystem;

CLI::App* add_init_command(CLI::App& app, InitArgs& args) {
  CLI::App* init = app.add_subcommand(
      "init", "Write a chain.toml (and a versions.env) for the Dockerfiles under a folder");
  init->add_option("dir", args.dir, "The folder: the chain file goes there (default: .)");
  init->add_flag("--per-target", args.per_target,
                 "One stage per named stage (FROM ... AS name) of a multi-stage Dockerfile, "
                 "instead of one stage building its last");
  return init;
}

int init_command(const InitArgs& args) {
  const fs::path dir = args.dir;
  const fs::path chain_file = dir / "chain.toml";
  std::error_code ignored;
  if (fs::exists(fs::symlink_status(chain_file, ignored))) {
    fmt::print(stderr,
               "kiln: error: {} exists, and kiln init never overwrites a file; move it away, "
               "or run kiln init in another folder\n",
               chain_file.string());
    return k_exit_usage;
  }
  auto draft = draft_chain(dir, {args.per_target});
  if (!draft) {
    fmt::print(stderr, "kiln: error: {}; nothing was written\n", draft.error());
    return k_exit_usage;
  }
  // The versions file first: a chain file that names a versions file never written would not
  // load. Exclusive creation, so a file that appeared meanwhile is not overwritten either.
  bool write_versions = !draft->versions_kept && !draft->pins.empty();
  if (write_versions) {
    if (auto written = write_new_file(dir / "versions.env", render_versions(*draft)); !written) {
      fmt::print(stderr, "kiln: error: {}; nothing was written\n", written.error());
      return k_exit_usage;
    }
  }
  if (auto written = write_new_file(chain_file, render_chain(*draft)); !written) {
    fmt::print(stderr, "kiln: error: {}\n", written.error());
    return k_exit_usage;
  }
  std::vector<std::string> names;
  for (const auto& stage : draft->stages) {
    names.push_back(stage.name);
  }
  fmt::print("kiln: init: wrote {}: {} stage(s): {}\n", chain_file.string(), names.size(),
             join(names, ", "));
  if (write_versions) {
    fmt::print("kiln: init: wrote {}: {} pin(s) from the Dockerfiles' version ARGs\n",
               (dir / "versions.env").string(), draft->pins.size());
  } else if (draft->versions_kept) {
    fmt::print("kiln: init: kept {}: the chain names it\n", (dir / "versions.env").string());
  }
  auto chain = load_chain(chain_file);
  if (!chain) {
    for (const auto& diagnostic : chain.error()) {
      fmt::print(stderr, "{}", format_diagnostic(diagnostic));
    }
    fmt::print(stderr, "kiln: init: {} does not load yet: edit it as the above says\n",
               chain_file.string());
    return k_exit_failed;
  }
  fmt::print("kiln: init: next: kiln lint --chain {0}, then kiln run {0} --dry-run\n",
             chain_file.string());
  return k_exit_ok;
}

} // namespace kiln
