#pragma once

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "chain/chain.h"
#include "disk/floor_ledger.h"
#include "disk/guard.h"
#include "disk/store_sites.h"
#include "disk/watchdog.h"
#include "driver/console.h"
#include "driver/events.h"
#include "driver/image_gates.h"
#include "driver/records.h"
#include "driver/records_lock.h"
#include "driver/run_folder.h"
#include "driver/run_history.h"
#include "driver/run_loop.h"
#include "driver/scheduler.h"
#include "driver/stage_job.h"
#include "engine/engine.h"
#include "explain/rebuild_judge.h"
#include "resources/budget.h"
#include "resources/sampler.h"
#include "util/cancel.h"
#include "util/clock.h"
#include "util/owned_mutex.h"
#include "util/time.h"

namespace kiln {

/// One run of a chain: the scheduler's loop on the calling thread, a StageJob per stage on a
/// thread of its own, the run's record (guarded by m_mutex, never held across an engine call)
/// and the events that carry it to disk. run.cpp starts stages and records how they end;
/// run_finish.cpp does what follows the last stage: stable tags, publish, history, trace.
class Run final : private StageHost {
public:
  Run(const Chain& chain, const Engine& engine, const RunSeams& seams, const RunOptions& options,
      Console& console, RecordsLock lock, RunFolder folder, RunRecord record);

  /// Build `stages` in order, each with its request (the same index). Whatever escapes (an
  /// internal error, an allocation that failed) ends the run `crashed`, recorded, never lost.
  int execute(const std::vector<const Stage*>& stages, const std::vector<BuildRequest>& requests);

private:
  int execute_stages(const std::vector<const Stage*>& stages,
                     const std::vector<BuildRequest>& requests);
  /// Start what the scheduler says may start, wait for a stage to end, repeat. The loop holds
  /// m_mutex except while it waits; a stage's job takes it only to hand over its record.
  /// The disk preflight on each of m_disks.
  GateResult preflight_sites();
  /// A disk watchdog per m_disks.
  void start_watchdogs();
  void schedule(const std::vector<const Stage*>& stages, const std::vector<BuildRequest>& requests,
                const Budget& budget);
  /// Point `request` at the worker the scheduler placed `start` on, say why in `record`, and
  /// return the stage's budget on that worker. m_mutex held.
  Budget place(const StageStart& start, StageRecord& record, BuildRequest& request,
               const Budget& client);
  /// The position of worker `name` in the chain's workers.
  int worker_index(const std::string& name) const;
  bool move_off_worker(StageRecord& record, BuildRequest& request, const std::string& why,
                       int attempt) override;
  void worker_answered(const StageRecord& record) override;
  /// Record how stage `index` ended and what the run's status must say of it. m_mutex held.
  void stage_ended(size_t index, const StageResult& result);
  /// Record the stages the scheduler skipped since the last call. m_mutex held.
  void record_skipped();
  /// The run's status and exit code from how its stages ended.
  int run_outcome();
  /// End the run `crashed` after `reason` escaped the run loop or one of its threads.
  int crashed(const std::string& reason);
  /// Send the parts of the record that changed as events and wait for the writer to fold them
  /// into manifest.json. m_mutex held (the crash path's too), or the stages' threads ended.
  void save();
  /// How a stage ended, as its stage.ended event: built, failed or skipped (`failure` says why).
  void stage_ended_event(const StageRecord& record, const std::string& failure);
  /// The end of the run, as its last event; then its spans to the OTLP endpoint, if any.
  void run_ended(int exit_code);
  double seconds_since(std::chrono::steady_clock::time_point start) const {
    return std::chrono::duration<double>(m_clock.steady() - start).count();
  }
  /// Whether stage `index` of the run is still wanted: waiting or running, or needed by a
  /// stage that is. m_mutex held.
  bool still_wanted(size_t index) const;
  /// After every preflight gate: a refused launch leaves no sampler behind.
  void start_sampler();
  /// The job budget the running stages share: the memory-bounded budget of the host.
  std::optional<Budget> run_budget();

  // Stable names (run_finish.cpp).
  /// Whether `stage` has a stable name that has not started moving, ended ok and has an image
  /// in this run. m_mutex held.
  bool has_name_to_move(const Stage& stage) const;
  /// Start moving the stable name of each stage that may move now: it ended ok, every smoke
  /// stage that guards it passed, the run was not interrupted. Later stages build meanwhile.
  /// m_mutex held.
  void start_tag_moves();
  /// Point `stage`'s stable name at `identity` and record how that went. On a thread of its own.
  void move_tag(const Stage& stage, const std::string& identity);
  /// The smoke stages that guard `stage` and did not pass in this run, each with where it stands.
  /// m_mutex held.
  std::vector<std::string> guards_not_passed(const Stage& stage) const;
  /// After the last stage: wait for the moves started, and say in each other ok stage's record
  /// why its stable name stays where it was.
  void move_stable_tags();

  // What follows the last stage (run_finish.cpp).
  /// Publish what the chain publishes (publish.h), each target as one transaction, when this
  /// run built its final stage.
  void publish_all(const std::vector<const Stage*>& stages);
  /// Stop sampling and summarise it per phase, on every way out of a run.
  void finish_sampler();
  /// Index the finished run in the run history and say which stages took longer than usual.
  void note_history();
  /// With `[records] keep`, remove all but the newest run folders and their history rows; under
  /// the run's own records lock, so no other run is live.
  void keep_records();
  /// Send the run's spans to `[trace] otlp_endpoint` (or OTEL_EXPORTER_OTLP_ENDPOINT): a
  /// failure is a warning, never the run's.
  void export_trace();

  // StageHost: what the stages' jobs share, each call safe from their threads.
  void update(const StageRecord& record) override;
  FloorScope floor_scope() const override;
  std::string identity(const std::string& stage) const override;
  void set_identity(const std::string& stage, const std::string& identity) override;
  void building(const std::string& stage, bool now) override;
  void set_phase(const std::string& stage, const std::string& phase) override;
  std::string stop_cause() const override;

  const Chain& m_chain;
  const Engine& m_engine;
  const Clock& m_clock;
  const RunOptions& m_options;
  Console& m_console;
  std::vector<TransientClass> m_classes;
  RecordsLock m_lock;
  RunFolder m_folder;
  EventLog m_events; // the run as typed events: events.jsonl, and --progress=json
  std::map<std::string, StageEta> m_eta;
  std::unique_ptr<ResourceSampler> m_sampler;
  DiskPolicy m_disk;
  std::optional<StoreSites> m_sites; // the stores the stages build into, each measured where it is
  std::vector<MeasuredDisk> m_disks; // m_sites->measured_disks(), found once
  FloorLedger m_floors;
  std::optional<ImageGates> m_gates;
  RunSeams m_seams;
  RebuildJudge m_judge; // StageJobContext::judge
  /// Every build and cooldown of the run watches this one: Ctrl-C reaches it from the
  /// interrupt token, and an internal error stops every stage with it.
  CancelToken m_cancel;
  std::atomic<bool> m_stopped_by_error{false}; // an internal error cancelled m_cancel
  std::shared_mutex m_store_in_use;            // StageJobContext::store_in_use

  /// Guards everything below it: the record, the scheduler and what the run's status is made
  /// of. Held for as long as a copy or a save takes, never across an engine call.
  mutable OwnedMutex m_mutex;
  std::condition_variable_any m_stage_ended;
  RunRecord m_record;
  bool m_record_error_shown = false;
  // What the last save() sent of each part of the record, as JSON text: only a change is sent.
  std::string m_saved_run;
  std::map<std::string, std::string> m_saved_stages;
  std::map<std::string, std::string> m_saved_publish;
  const std::vector<const Stage*>* m_stages = nullptr;
  std::optional<Scheduler> m_scheduler;
  std::vector<std::string> m_failed;     // stages that failed, in the order they ended
  std::vector<std::string> m_refused;    // the run statuses of the gates that refused
  std::vector<std::string> m_unverified; // `unverified:<gate>:<stage>` of gates that could not read
  /// The identity of each stage's image this run uses: built by it, or looked up once at its
  /// start for a need it does not build. Every handoff, gate and publish names it.
  std::map<std::string, std::string> m_identities;
  /// Per worker of the chain: attempts lost on it in a row. At k_losses_to_quarantine it takes
  /// no more stages this run.
  std::vector<int> m_worker_losses;
  bool m_interrupted = false;

  /// Guards the disk watchdogs' episode: the stages building now. Taken before m_mutex, never
  /// while it is held.
  std::mutex m_watch_mutex;
  std::set<std::string> m_building;
  std::string m_episode;
  /// One per filesystem the stores are measured on, with the levers of the first store there.
  std::vector<std::unique_ptr<DiskWatchdog>> m_watchdogs;

  std::mutex m_phase_mutex; // the sampler's phase: set from the builds' progress
  std::map<std::string, std::string> m_phases;

  /// The stable-name moves started, by stage (start_tag_moves, under m_mutex). Declared last:
  /// destroying it waits for the moves, which use everything above.
  std::map<std::string, std::future<void>> m_tag_moves;
};

} // namespace kiln
