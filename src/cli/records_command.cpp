#include "cli/records_command.h"

#include <cstdio>

#include <fmt/format.h>

#include "cli/records_folder.h"
#include "driver/record_fold.h"
#include "driver/run_loop.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kiln {

namespace {

/// The 1-based number of the first line where `a` and `b` differ.
size_t first_differing_line(const std::string& a, const std::string& b) {
  auto left = split(a, '\n');
  auto right = split(b, '\n');
  size_t i = 0;
  while (i < left.size() && i < right.size() && left[i] == right[i]) {
    ++i;
  }
  return i + 1;
}

} // namespace

CLI::App* add_records_command(CLI::App& app, ReplayArgs& args) {
  CLI::App* records = app.add_subcommand("records", "A run's record");
  records->require_subcommand(1);
  CLI::App* replay = records->add_subcommand(
      "replay", "Rebuild a run's manifest.json from its events.jsonl (the record is their fold)");
  add_run_options(replay, args.where);
  replay->add_option("-o,--output", args.output,
                     "Where to write it (default: - for standard output)");
  replay->add_flag("--check", args.check,
                   "Compare it with the run's manifest.json: exit 0 when byte-identical, 1 with "
                   "the first line that differs");
  return replay;
}

int records_replay_command(const ReplayArgs& args) {
  auto folder = run_folder(args.where);
  if (!folder) {
    fmt::print(stderr, "kiln: error: {}\n", folder.error());
    return k_exit_usage;
  }
  auto manifest = replay_manifest(*folder / "events.jsonl");
  if (!manifest) {
    fmt::print(stderr, "kiln: error: {}\n", manifest.error());
    return k_exit_usage;
  }
  if (args.check) {
    std::filesystem::path written = *folder / "manifest.json";
    auto text = read_file(written);
    if (!text) {
      fmt::print(stderr, "kiln: error: {}: {}\n", written.string(), text.error());
      return k_exit_usage;
    }
    if (*text != *manifest) {
      fmt::print(stderr,
                 "kiln: records replay: {} differs from the fold of its events from line {} on\n",
                 written.string(), first_differing_line(*text, *manifest));
      return k_exit_failed;
    }
    fmt::print(stderr, "kiln: records replay: {} is the fold of its events, byte for byte\n",
               written.string());
    return k_exit_ok;
  }
  if (args.output == "-") {
    std::fwrite(manifest->data(), 1, manifest->size(), stdout);
    return std::fflush(stdout) == 0 ? k_exit_ok : k_exit_failed;
  }
  if (auto written = write_file_atomic(args.output, *manifest, Durability::rename_only); !written) {
    fmt::print(stderr, "kiln: error: {}\n", written.error());
    return k_exit_failed;
  }
  return k_exit_ok;
}

} // namespace kiln
