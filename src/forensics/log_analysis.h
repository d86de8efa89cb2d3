#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include "forensics/line_times.h"
#include "forensics/warnings.h"

namespace kiln::forensics {

// `kiln logs analyze`: one pass over the engine logs of a run, in bounded memory, and the JSON
// of /work/notes/analysis-contract.md (docs/forensics.md describes every finding).

struct Options {
  double idle_threshold_seconds = 10; // an idle tail at least this long is listed
  long flood_lines = 10000;           // a step printing more lines than this floods its log
  size_t top = 10;                    // slowest steps listed
  size_t error_lines = 10;            // the first and the last this many error lines of a step
  std::vector<std::string> noise = default_noise_classes();
  std::vector<std::string> signal = default_signal_classes();
};

struct CompileCounts {
  long requests = 0;
  long hits = 0;
  long misses = 0;
  std::string source; // sccache-text, sccache-json, ccache, kiln-cc
};

enum class StepState { running, done, cached, error, canceled };
const char* state_name(StepState state);

struct StepResult {
  std::string id;               // "#6", "STEP 3/5", "[2/2] STEP 1/2"
  std::string name;             // one line, at most 200 bytes
  std::string stage;            // Dockerfile stage, "" when unknown
  bool dockerfile_step = false; // a Dockerfile instruction (not BuildKit's own work)
  bool cached = false;
  StepState state = StepState::running;
  std::optional<int> exit_code;
  std::optional<double> start, end, seconds, idle_tail_seconds;
  long output_lines = 0;
  long replayed_lines = 0;
  bool clipped = false;
  std::optional<CompileCounts> compile;
  long compiler_invocations = 0;
  bool compile_bypass = false;
  WarningCounts warnings;
  bool flood = false;
  long fetches_without_progress = 0;
  std::vector<std::string> errors; // of a failed step: first and last Options::error_lines
  long error_lines_total = 0;
  bool errors_from_tail = false; // no error line matched: the step's last lines instead
  std::optional<long> jobs;      // the largest -j / --parallel seen
};

struct ClipEvent {
  std::string id;
  std::string line;
};

struct LogResult {
  std::string path; // relative to the run folder, or as given
  std::string stage, lane;
  int attempt = 0;
  std::string format = "unknown"; // buildkit, buildah, unknown
  bool timed = false;
  bool line_times = false; // a .times sidecar was read
  long lines = 0;
  uint64_t bytes = 0;
  bool clipped = false;
  bool failed = false; // the engine said the build failed
  std::vector<StepResult> steps;
  std::vector<ClipEvent> clips;
};

/// Feeds one attempt log through in chunks of any size; keeps counters and small bounded
/// buffers, never a step's output.
class LogAnalyzer {
public:
  explicit LogAnalyzer(const Options& options, LineClock clock = {});
  ~LogAnalyzer();
  LogAnalyzer(const LogAnalyzer&) = delete;
  LogAnalyzer& operator=(const LogAnalyzer&) = delete;

  void feed(std::string_view chunk);
  /// Ends the log (a last line without a newline counts) and returns what it held.
  LogResult finish();

private:
  // Reads with a thread that also finds the line ends (see the .cpp).
  friend tl::expected<LogResult, std::string> analyze_log_file(const std::filesystem::path& path,
                                                               const std::string& shown,
                                                               const Options& options);
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// `stages/[<lane>/]<stage>.attempt-<n>.log` (or a bare `<stage>.attempt-<n>.log`): fills
/// stage, lane and attempt; false for another name.
bool parse_log_name(const std::filesystem::path& relative, std::string& stage, std::string& lane,
                    int& attempt);

/// One log file and its `.times` sidecar when there is one. `shown` is the path put in the
/// result.
tl::expected<LogResult, std::string> analyze_log_file(const std::filesystem::path& path,
                                                      const std::string& shown,
                                                      const Options& options);

struct StageSummary {
  std::string stage, lane;
  int attempts = 0;
  long steps = 0;        // Dockerfile steps, every attempt's
  long steps_cached = 0; // of those, served from the cache
  double step_seconds = 0;
  double idle_tail_seconds = 0;
  long idle_tail_steps = 0; // steps whose idle tail reached the threshold
  std::optional<CompileCounts> compile;
  long compile_bypass_steps = 0;
  long warnings = 0;
  long signal_warnings = 0;
  bool clipped = false;
  long fetches_without_progress = 0;
  std::optional<long> jobs_seen;  // the largest -j / --parallel of its steps, every attempt's
  std::optional<long> jobs_share; // the jobs its run's budget offered it (the manifest's `jobs`)
  bool over_share = false;        // it ran more jobs than its share: the budget did not bind it
};

struct RetryFinding {
  std::string stage, lane;
  std::string kind; // retry, downgrade, repeated-failure
  std::string detail;
  int from_attempt = 0, to_attempt = 0;
  std::optional<long> jobs_from, jobs_to; // a downgrade's
};

/// A publish target the run's record says failed or was blocked: its error is the record's, the
/// log (skopeo's and the gates' lines) no engine's.
struct PublishFailure {
  std::string ref;
  std::string status; // failed | blocked
  std::string failure;
  std::string log; // relative to the run folder; "" when it got no log
};

struct RunAnalysis {
  std::optional<std::string> run_id;
  Options options;
  std::vector<LogResult> logs;
  std::vector<PublishFailure> publish_failures; // read from a run folder's manifest
  /// The jobs the run's budget offered each stage, by its manifest name (`<lane>/<stage>` in a
  /// run with lanes), read from a run folder's manifest.
  std::map<std::string, long> job_shares;
  // What summarize() finds across the logs:
  std::vector<StageSummary> stages;
  std::vector<RetryFinding> retries;
};

/// Fills the stage totals and the findings across attempts.
void summarize(RunAnalysis& run);

/// What `target` names: a log file, a run folder (one holding `stages/`), or a run id (or
/// `latest`) under `records`. Every `.attempt-N.log` of a run, in lane, stage and attempt
/// order, and the publish targets its manifest says failed. An error names the path tried and
/// what to do.
tl::expected<RunAnalysis, std::string> analyze_target(const std::string& target,
                                                      const std::filesystem::path& records,
                                                      const Options& options);

/// The contract's JSON.
nlohmann::json to_json(const RunAnalysis& run);

/// What a person reads: per log a step table, then the findings.
std::string format_tty(const RunAnalysis& run);

} // namespace kiln::forensics
