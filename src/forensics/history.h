#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

struct sqlite3;

namespace kiln {

/// When a stage's build counts as slower than usual: over both thresholds against the median
/// of its last `baseline_runs` green builds (docs/forensics.md, "Run history").
struct RegressionRule {
  double percent = 20;
  double seconds = 30;
  int baseline_runs = 10;
};

/// How many earlier green builds of the same kind a regression is judged against at least: one
/// or two earlier builds say nothing of what is usual.
constexpr int k_min_baseline = 3;

/// What kind of build a stage's was, so that a build is only ever compared with builds of its
/// kind: `cached` (every step served from the cache), `full` (every step ran: its first build,
/// a cold cache, the cache bypassed), `partial` (from the step an input changed at); "" for a
/// stage that did not build. A manifest without causes: `full` when no step was cached.
std::string build_kind(const std::string& outcome, const std::string& cause_kind, int steps_cached);

/// A run history keeps at least this many runs unless told otherwise (`kiln history prune`).
constexpr int k_history_keep_default = 1000;

/// One stage of one indexed run.
struct StageRun {
  std::string run_id;
  std::string started;
  std::string run_status;
  std::string stage;
  std::string lane;
  std::string status;  // the stage's: ok | failed | refused | interrupted | skipped | ...
  std::string outcome; // built | reused | failed | ...
  double seconds = 0;
  int attempts = 0;
  std::string verdicts; // the attempts' verdicts, comma-separated
  long compile_requests = -1;
  long compile_hits = -1;
  double idle_tail_seconds = -1; // -1: unknown (the run's logs were not analysed)
  bool clipped = false;
  std::string kind;       // build_kind()
  std::string cause_kind; // the cause of a build that ran steps (docs/explain.md), "" otherwise
  std::string cause;      // its summary
  bool green() const { return status == "ok"; }
};

struct Regression {
  std::string run_id;
  std::string stage;
  std::string lane;
  std::string outcome;
  double seconds = 0;
  double median_seconds = 0;
  int baseline_runs = 0; // green builds the median was taken over
  std::string kind;      // build_kind(): the median is of builds of this kind
};

/// What one first cause of rebuilds cost over the runs asked about: the stage it started at and
/// its kind, with the newest summary of it.
struct CauseCost {
  std::string root; // the stage whose own cause it is, as the run names it (`<lane>/<stage>`)
  std::string lane;
  std::string kind;
  std::string summary; // the newest
  int runs = 0;
  int builds = 0; // stage builds it caused, its own included
  double seconds = 0;
};

struct EtaError {
  int stages = 0;          // green stages that had an ETA
  double mean_seconds = 0; // mean of |took - expected|
  double mean_percent = 0; // mean of |took - expected| / expected, in percent
  double worst_seconds = 0;
  std::string worst_stage;
};

/// Every finished run of one records folder, indexed in `<records>/history.db` (SQLite): the
/// run, its stages' durations, attempts and verdicts, cache and compile-cache numbers, resource
/// peaks and, when the logs were analysed, idle tails and clips. Runs are read from their
/// manifest, so any run folder can be indexed, now or later.
class History {
public:
  /// Open (or create) `<records>/history.db`.
  static tl::expected<History, std::string> open(const std::filesystem::path& records);

  History(History&&) noexcept;
  History& operator=(History&&) noexcept;
  ~History();

  /// Index (or index again) the run in `run_dir` from its manifest.json, with the log analysis
  /// (`kiln logs analyze --format json`) when given. A run whose manifest still says `running`
  /// is indexed as `killed`: never green.
  tl::expected<void, std::string> index_run(const std::filesystem::path& run_dir,
                                            const nlohmann::json* analysis = nullptr);

  /// Index every run under `<records>/runs` that is not indexed yet or whose manifest changed
  /// status since (an `abandoned` mark). Runs still `running` are left for later, unless
  /// `running_is_killed` (the caller holds the records lock, so nothing writes them). Returns
  /// how many were indexed.
  int sync(const std::filesystem::path& records, bool running_is_killed = false);

  /// The stage's runs, newest first; `lane` "" with lanes means every lane.
  std::vector<StageRun> stage_runs(const std::string& stage, const std::string& lane,
                                   int limit) const;
  /// Every (stage, lane) the history knows, in first-seen order.
  std::vector<std::pair<std::string, std::string>> stages() const;
  /// The run ids, newest first.
  std::vector<std::string> runs() const;

  /// What took longer than the rule allows in `run_id`, each against at least k_min_baseline
  /// green builds of its kind (build_kind()) in runs before it: a `--no-cache` or cold build is
  /// never judged against builds the cache served.
  std::vector<Regression> regressions(const std::string& run_id, const RegressionRule& rule) const;

  /// What a build of the stage is expected to take: the median of its last green builds of
  /// `kind` (build_kind(); "": of any kind) in runs before `before` ("": all). nullopt when
  /// there is none.
  std::optional<double> expected_seconds(const std::string& stage, const std::string& lane,
                                         const std::string& before = "", int baseline_runs = 10,
                                         const std::string& kind = "") const;

  /// The first causes that cost the most build time over the newest `runs` runs, most first.
  std::vector<CauseCost> top_causes(int runs) const;

  /// How far the ETAs of `run_id`'s green stages were from what they took: each stage's
  /// expected_seconds() before the run against its seconds.
  EtaError eta_error(const std::string& run_id) const;

  /// The rule the newest run judged by (its chain's [history]); the defaults before any run.
  RegressionRule rule() const;
  void set_rule(const RegressionRule& rule);

  /// Whether the stage's newest indexed run before now had a clipped log.
  bool last_run_clipped(const std::string& stage, const std::string& lane) const;

  /// Keep the newest `keep` runs; returns how many were removed. Their folders stay, and
  /// sync() indexes none older than the oldest kept again.
  int prune(int keep);

  /// Forget the runs `run_ids` (their folders are gone: `kiln records prune`); returns how many
  /// the history knew.
  tl::expected<int, std::string> forget(const std::vector<std::string>& run_ids);

private:
  explicit History(sqlite3* db);
  sqlite3* m_db = nullptr;
};

/// "stage lib took 1m 35s, 58% (+35.1s) over the median 1m 0s of its last 10 green builds".
std::string describe_regression(const Regression& r);

/// The median of `values` (0 for none).
double median(std::vector<double> values);

/// The history of `run_dir`'s records folder (`<records>/runs/<id>`) as a report shows it:
/// `{"regressions": [...], "eta_error": {...}}` for that run; nullopt when there is no history.
std::optional<nlohmann::json> run_history_json(const std::filesystem::path& run_dir);

/// `kiln history` in JSON: every stage (or the one asked for) with its runs, median, last and
/// flag.
nlohmann::json history_json(const History& history, const std::string& stage,
                            const std::string& lane, const RegressionRule& rule, int limit);

} // namespace kiln
