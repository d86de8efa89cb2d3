#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "chain/chain.h"

namespace kiln {

/// One stage of a run as the scheduler sees it: what it waits for and its claim on the budget.
struct PlanStage {
  std::string name;
  std::vector<size_t> needs; // indices of the stages of this run it builds on
  int weight = 1;            // its claim on the job budget against the stages running with it
  size_t lane = 0;           // stages of one lane share it; 0 without lanes
  /// Its Dockerfile mounts the budget. A stage that does not cannot run more than its own jobs
  /// however many it is given: it holds one slot, the memory of one job, and claims no share.
  bool reads_budget = true;
  /// The workers of the run it may be placed on (indices into the chain's workers), best first;
  /// empty: no pool, it builds on its lane's daemon. A placed stage's budget is its worker's:
  /// it takes no slot of the client's.
  std::vector<int> workers = {};
};

/// The scheduler's view of `stages` (a run's, in run order): each need that the run builds,
/// by index (a need outside them was built by an earlier run), and lanes numbered in order.
std::vector<PlanStage> plan_stages(const std::vector<const Stage*>& stages,
                                   const Chain* chain = nullptr);

enum class StageState { waiting, running, succeeded, failed, skipped };

/// Why a stage was skipped: a stage it needs failed; `fail_fast` stopped the run at another
/// stage's failure; the run stopped starting stages (an interrupt, an internal error);
/// or no worker of its pool is left to build it.
enum class SkipCause { need_failed, fail_fast, stopped, no_worker };

/// A stage to start now, with its share of the budget's slots.
struct StageStart {
  size_t stage = 0;
  int slots = 1;
  int worker = -1;            // where it is placed; -1: no pool
  int rank = -1;              // that worker's place in the stage's ranking, 0 the first
  std::vector<int> busy = {}; // the workers ranked above it, which had no free slot
};

struct SchedulerLimits {
  int max_parallel = 1; // stages building at once
  int slots = 1;        // the budget every running stage shares: how many jobs the memory holds
  bool fail_fast = false;
  int max_lanes = 0;                  // lanes with a stage running at once; 0: no limit
  std::vector<int> worker_slots = {}; // per worker of the chain: its max_parallel
};

/// Which stages of a run start when, like ninja's Plan: a stage starts once every stage it
/// needs succeeded, while fewer than `max_parallel` run and a slot of the budget is free. A
/// failure skips what depends on it, and nothing else (everything still waiting, with
/// `fail_fast`). No threads and no clock: the caller says what ended, this says what starts.
///
/// Shares: a stage that reads the budget takes the free slots in proportion to its weight among
/// the stages that read it, running or ready and let start by max_parallel, after one slot for
/// each of those that do not read it. So a lone stage (or each stage of a run one at a time) gets
/// the whole budget, a fan-out of six splits it six ways, and a stage that only copies files
/// beside a compile leaves the compile all but one slot. A share is never more than what is
/// free, so the shares of the stages running at once never add up to more than the budget; a
/// stage that finds no slot free waits for one, as make's jobserver does.
class Scheduler {
public:
  Scheduler(std::vector<PlanStage> stages, SchedulerLimits limits);

  /// The stages to start now, in plan order, each with its job share; they count as running.
  std::vector<StageStart> start_ready();
  /// A running stage ended. When it failed, the stages that need it, directly or not, are
  /// skipped (with `fail_fast`, every stage still waiting).
  void finish(size_t stage, bool succeeded);
  /// Start nothing more: every waiting stage is skipped (an interrupt, a refused run).
  void stop(const std::string& because);

  /// No stage goes to `worker` any more (unreachable, lost too often). A stage whose workers
  /// are all down is skipped when it would start.
  void worker_down(int worker);
  bool worker_is_down(int worker) const { return m_down[static_cast<size_t>(worker)]; }
  /// Move a running placed stage off its worker (lost under it) to the best-ranked other
  /// worker that is not down, one with a free slot first, else the best-ranked of the rest
  /// even when full (a stage that lost its worker does not wait again). nullopt when no other
  /// worker is left; it stays where it was.
  std::optional<StageStart> move(size_t stage);
  int worker_of(size_t stage) const { return m_worker_of[stage]; }

  /// Nothing runs and nothing more can start.
  bool done() const { return m_running.empty() && m_ready.empty(); }
  size_t running() const { return m_running.size(); }
  int free_slots() const { return m_free_slots; }
  StageState state(size_t stage) const { return m_state[stage]; }
  /// For a skipped stage: the failed stage it needed (or, with fail_fast, the first failure),
  /// or why the run stopped starting stages.
  const std::string& skipped_because(size_t stage) const { return m_because[stage]; }
  SkipCause skip_cause(size_t stage) const { return m_cause[stage]; }
  /// Stages skipped since the last call, in plan order: each to be recorded once.
  std::vector<size_t> take_skipped();
  const std::vector<PlanStage>& stages() const { return m_stages; }
  /// The stages that need `stage`.
  const std::vector<size_t>& dependants(size_t stage) const { return m_dependants[stage]; }

private:
  void skip(size_t stage, const std::string& because, SkipCause cause);
  void skip_waiting(const std::string& because, SkipCause cause);
  void skip_dependants(size_t stage);

  std::vector<PlanStage> m_stages;
  SchedulerLimits m_limits;
  std::vector<std::vector<size_t>> m_dependants;
  std::vector<size_t> m_unmet; // needs not yet succeeded
  std::vector<StageState> m_state;
  std::vector<std::string> m_because;
  std::vector<SkipCause> m_cause;
  std::vector<int> m_slots; // the share each running stage holds
  std::set<size_t> m_ready;
  std::set<size_t> m_running;
  std::vector<int> m_running_in_lane;
  int m_busy_lanes = 0;
  std::vector<size_t> m_skipped;
  int m_free_slots = 1;
  long m_weight_running = 0;    // of the running stages that read the budget
  int m_plain_running = 0;      // running stages that do not read it, one slot each
  std::vector<int> m_on_worker; // running stages per worker
  std::vector<bool> m_down;     // workers no stage goes to
  std::vector<int> m_worker_of; // per stage: its worker while it runs; -1: none
};

} // namespace kiln
