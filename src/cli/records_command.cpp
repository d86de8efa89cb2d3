#include "cli/records_command.h"

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "cli/records_folder.h"
#include "disk/sizes.h"
#include "driver/record_fold.h"
#include "driver/records_lock.h"
#include "driver/records_prune.h"
#include "driver/run_loop.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/time.h"

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

void add_records_command(CLI::App& app, ReplayArgs& args, PruneArgs& prune_args, CLI::App*& replay,
                         CLI::App*& prune) {
  CLI::App* records = app.add_subcommand("records", "Runs' records: replay one, prune old ones");
  records->require_subcommand(1);
  replay = records->add_subcommand(
      "replay", "Rebuild a run's manifest.json from its events.jsonl (the record is their fold)");
  add_run_options(replay, args.where);
  replay->add_option("-o,--output", args.output,
                     "Where to write it (default: - for standard output)");
  replay->add_flag("--check", args.check,
                   "Compare it with the run's manifest.json: exit 0 when byte-identical, 1 with "
                   "the first line that differs");
  prune = records->add_subcommand(
      "prune", "Remove old run folders and their rows in the run history, never the run "
               "`latest` names nor a running one");
  CLI::Option* keep = prune->add_option("--keep", prune_args.keep, "Keep the newest N runs")
                          ->check(CLI::Range(1, 100000000));
  prune
      ->add_option("--older-than", prune_args.older_than,
                   "Remove the runs that started longer ago than this: 90m, 12h, 30d, 2w")
      ->excludes(keep);
  prune->add_flag("--dry-run", prune_args.dry_run, "List what would be removed; remove nothing");
  add_records_options(prune, prune_args.where);
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

int records_prune_command(const PruneArgs& args) {
  if (args.keep.has_value() == !args.older_than.empty()) {
    fmt::print(stderr, "kiln: error: records prune needs one of --keep N (the newest runs to "
                       "keep) and --older-than AGE (like 30d)\n");
    return k_exit_usage;
  }
  PruneRule rule;
  rule.keep = args.keep;
  if (!args.older_than.empty()) {
    rule.older_than_seconds = parse_age(args.older_than);
    if (!rule.older_than_seconds) {
      fmt::print(stderr,
                 "kiln: error: --older-than '{}' is not an age: write a whole number and a unit, "
                 "m, h, d or w, like 90m, 12h, 30d or 2w\n",
                 args.older_than);
      return k_exit_usage;
    }
  }
  auto records = records_folder(args.where.records, args.where.chain_file);
  if (!records) {
    fmt::print(stderr, "kiln: error: {}\n", records.error());
    return k_exit_usage;
  }
  // Taken as `kiln run` takes it: while it is held no run starts, and a manifest that still says
  // `running` is a dead run's. When a run holds it, its folder (and any other said to be running)
  // is kept.
  auto now = std::chrono::system_clock::now();
  auto lock = RecordsLock::acquire(*records);
  std::string holder;
  if (lock) {
    lock->describe("kiln records prune", utc_iso8601(now));
  } else {
    holder = RecordsLock::holder(*records);
    holder = holder.empty() ? lock.error() : "held by " + holder;
  }
  PruneOutcome pruned = prune_records(*records, rule, now, args.dry_run, lock.has_value(), holder);
  for (const auto& id : pruned.removed) {
    fmt::print("kiln: {} run {}\n", args.dry_run ? "would remove" : "removed", id);
  }
  for (const auto& kept : pruned.plan.kept) {
    fmt::print("kiln: kept {}\n", kept);
  }
  for (const auto& error : pruned.errors) {
    fmt::print(stderr, "kiln: error: {}\n", error);
  }
  if (args.dry_run) {
    fmt::print("kiln: records prune --dry-run: would remove {} of {} run(s), freeing {} ({} "
               "bytes); nothing was removed\n",
               pruned.removed.size(), pruned.total, decimal_size(pruned.bytes), pruned.bytes);
  } else {
    fmt::print("kiln: records prune: removed {} of {} run(s), freed {} ({} bytes); the run "
               "history forgot {}\n",
               pruned.removed.size(), pruned.total, decimal_size(pruned.bytes), pruned.bytes,
               pruned.forgotten);
  }
  return pruned.errors.empty() ? k_exit_ok : k_exit_failed;
}

} // namespace kiln
