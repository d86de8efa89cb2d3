#pragma once

#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "chain/chain.h"
#include "disk/floor_ledger.h"
#include "disk/guard.h"
#include "disk/store_sites.h"
#include "driver/attempt.h"
#include "driver/attempt_runner.h"
#include "driver/console.h"
#include "driver/events.h"
#include "driver/image_gates.h"
#include "driver/records.h"
#include "driver/run_folder.h"
#include "driver/run_history.h"
#include "engine/engine.h"
#include "explain/rebuild_judge.h"
#include "gates/smoke_floors.h"
#include "resources/budget.h"
#include "util/cancel.h"
#include "util/clock.h"
#include "util/time.h"

namespace kiln {

/// How a stage's job ended. unverified: a gate could not read what it judges (the image, a
/// log kiln cut): nothing says the image is bad, nothing says it is good.
enum class StageEnd { ok, failed, refused, unverified, interrupted, crashed };

/// What a stage's job leaves its run: how it ended, and each gate verdict the run's status
/// names (`refused:smoke:tests`, `unverified:image-env:final`), in the order they were given.
struct StageResult {
  StageEnd end = StageEnd::failed;
  std::vector<std::string> verdicts;
};

/// What a disk floor may not take now, as the run knows it.
struct FloorScope {
  std::vector<std::string> protected_slugs; // the cache slugs of every stage still wanted
  std::vector<std::string> removable_tags;  // this checkout's work names no wanted stage needs
};

/// What a stage's job asks of the run it belongs to: the parts of the run that stage jobs
/// share. Each call is safe from any thread and holds the run's lock only while it copies,
/// never across an engine call.
class StageHost {
public:
  virtual ~StageHost() = default;
  /// The job's record of its stage, into the run's record, saved: events, then the manifest.
  virtual void update(const StageRecord& record) = 0;
  virtual FloorScope floor_scope() const = 0;
  /// The identity of the image this run hands on for `stage` (built by it, or looked up at the
  /// run's start for a need it does not build); empty when there is none.
  virtual std::string identity(const std::string& stage) const = 0;
  /// `identity` names `stage`'s image from now on; empty: it has none (withdrawn).
  virtual void set_identity(const std::string& stage, const std::string& identity) = 0;
  /// `stage` builds from now (`now`), or no longer: the disk watchdog watches while any does.
  virtual void building(const std::string& stage, bool now) = 0;
  /// What `stage` does now as the resource sampler names it; empty when it is done.
  virtual void set_phase(const std::string& stage, const std::string& phase) = 0;
  /// Why the run's builds were told to stop, as a record says it: `interrupted by SIGHUP`.
  virtual std::string stop_cause() const = 0;
  /// The worker `record`'s stage is placed on was lost under attempt `attempt` (`why`): move
  /// the stage to its next worker, pointing `request` there and noting the move in `record`.
  /// False when it has no pool or no other worker is left: it stays, and the attempt counts.
  virtual bool move_off_worker(StageRecord& record, BuildRequest& request, const std::string& why,
                               int attempt) = 0;
  /// An attempt on the stage's worker ended without losing it: its run of losses is over.
  virtual void worker_answered(const StageRecord& record) = 0;
};

/// What every stage job of a run works with: each part either never changes during the run or
/// guards itself (the folder's logs, the console, the events, the cancel token, the gates).
struct StageJobContext {
  const Chain& chain;
  const Engine& engine;
  const Clock& clock;
  RunFolder& folder;
  Console& console;
  EventLog& events;
  /// The run's: Ctrl-C and an internal error reach every build, cooldown and salvage by it.
  const CancelToken& cancel;
  ImageGates& gates;
  const std::vector<TransientClass>& classes; // the chain's, then the built-in ones
  const DiskPolicy& disk;
  const StoreSites& sites;
  FloorLedger& floors;
  bool no_salvage;
  /// Held shared by every stage from its build to its end: an image prune needs the store to
  /// itself, as a prune once took a blob out from under a running build.
  std::shared_mutex& store_in_use;
  StageHost& run;
  RebuildJudge& judge; // each stage's inputs, and why it rebuilt
};

/// One stage of a run, from its disk floor to its last gate, on a thread of its own. It owns
/// its stage's record and hands each change to the run (StageHost::update); it never holds the
/// run's lock, so a build, a gate or a cooldown keeps no other stage waiting.
class StageJob {
public:
  StageJob(const StageJobContext& context, const Stage& stage, StageRecord record,
           BuildRequest request, Budget share, int index, int count, StageEta eta);
  StageJob(const StageJob&) = delete;
  StageJob& operator=(const StageJob&) = delete;

  /// Everything the stage does, once. The record it last handed the run is its record.
  StageResult run();

private:
  /// The disk floor, the parents' gates and the job budget: ok, or how the stage ended
  /// without starting.
  StageEnd before_build();
  /// The disk floor on the store the stage builds into, beside the floors of the stages
  /// building there now: waits for one of them to end when it does not fit beside them, and
  /// reclaims (or refuses) when it does not fit alone.
  StageEnd disk_floor();
  /// The free space the stage needs: its own disk_floor_gb, else the chain's.
  double floor_gb() const;
  /// After a move to another worker: the floor is held on the new worker's store.
  void floor_follows_move();
  /// No new local cache export when the cache root's disk is under the stage's floor.
  void room_for_export();
  /// The oldest cache exports go while they hold more than `[disk] exports_max_gb`, never one
  /// a stage still to run or building uses, nor the newest `keep_slugs`.
  void cap_exports();
  StageEnd build();
  struct Attempts {
    StageEnd end;
    AttemptOutcome outcome; // the last attempt's
  };
  /// Attempts until one succeeds, a verdict refuses another or an interrupt stops it; each
  /// recorded, each failure classified, the cooldowns waited.
  Attempts attempt_until_done();
  /// A new attempt on the record, saved before the engine starts so that a kill leaves it on
  /// disk.
  AttemptRecord& begin_attempt(int number);
  /// One engine invocation for attempt `a`, its output logged in the record, and what its exit
  /// and output said recorded in `a`. Its limits are the stage's time and stall limits.
  AttemptOutcome run_logged(AttemptRecord& a, const ProgressListener& on_progress);
  /// After import flakes of the registry cache, the next attempt leaves the registry out.
  void drop_registry_cache_after_flakes(int import_flakes, int next_attempt);
  /// Grade the parents this run did not build: ok, refused when one is refused, unverified
  /// when one could not be read (the record's failure says which).
  StageEnd parent_gates();
  /// The gates after a successful build: the smoke floors of a smoke stage, the image-env and
  /// residue gates of the final stage and of flagged ones, the artifacts gate of a stage that
  /// lists artifacts. An empty string when every gate passed, else the refusal, recorded as
  /// the stage's failure.
  std::string post_build_gates(const std::filesystem::path& log, const NamedContext& image);
  /// The gates that read the built image's layers (residue, arch, artifacts), in one pass.
  std::string layer_gates(const NamedContext& image);
  /// Read a smoke stage's results from its log and hold them against the floors.
  SmokeVerdict smoke_gate(const std::filesystem::path& log);
  /// Log a gate verdict, and put a refusal on the console.
  void gate_log(const GateRecord& gate);
  /// The share of the budget the stage builds with, logged and recorded; written where the
  /// build can mount it. False, with the record's failure set, when it could not be written.
  bool prepare_budget();
  /// A stage a gate kept from starting: its record and the console line.
  StageEnd not_started(std::string status, StageEnd end);
  /// Take back the image of a stage that built but failed after the build, so no later stage
  /// or run is handed it as good.
  void withdraw(const std::string& why);
  /// The error lines the failed step of a log printed, on the console before its tail.
  void show_failing_step_errors(const std::string& log_path);
  void attempt_ended(const AttemptRecord& a);
  void save() { m_context.run.update(m_record); }
  bool stopping() const;
  double seconds_since(std::chrono::steady_clock::time_point start) const {
    return std::chrono::duration<double>(m_context.clock.steady() - start).count();
  }

  const StageJobContext& m_context;
  const Stage& m_stage;
  StageRecord m_record;
  BuildRequest m_request;
  Budget m_share;
  int m_index;
  int m_count;
  StageEta m_eta;
  std::optional<double> m_eta_seconds; // the ETA of the kind of build its judge expects
  std::vector<std::string> m_verdicts;
  std::optional<StageVerdict> m_inputs; // from its build's start
};

/// A line of a disk verdict to driver.log; a warning or a reclaim to the console too.
void disk_log(RunFolder& folder, Console& console, const std::string& line);

} // namespace kiln
