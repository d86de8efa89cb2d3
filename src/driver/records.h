#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include "compilecache/stats_line.h"
#include "resources/sampler.h"
#include "util/time.h"

namespace kiln {

/// The manifest schema version; bump it on any change a reader could notice (docs/records.md).
constexpr int k_manifest_schema = 12;

/// A manifest is a few hundred KB at most; a larger file in its place is not one.
constexpr uint64_t k_manifest_read_limit = uint64_t{64} << 20;

/// What the kiln-cc steps of one attempt reported, summed over the steps that reported.
struct CompileReport {
  cc::CompileStats totals; // its `sccache` state unused: the steps' states are counted below
  int reports = 0;         // how many `[kiln-cc:stats]` lines were seen
  int sccache_lost = 0;    // steps whose sccache server was gone before they reported
  int sccache_failed = 0;  // steps whose sccache server did not start
  int sccache_absent = 0;  // steps with no sccache at all

  void add(const cc::CompileStats& stats);
};

struct AttemptRecord {
  int number = 0;
  std::string started; // UTC ISO-8601
  double seconds = 0;
  int exit_code = -1; // the engine's status (128 + signal when killed); -1 while running or
                      // when it never started
  std::string verdict = "running"; // running | ok | retry | permanent | refused-identical |
                                   // exhausted | interrupted | abandoned
  std::string transient_class;
  std::string matched_line;
  std::string reason;
  std::string log; // relative to the run folder
  /// Where the log was cut because a write of the record failed (a full disk); nullopt: whole.
  std::optional<uint64_t> log_truncated_at_byte;
  /// The engine's own notes that it dropped output of a step (BuildKit's step log limit), as
  /// printed; empty when it dropped none. Such a log misses lines for good.
  std::vector<std::string> clip_lines;
  std::string command; // the engine argv of this attempt, shell-quoted
  /// What stopped it before it ended on its own: "stall" (no output for the stage's
  /// stall_timeout_s) or "timeout" (its timeout_s), with the last line it printed and how long
  /// it had been silent then; "" when it ended on its own.
  std::string stopped_by;
  std::string last_line;
  double silent_seconds = 0;
  /// Registry-facing cache arguments were left out (after import flakes, or asked for).
  bool registry_cache_dropped = false;
  int steps_run = 0;
  int steps_cached = 0;
  int vertices = 0; // every operation the engine reported (BuildKit); 0 for buildah
  int vertices_cached = 0;
  std::optional<CompileReport> compile; // absent when no step reported
};

/// The attempt ran steps and the layer cache served every one.
inline bool every_step_cached(const AttemptRecord& a) {
  return a.steps_run > 0 && a.steps_cached == a.steps_run;
}

/// One re-drive of a failed stage's Dockerfile up to a named target, to land its cache export.
struct SalvageRecord {
  std::string target;
  std::string verdict; // ok | failed | timed-out | interrupted
  double seconds = 0;
  std::string log; // relative to the run folder
};

/// One image graded by the image-env publish gate.
struct GateRecord {
  std::string gate = "image-env";    // image-env | residue | artifacts | arch
  std::string subject;               // what was graded: "parent <ref>", "image of stage <name>"
  std::string verdict;               // pass | refused | unreadable | not-graded
  std::vector<std::string> findings; // one message per refused variable
  std::string reason;                // why it was unreadable or not graded
  std::vector<std::string> warnings; // what a reader should know that refuses nothing
  bool remembered = false; // the verdict came from a scan of the same image by an earlier run
};

/// What a smoke stage's output reported, against the chain's floors.
struct SmokeRecord {
  int passed = 0;
  int failed = 0;
  int skipped = 0;
  int min_passed = 0;
  int max_skipped = 0;
  std::vector<std::string> summaries; // "<format> line <n>: <text>", each summary found
  std::string verdict;                // pass | failed
  std::string reason;                 // which floor, when it failed
};

/// A placed stage moved off a worker lost under it.
struct WorkerMove {
  std::string from;
  std::string to;
  std::string why; // the lost attempt's class and line
  int attempt = 0; // the attempt that lost it
};

/// A worker of the run's pools, as the run found it at its start.
struct WorkerRecord {
  std::string name;
  std::string host;
  std::string version;  // what answered; "" when nothing did
  std::string left_out; // why no stage went to it; "" when it took part
};

struct StageRecord {
  std::string name;     // with lanes, `<lane>/<stage>`
  std::string lane;     // "" without lanes
  std::string tag;      // its stable name
  std::string work_tag; // the name kiln builds it under (build_request.h's work_tag)
  /// Whether the stable name moved to this run's image (buildah), or why not; both empty for an
  /// engine with no local names or a stage that did not end ok.
  bool tag_moved = false;
  std::string tag_held;
  std::string status = "pending"; // pending | running | ok | failed | refused | unverified |
                                  // interrupted | skipped | abandoned (refused: a gate stopped
                                  // it; unverified: a gate could not read what it judges)
  /// How it ended, for a reader of a run that kept going: built | reused (every step cached) |
  /// failed | refused | interrupted | skipped:<the failed stage it needed, or why the run
  /// stopped>; "" until it ended.
  std::string outcome;
  std::vector<std::string> gates_not_run; // the gates a skipped stage would have run
  std::vector<std::string> needs;         // the stages of this run it built on
  std::string command;                    // the engine argv, shell-quoted
  std::string started;
  std::string ended;
  double seconds = 0;
  std::string image_id;
  std::string failure; // why the stage failed: the last attempt's reason or a gate's
  int min_compile_requests = 0;
  std::string compile_floor; // how the floor was met, or why not; "" without a floor
  std::vector<AttemptRecord> attempts;
  int jobs = 0; // the job budget the build was offered; 0 before it was sized
  double memory_limit_gb = 0;
  std::vector<SalvageRecord> salvage; // re-drives after a failure, so the cache export lands
  std::string salvage_note;           // why there was no salvage, when there was none
  std::vector<GateRecord> gates;      // image-env verdicts on its parents and its own image
  std::optional<SmokeRecord> smoke;   // smoke stages, once their output was read
  /// Placed stages (a lane or chain with workers): the worker it built on, last, its place in
  /// the stage's ranking (0 first), why there, and every move off a lost worker.
  std::string worker;
  int worker_rank = -1;
  std::string placement;
  std::vector<WorkerMove> moves;
  /// Why a stage that built was not served from the engine's cache (explain/cause.h's Cause,
  /// docs/explain.md); null for any other outcome.
  nlohmann::json cause;
};

/// One image of a publish, as its gates and its push saw it.
struct IndexLaneRecord {
  std::string lane; // "" without lanes
  std::string stage;
  std::string platform;
  std::string image;       // built-this-run | missing
  std::string identity;    // the image the gates read: buildah's id, BuildKit's digest
  std::string digest;      // its manifest's digest as pushed, once staged
  std::string attestation; // the digest of its attestation manifest (provenance and SBOM)
  int packages = -1;       // how many packages its SBOM lists; -1 before it was written
  std::string detail;      // why it is missing
};

/// What a run published, or why it did not: the lanes' final images as one index (`[publish]
/// index`), or a lane's final image in the chain's registry.
struct PublishRecord {
  std::string ref;
  std::string status;  // published | held | blocked | failed | interrupted
  std::string started; // UTC ISO-8601, when its gates began; "" when it was not attempted
  double seconds = 0;  // from its gates' start to its end
  std::string digest;  // the pushed index's
  std::string failure;
  std::vector<IndexLaneRecord> lanes;
  std::vector<GateRecord> gates;          // completeness, smoke, coherence; up to a refusal
  std::vector<std::string> done;          // the steps that ran: push, read-back, sign, tag
  std::vector<std::string> gates_not_run; // what a refusal or a failure kept from running
  int attempts = 0;                       // of the push and what follows it
  std::string log;                        // relative to the run folder
};

struct RunRecord {
  std::string run_id;
  std::string chain_name;
  std::string chain_file;
  std::string engine;
  std::string engine_version;
  std::string host;
  int pid = 0; // kiln's own, while it runs
  std::string started;
  std::string ended;
  std::string status = "running"; // running | ok | failed:<stage>[,<stage>...] |
                                  // refused:<gate>:<stage>[,...] | unverified:<gate>:<stage> |
                                  // interrupted | refused:disk | record-incomplete | crashed |
                                  // abandoned
  std::string status_reason;      // why it crashed, was abandoned or was interrupted (which signal)
  std::vector<std::string> record_errors; // writes of this record that failed, first first
  std::vector<StageRecord> stages;
  std::vector<PhaseSummary> resources; // the sampler's summary per phase, once the run ended
  std::vector<WorkerRecord> workers;   // its pools' workers; none without pools
  int max_parallel = 0;                // stages it let build at once
  double wall_seconds = 0;             // from its start to its end, once it ended
  /// The chain of needs whose build times add up to the most: no schedule could have ended
  /// the run sooner than their sum.
  std::vector<std::string> critical_path;
  double critical_path_seconds = 0;
  /// What the chain publishes, once per reference, when the run built its final stage.
  std::vector<PublishRecord> published;

  StageRecord* find_stage(const std::string& name);
  const StageRecord* find_stage(const std::string& name) const;
};

std::string manifest_json(const RunRecord& run);

/// The manifest in its three parts, as record events carry them (docs/events.md): the run's own
/// fields (every top-level field but `stages` and `publish`), one object per stage, one per
/// publish target. manifest_text() puts them together: manifest_json() is
/// manifest_text(run_part_json(run), the stages' stage_json(), the targets' publish_json()).
nlohmann::ordered_json run_part_json(const RunRecord& run);
nlohmann::ordered_json stage_json(const StageRecord& stage);
nlohmann::ordered_json publish_json(const PublishRecord& target);
std::string manifest_text(const nlohmann::ordered_json& run,
                          const std::vector<nlohmann::ordered_json>& stages,
                          const std::vector<nlohmann::ordered_json>& publish);

/// Set the run's critical path from its stages' needs and build times. Stages must be in run
/// order (every stage after those it needs), as a run records them.
void mark_critical_path(RunRecord& run);

/// A stage's newest successful build in an earlier run.
struct LastOk {
  std::string run_id;
  double seconds = 0; // how long it took: the next build's ETA
  std::string image_id;
};

/// For each stage, its newest successful build. Reads only the most recent manifests, so a
/// long history costs nothing.
std::map<std::string, LastOk> last_ok_builds(const std::filesystem::path& records);

} // namespace kiln
