#include "cli/history_command.h"

#include <fmt/format.h>

#include "cli/records_folder.h"
#include "driver/run_loop.h"
#include "forensics/history.h"
#include "util/strings.h"
#include "util/time.h"

namespace kiln {

namespace {

std::optional<History> open_synced(const HistoryArgs& args, HistorySettings& settings) {
  auto records = records_folder(args.where.records, args.where.chain_file, &settings);
  if (!records) {
    fmt::print(stderr, "kiln: error: {}\n", records.error());
    return std::nullopt;
  }
  auto history = History::open(*records);
  if (!history) {
    fmt::print(stderr, "kiln: error: {}\n", history.error());
    return std::nullopt;
  }
  history->sync(*records);
  return std::move(*history);
}

std::string seconds_text(const nlohmann::json& value) {
  return value.is_number() ? short_duration(value.get<double>()) : "-";
}

int causes_command(const History& history, const HistoryArgs& args) {
  std::vector<CauseCost> costs = history.top_causes(args.limit);
  if (args.format == "json") {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& c : costs) {
      list.push_back({{"root", c.root},
                      {"lane", c.lane},
                      {"kind", c.kind},
                      {"summary", c.summary},
                      {"runs", c.runs},
                      {"builds", c.builds},
                      {"seconds", c.seconds}});
    }
    fmt::print("{}\n", nlohmann::json{{"runs", args.limit}, {"causes", list}}.dump(2));
    return k_exit_ok;
  }
  fmt::print("What rebuilds cost over the newest {} run(s), by first cause:\n", args.limit);
  if (costs.empty()) {
    fmt::print("  nothing was rebuilt with a cause recorded\n");
  }
  for (const auto& c : costs) {
    fmt::print("  {:>8}  {} {} in {} run(s), {} build(s); newest: {}\n", short_duration(c.seconds),
               c.root, c.kind, c.runs, c.builds, c.summary);
  }
  return k_exit_ok;
}

} // namespace

void add_history_command(CLI::App& app, HistoryArgs& args, CLI::App*& show, CLI::App*& prune) {
  show = app.add_subcommand("history", "Stage durations over runs, their median and regressions");
  show->add_option("stage", args.stage, "One stage: each of its runs");
  show->add_option("--lane", args.lane, "Only this lane's stages");
  show->add_option("--format", args.format, "tty or json")->check(CLI::IsMember({"tty", "json"}));
  show->add_option("--runs", args.limit, "How many runs per stage to show")
      ->check(CLI::Range(1, 100000));
  show->add_option("--percent", args.percent,
                   "A regression is this many percent slower than the median (default: the chain's "
                   "[history], or 20)")
      ->check(CLI::Range(0.0, 1e6));
  show->add_flag("--causes", args.causes,
                 "The first causes of rebuilds that cost the most build time over the newest "
                 "--runs runs (docs/explain.md)");
  show->add_option("--min-seconds", args.seconds,
                   "... and at least this many seconds slower (default: the chain's, or 30)")
      ->check(CLI::Range(0.0, 1e9));
  add_records_options(show, args.where);
  prune = show->add_subcommand("prune", "Forget all but the newest runs (their folders stay)");
  prune->add_option("--keep", args.keep, "How many runs to keep (default 1000)")
      ->check(CLI::Range(0, 100000000));
  add_records_options(prune, args.where);
}

int history_command(const HistoryArgs& args) {
  HistorySettings settings;
  std::optional<History> history = open_synced(args, settings);
  if (!history) {
    return k_exit_usage;
  }
  // The chain's [history] when it is named, else what its newest run judged by.
  RegressionRule rule = args.where.chain_file.empty() ? history->rule()
                                                      : RegressionRule{settings.regression_percent,
                                                                       settings.regression_seconds};
  rule.percent = args.percent.value_or(rule.percent);
  rule.seconds = args.seconds.value_or(rule.seconds);
  if (args.causes) {
    return causes_command(*history, args);
  }
  nlohmann::json doc = history_json(*history, args.stage, args.lane, rule, args.limit);
  if (!args.stage.empty() && doc["stages"].empty()) {
    fmt::print(stderr,
               "kiln: error: no run in the history built stage '{}'{}: `kiln history` lists the "
               "stages it knows\n",
               args.stage, args.lane.empty() ? "" : " in lane " + args.lane);
    return k_exit_usage;
  }
  if (args.format == "json") {
    fmt::print("{}\n", doc.dump(2));
    return k_exit_ok;
  }
  fmt::print("{} runs; a regression is > {}% and > {} over the median of the last {} green "
             "builds\n",
             doc["runs"].get<size_t>(), rule.percent, short_duration(rule.seconds),
             rule.baseline_runs);
  if (!args.stage.empty()) {
    for (const auto& s : doc["stages"]) {
      fmt::print("\n{}{}: median {}, last {}\n", s["stage"].get<std::string>(),
                 s["lane"].get<std::string>().empty() ? ""
                                                      : " [" + s["lane"].get<std::string>() + "]",
                 seconds_text(s["median_green_seconds"]), seconds_text(s["last_seconds"]));
      fmt::print("  {:<22} {:<12} {:<10} {:<9} {:>9}  {:<24} {}\n", "run", "run status", "stage",
                 "outcome", "seconds", "attempts", "compile req/hits");
      for (const auto& r : s["runs"]) {
        fmt::print("  {:<22} {:<12} {:<10} {:<9} {:>9.1f}  {:<24} {}\n",
                   r["run_id"].get<std::string>(), r["run_status"].get<std::string>(),
                   r["status"].get<std::string>(), r["outcome"].get<std::string>(),
                   r["seconds"].get<double>(), r["verdicts"].get<std::string>(),
                   r["compile_requests"].is_number()
                       ? fmt::format("{}/{}", r["compile_requests"].get<long>(),
                                     r["compile_hits"].get<long>())
                       : "-");
      }
    }
    return k_exit_ok;
  }
  fmt::print("{:<24} {:>5} {:>10} {:>10}  {}\n", "stage", "runs", "median", "last", "flag");
  for (const auto& s : doc["stages"]) {
    std::string name = s["lane"].get<std::string>().empty()
                           ? s["stage"].get<std::string>()
                           : s["lane"].get<std::string>() + "/" + s["stage"].get<std::string>();
    std::string row = fmt::format("{:<24} {:>5} {:>10} {:>10}  {}", name, s["runs"].size(),
                                  seconds_text(s["median_green_seconds"]),
                                  seconds_text(s["last_seconds"]),
                                  s["regression"].get<bool>() ? "REGRESSION" : "");
    fmt::print("{}\n", trim_space(row));
  }
  for (const auto& r : doc["regressions"]) {
    fmt::print("regression: {}\n", describe_regression(Regression{
                                       r["run_id"], r["stage"], r["lane"], r["outcome"],
                                       r["seconds"], r["median_seconds"], r["runs"], r["kind"]}));
  }
  return k_exit_ok;
}

int history_prune_command(const HistoryArgs& args) {
  HistorySettings settings;
  std::optional<History> history = open_synced(args, settings);
  if (!history) {
    return k_exit_usage;
  }
  int removed = history->prune(args.keep);
  fmt::print("kiln: the history forgot {} run(s) and keeps {}; their folders stay\n", removed,
             history->runs().size());
  return k_exit_ok;
}

} // namespace kiln
