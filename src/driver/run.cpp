#include "driver/run.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <deque>
#include <exception>
#include <thread>

#include <fmt/format.h>

#include "disk/policy.h"
#include "driver/build_request.h"
#include "driver/crash.h"
#include "driver/leftovers.h"
#include "driver/publish.h"
#include "driver/run_history.h"
#include "driver/worker_probe.h"
#include "resources/host_stats.h"
#include "util/strings.h"

namespace kiln {

Run::Run(const Chain& chain, const Engine& engine, const RunSeams& seams, const RunOptions& options,
         Console& console, RecordsLock lock, RunFolder folder, RunRecord record)
    : m_chain(chain), m_engine(engine),
      m_clock(seams.clock != nullptr ? *seams.clock : real_clock()), m_options(options),
      m_console(console), m_lock(std::move(lock)), m_folder(std::move(folder)),
      m_events(m_folder.path() / "events.jsonl", m_clock, options.progress_json,
               [this](const std::string& manifest, bool ended) {
                 // Flushed once the run has ended, however it ended; the states between are
                 // atomic, not flushed: an fsync per state costs a cached chain more than its
                 // builds. A failed write is in write_errors().
                 m_folder.write_manifest(manifest,
                                         ended ? Durability::flush : Durability::rename_only);
               }),
      m_seams(seams), m_judge(chain, engine, options.build_arg_overrides, options.no_cache),
      m_record(std::move(record)) {
  // Chain-file classes first: they are the more specific, and name the verdict.
  m_classes = m_chain.transient;
  m_classes.insert(m_classes.end(), builtin_transient_classes().begin(),
                   builtin_transient_classes().end());
}

bool Run::still_wanted(size_t index) const {
  auto active = [&](size_t i) {
    StageState state = m_scheduler->state(i);
    return state == StageState::waiting || state == StageState::running;
  };
  const auto& dependants = m_scheduler->dependants(index);
  return active(index) || std::any_of(dependants.begin(), dependants.end(), active);
}

FloorScope Run::floor_scope() const {
  std::lock_guard lock(m_mutex);
  FloorScope scope;
  std::set<std::string> keep;
  for (size_t i = 0; i < m_stages->size(); ++i) {
    const Stage& stage = *(*m_stages)[i];
    if (still_wanted(i)) {
      scope.protected_slugs.push_back(m_chain.cache_slug(stage).filename().string());
      keep.insert(stage.name);
      keep.insert(stage.needs.begin(), stage.needs.end());
    }
  }
  for (const auto& stage : m_chain.stages) {
    if (keep.count(stage.name) == 0 && work_name_removable(m_chain, stage)) {
      scope.removable_tags.push_back(work_tag(m_chain, stage));
    }
  }
  return scope;
}

namespace {

/// A worker lost this many attempts in a row takes no more stages this run: a daemon that
/// restarts once is back at once, one that keeps dying costs every stage placed on it.
constexpr int k_losses_to_quarantine = 2;

/// Why a stage went where it went: its first choice, or past the better ranked ones that were
/// busy or out of the run.
std::string placement_reason(const Chain& chain, const StageStart& start,
                             const std::vector<int>& ranked) {
  if (start.rank == 0) {
    return "first choice";
  }
  std::vector<std::string> busy;
  std::vector<std::string> out;
  for (int r = 0; r < start.rank && r < static_cast<int>(ranked.size()); ++r) {
    int w = ranked[static_cast<size_t>(r)];
    bool full = std::find(start.busy.begin(), start.busy.end(), w) != start.busy.end();
    (full ? busy : out).push_back(chain.workers[static_cast<size_t>(w)].name);
  }
  std::vector<std::string> parts;
  if (!busy.empty()) {
    parts.push_back(join(busy, ", ") + " busy");
  }
  if (!out.empty()) {
    parts.push_back(join(out, ", ") + " out of the run");
  }
  return fmt::format("choice {}: {}", start.rank + 1, join(parts, "; "));
}

} // namespace

int Run::worker_index(const std::string& name) const {
  const Worker* worker = m_chain.find_worker(name);
  return worker == nullptr ? -1 : static_cast<int>(worker - m_chain.workers.data());
}

Budget Run::place(const StageStart& start, StageRecord& record, BuildRequest& request,
                  const Budget& client) {
  const Worker& worker = m_chain.workers[static_cast<size_t>(start.worker)];
  point_at(request, worker);
  record.worker = worker.name;
  record.worker_rank = start.rank;
  record.placement = placement_reason(m_chain, start, m_scheduler->stages()[start.stage].workers);
  const Stage& stage = *(*m_stages)[start.stage];
  m_folder.log(fmt::format("stage {}: placed on worker {} ({}), {}", stage.name, worker.name,
                           worker.host, record.placement));
  return worker_budget(worker.memory_gb, worker.cores, worker.max_parallel, client,
                       stage.mem_per_job_gb.value_or(m_chain.resources.mem_per_job_gb));
}

bool Run::move_off_worker(StageRecord& record, BuildRequest& request, const std::string& why,
                          int attempt) {
  std::lock_guard lock(m_mutex);
  int lost = worker_index(record.worker);
  if (lost < 0) {
    return false;
  }
  if (++m_worker_losses[static_cast<size_t>(lost)] >= k_losses_to_quarantine &&
      !m_scheduler->worker_is_down(lost)) {
    m_scheduler->worker_down(lost);
    std::string line = fmt::format("worker {} ({}) is out of the run: {} attempts lost on it in "
                                   "a row, the last: {}",
                                   record.worker, m_chain.workers[static_cast<size_t>(lost)].host,
                                   k_losses_to_quarantine, why);
    m_folder.log(line);
    m_console.note("warning: " + line);
  }
  size_t index = 0;
  while (index < m_stages->size() && (*m_stages)[index]->name != record.name) {
    ++index;
  }
  if (index == m_stages->size()) {
    return false;
  }
  std::optional<StageStart> to = m_scheduler->move(index);
  if (!to) {
    return false;
  }
  const Worker& worker = m_chain.workers[static_cast<size_t>(to->worker)];
  record.moves.push_back({record.worker, worker.name, why, attempt});
  point_at(request, worker);
  m_folder.log(fmt::format("stage {}: moved from worker {} to {} ({}) after attempt {}: {}",
                           record.name, record.worker, worker.name, worker.host, attempt, why));
  m_console.note(fmt::format("[{}] moved from worker {} to {}: {}", record.name, record.worker,
                             worker.name, why));
  record.worker = worker.name;
  record.worker_rank = to->rank;
  record.placement = fmt::format("moved from {}", record.moves.back().from);
  return true;
}

void Run::worker_answered(const StageRecord& record) {
  std::lock_guard lock(m_mutex);
  if (int w = worker_index(record.worker); w >= 0) {
    m_worker_losses[static_cast<size_t>(w)] = 0;
  }
}

void Run::update(const StageRecord& record) {
  std::lock_guard lock(m_mutex);
  *m_record.find_stage(record.name) = record;
  save();
}

std::string Run::identity(const std::string& stage) const {
  std::lock_guard lock(m_mutex);
  auto found = m_identities.find(stage);
  return found == m_identities.end() ? std::string() : found->second;
}

void Run::set_identity(const std::string& stage, const std::string& identity) {
  std::lock_guard lock(m_mutex);
  if (identity.empty()) {
    m_identities.erase(stage);
  } else {
    m_identities[stage] = identity;
  }
}

void Run::building(const std::string& stage, bool now) {
  std::lock_guard watch(m_watch_mutex);
  if (now) {
    m_building.insert(stage);
  } else {
    m_building.erase(stage);
  }
  std::string episode = join(std::vector<std::string>(m_building.begin(), m_building.end()), ",");
  if (episode == m_episode) {
    return;
  }
  m_episode = episode;
  for (auto& watchdog : m_watchdogs) {
    if (episode.empty()) {
      watchdog->stop();
    } else {
      watchdog->start(episode, floor_scope().protected_slugs);
    }
  }
}

void Run::set_phase(const std::string& stage, const std::string& phase) {
  if (!m_sampler) {
    return;
  }
  std::lock_guard lock(m_phase_mutex);
  if (phase.empty()) {
    m_phases.erase(stage);
  } else {
    m_phases[stage] = phase;
  }
  std::vector<std::string> phases;
  for (const auto& [name, each] : m_phases) {
    phases.push_back(each);
  }
  // Time with nothing building is no stage's.
  m_sampler->set_phase(phases.empty() ? "idle" : join(phases, "+"));
}

std::string Run::stop_cause() const {
  if (interrupt_signal() != 0) {
    return "interrupted by " + interrupt_signal_name();
  }
  return m_stopped_by_error ? "stopped by an internal error" : "stopped";
}

GateResult Run::preflight_sites() {
  GateResult all;
  if (m_disks.empty() && m_disk.need_gb > 0) {
    const StoreSite& first = m_sites->all().front();
    all.lines.push_back(fmt::format("WARN [disk] preflight skipped: the free space of the {} "
                                    "cannot be measured from this host ({})",
                                    first.levers->label(), first.disk_unknown));
  }
  for (const MeasuredDisk& disk : m_disks) {
    DiskPolicy policy = m_disk;
    policy.path = disk.path;
    GateResult gate = preflight(policy);
    all.lines.insert(all.lines.end(), gate.lines.begin(), gate.lines.end());
    if (!gate.ok) {
      all.ok = false;
      all.message = gate.message;
      break;
    }
  }
  return all;
}

void Run::start_watchdogs() {
  for (const MeasuredDisk& disk : m_disks) {
    DiskPolicy policy = m_disk;
    policy.path = disk.path;
    m_watchdogs.push_back(std::make_unique<DiskWatchdog>(
        policy, [this](const std::string& line) { disk_log(m_folder, m_console, line); },
        disk.levers));
  }
}

void Run::start_sampler() {
  if (m_chain.resources.sample_interval.count() <= 0) {
    return;
  }
  auto interval = m_chain.resources.sample_interval;
  // The first store's disk: where this host's builds write.
  m_sampler = std::make_unique<ResourceSampler>(
      m_folder.path() / "resources.csv", m_disks.empty() ? m_chain.records : m_disks.front().path,
      interval);
  m_sampler->set_phase("init");
  if (auto started = m_sampler->start(); !started) {
    m_folder.log("warning: no resource sampling: " + started.error());
    m_sampler.reset();
  }
}

std::optional<Budget> Run::run_budget() {
  auto mem = read_meminfo();
  if (!mem) {
    m_folder.log(fmt::format("no job budget: {}", mem.error()));
    return std::nullopt;
  }
  Budget budget = job_budget(*mem, online_cores(), m_chain.resources.host_reserve_gb,
                             m_chain.resources.memory_limit_gb, m_chain.resources.mem_per_job_gb,
                             m_options.jobs);
  m_folder.log(
      fmt::format("budget: {}{}", budget.reason, m_options.jobs ? " (--jobs/KILN_JOBS)" : ""));
  return budget;
}

void Run::save() {
  m_record.record_errors = m_folder.write_errors();
  // The record reaches manifest.json only as events: each part that changed since the last
  // save, then the writer folds them. Waited for, so a kill after this leaves it on disk.
  auto changed = [](std::string& saved, const nlohmann::ordered_json& part) {
    std::string text = part.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    if (text == saved) {
      return false;
    }
    saved = std::move(text);
    return true;
  };
  if (auto run = run_part_json(m_record); changed(m_saved_run, run)) {
    m_events.emit(EventType::run_record, {{"record", std::move(run)}});
  }
  for (const StageRecord& stage : m_record.stages) {
    if (auto part = stage_json(stage); changed(m_saved_stages[stage.name], part)) {
      m_events.emit(EventType::stage_record, {{"stage", stage.name}, {"record", std::move(part)}});
    }
  }
  for (const PublishRecord& target : m_record.published) {
    if (auto part = publish_json(target); changed(m_saved_publish[target.ref], part)) {
      m_events.emit(EventType::publish_record, {{"ref", target.ref}, {"record", std::move(part)}});
    }
  }
  m_events.flush();
  // A failed write is in write_errors() and ends the run `record-incomplete`; say so at once,
  // once, on the console.
  if (!m_record_error_shown && !m_folder.write_errors().empty()) {
    m_record_error_shown = true;
    m_console.note("error: the run's record is incomplete: " + m_folder.write_errors().front() +
                   "; the builds go on, the run will not end ok");
  }
}

void Run::stage_ended_event(const StageRecord& record, const std::string& failure) {
  m_events.emit(EventType::stage_ended, {{"stage", record.name},
                                         {"lane", record.lane},
                                         {"status", record.status},
                                         {"outcome", record.outcome},
                                         {"seconds", record.seconds},
                                         {"image", record.image_id},
                                         {"failure", failure}});
}

void Run::run_ended(int exit_code) {
  m_events.emit(EventType::run_ended, {{"status", m_record.status},
                                       {"status_reason", m_record.status_reason},
                                       {"exit_code", exit_code},
                                       {"wall_seconds", m_record.wall_seconds},
                                       {"critical_path", m_record.critical_path},
                                       {"critical_path_seconds", m_record.critical_path_seconds}});
  m_events.flush();
  export_trace();
}

void Run::stage_ended(size_t index, const StageResult& result) {
  const Stage& stage = *(*m_stages)[index];
  StageRecord& record = *m_record.find_stage(stage.name);
  for (const std::string& verdict : result.verdicts) {
    (verdict.starts_with("unverified:") ? m_unverified : m_refused).push_back(verdict);
  }
  record.ended = utc_iso8601(m_clock.wall());
  switch (result.end) {
  case StageEnd::ok: {
    record.status = "ok";
    const AttemptRecord* build = record.attempts.empty() ? nullptr : &record.attempts.back();
    record.outcome = build != nullptr && every_step_cached(*build) ? "reused" : "built";
    break;
  }
  case StageEnd::failed:
    record.status = "failed";
    record.outcome = "failed";
    m_failed.push_back(stage.name);
    break;
  case StageEnd::refused:
    record.status = "refused"; // the run's status names the gate
    record.outcome = "refused";
    break;
  case StageEnd::unverified:
    record.status = "unverified"; // the run's status names the gate
    record.outcome = "unverified";
    break;
  case StageEnd::interrupted:
    record.status = "interrupted";
    record.outcome = "interrupted";
    m_interrupted = true;
    break;
  case StageEnd::crashed: // the error it threw ends the run once every stage has stopped
    record.status = "crashed";
    record.outcome = "crashed";
    break;
  }
  stage_ended_event(record, record.failure);
  m_scheduler->finish(index, result.end == StageEnd::ok);
  record_skipped();
  start_tag_moves();
  save();
}

void Run::record_skipped() {
  for (size_t index : m_scheduler->take_skipped()) {
    const Stage& stage = *(*m_stages)[index];
    StageRecord& record = *m_record.find_stage(stage.name);
    const std::string& because = m_scheduler->skipped_because(index);
    record.status = "skipped";
    record.outcome = "skipped:" + because;
    if (stage.kind == StageKind::smoke) {
      record.gates_not_run.push_back("smoke");
    }
    if (graded_after_build(m_chain, stage)) {
      record.gates_not_run.insert(record.gates_not_run.end(), {"image-env", "residue", "arch"});
    }
    if (!stage.artifacts.empty() || stage.max_layers > 0) {
      record.gates_not_run.push_back("artifacts");
    }
    std::string gates = record.gates_not_run.empty()
                            ? std::string()
                            : "; gates not run: " + join(record.gates_not_run, ", ");
    std::string why;
    switch (m_scheduler->skip_cause(index)) {
    case SkipCause::need_failed:
      why = fmt::format("it needs {}, which did not succeed", because);
      break;
    case SkipCause::fail_fast:
      why = fmt::format("--fail-fast, and stage {} failed", because);
      break;
    case SkipCause::stopped:
      why = "the run stopped before it (" + because + ")";
      break;
    case SkipCause::no_worker:
      why = "no worker of its pool is left in the run";
      m_failed.push_back(stage.name); // it could not be built: the run did not do its job
      break;
    }
    m_folder.log(fmt::format("stage {}: skipped: {}{}", stage.name, why, gates));
    stage_ended_event(record, why);
    // A stopped run says why once, not once per stage.
    if (m_scheduler->skip_cause(index) != SkipCause::stopped) {
      m_console.note(fmt::format("[{}] skipped: {}{}", stage.name, why, gates));
    }
  }
}

void Run::schedule(const std::vector<const Stage*>& stages,
                   const std::vector<BuildRequest>& requests, const Budget& budget) {
  std::vector<PlanStage> plan = plan_stages(stages, &m_chain);
  std::vector<int> worker_slots;
  int pool_slots = 0;
  for (const Worker& worker : m_chain.workers) {
    worker_slots.push_back(worker.max_parallel);
    pool_slots += worker.max_parallel;
  }
  bool pooled = std::any_of(plan.begin(), plan.end(),
                            [](const PlanStage& stage) { return !stage.workers.empty(); });
  // Placed stages are bounded by their workers' max_parallel, not by this host's memory.
  int max_parallel = m_options.parallel.value_or(m_chain.resources.max_parallel.value_or(
      std::max(1, budget.slots) + (pooled ? pool_slots : 0)));
  std::unique_lock lock(m_mutex);
  m_stages = &stages;
  m_record.max_parallel = max_parallel;
  m_scheduler.emplace(std::move(plan),
                      SchedulerLimits{max_parallel, budget.slots, m_options.fail_fast,
                                      m_chain.max_lanes.value_or(0), worker_slots});
  m_worker_losses.assign(m_chain.workers.size(), 0);
  for (const WorkerRecord& worker : m_record.workers) {
    if (!worker.left_out.empty()) {
      m_scheduler->worker_down(worker_index(worker.name));
    }
  }
  m_folder.log(fmt::format("schedule: up to {} stage(s) at once{}, sharing {} slot(s) of {:.1f} "
                           "GB and {} job(s); {}",
                           max_parallel,
                           m_options.parallel               ? " (--parallel)"
                           : m_chain.resources.max_parallel ? " (max_parallel)"
                                                            : " (one per slot the memory holds)",
                           budget.slots, budget.memory_limit_gb, budget.jobs,
                           m_options.fail_fast ? "--fail-fast: the first failure stops "
                                                 "the run starting stages"
                                               : "a failure skips only what needs it"));
  const StageJobContext context{m_chain,
                                m_engine,
                                m_clock,
                                m_folder,
                                m_console,
                                m_events,
                                m_cancel,
                                *m_gates,
                                m_classes,
                                m_disk,
                                *m_sites,
                                m_floors,
                                m_options.no_salvage,
                                m_store_in_use,
                                *this,
                                m_judge};
  struct Ended {
    size_t index;
    StageResult result;
    std::exception_ptr error;
  };
  std::deque<Ended> ended;
  std::map<size_t, std::thread> threads; // by stage, joined as each ends
  std::exception_ptr error;
  bool stopped = false;
  // Whatever escapes the loop (a thread that cannot be created, an allocation) stops every
  // build and waits for the stages' threads before it goes on: they use what is on this stack.
  try {
    while (!m_scheduler->done()) {
      // Ctrl-C, or a second one, reaches every build through the run's token.
      while (m_cancel.level() < interrupt_token().level()) {
        m_cancel.cancel();
        if (m_cancel.level() == CancelLevel::kill) {
          m_folder.log(fmt::format("run {}: a second {}: every build's process group is killed "
                                   "now, without waiting for the engine to clean up",
                                   m_record.run_id, interrupt_signal_name()));
        }
      }
      if (!stopped && (interrupt_signal() != 0 || error)) {
        stopped = true;
        m_interrupted = m_interrupted || interrupt_signal() != 0;
        m_scheduler->stop(error ? "an internal error" : "interrupted");
        record_skipped();
        save();
      }
      for (const StageStart& start : m_scheduler->start_ready()) {
        const Stage& stage = *stages[start.stage];
        // Started here, in run order, not when its thread first runs: stages ready together
        // start in the order the docs promise.
        StageRecord& started = *m_record.find_stage(stage.name);
        started.status = "running";
        started.started = utc_iso8601(m_clock.wall());
        m_events.emit(EventType::stage_started, {{"stage", stage.name}, {"lane", started.lane}});
        auto eta = m_eta.find(stage.name);
        BuildRequest request = requests[start.stage];
        Budget share = start.worker >= 0 ? place(start, started, request, budget)
                                         : budget_share(budget, start.slots, stage.mem_per_job_gb);
        threads[start.stage] = std::thread(
            [this, &context, &ended, &stage, record = started, request = std::move(request),
             share = std::move(share), index = static_cast<int>(start.stage) + 1,
             count = static_cast<int>(stages.size()),
             eta = eta == m_eta.end() ? StageEta{} : eta->second, at = start.stage] {
              Ended end{at, {}, nullptr};
              try {
                end.result =
                    StageJob(context, stage, record, request, share, index, count, eta).run();
              } catch (...) {
                end.error = std::current_exception();
              }
              std::lock_guard held(m_mutex);
              ended.push_back(std::move(end));
              m_stage_ended.notify_all();
            });
      }
      record_skipped(); // a stage no worker is left for is skipped as it would start
      // Woken by a stage that ended; a tenth of a second at most, to notice Ctrl-C.
      m_stage_ended.wait_for(lock, std::chrono::milliseconds(100), [&] { return !ended.empty(); });
      while (!ended.empty()) {
        Ended end = std::move(ended.front());
        ended.pop_front();
        // It handed over its end with its last act: joining it waits for nothing.
        threads[end.index].join();
        threads.erase(end.index);
        if (end.error) {
          error = error ? error : end.error;
          m_stopped_by_error = true;
          m_cancel.cancel(); // the run cannot end well: stop every build now
          end.result.end = StageEnd::crashed;
        }
        stage_ended(end.index, end.result);
      }
    }
  } catch (...) {
    error = error ? error : std::current_exception();
    m_stopped_by_error = true;
    m_cancel.cancel();
    m_scheduler->stop("an internal error");
    record_skipped();
  }
  // The stages still running hand over their ends under the lock: let go of it to join them.
  if (lock.owns_lock()) {
    lock.unlock();
  }
  for (auto& [stage, thread] : threads) {
    thread.join();
  }
  if (error) {
    std::rethrow_exception(error);
  }
}

int Run::run_outcome() {
  if (m_interrupted || interrupt_signal() != 0) {
    m_record.status = "interrupted";
    m_record.status_reason = stop_cause();
    return k_exit_interrupted;
  }
  if (!m_failed.empty()) {
    m_record.status = "failed:" + join(m_failed, ",");
    return k_exit_failed;
  }
  if (!m_unverified.empty()) {
    // Nothing failed, and a gate could not read what it judges: an infrastructure failure, not
    // a verdict on the image (or on a test suite whose log kiln itself cut).
    std::vector<std::string> status = m_unverified;
    status.insert(status.end(), m_refused.begin(), m_refused.end());
    m_record.status = join(status, ",");
    return k_exit_record;
  }
  if (!m_refused.empty()) {
    m_record.status = join(m_refused, ",");
    return k_exit_gate;
  }
  m_record.status = "ok";
  return k_exit_ok;
}

int Run::execute(const std::vector<const Stage*>& stages,
                 const std::vector<BuildRequest>& requests) {
  // An exception escaping one of the run's threads ends in std::terminate; it records here too.
  set_crash_recorder([this](const std::string& reason) { crashed(reason); });
  int exit_code = k_exit_crash;
  try {
    exit_code = execute_stages(stages, requests);
  } catch (const std::exception& error) {
    exit_code = report_crash(error.what());
  } catch (...) {
    exit_code = report_crash("an exception of unknown type");
  }
  set_crash_recorder(nullptr);
  // However it ended: its temporary folder. And what a build kiln stopped (Ctrl-C, a stall or
  // time limit, a crash) may have left in the engine's store: a build that ended by itself
  // removed its own (buildah's --force-rm), and listing the store costs a third of a second.
  bool stopped_a_build =
      m_cancel.cancelled() || interrupt_signal() != 0 || exit_code == k_exit_crash;
  for (const StageRecord& stage : m_record.stages) {
    for (const AttemptRecord& attempt : stage.attempts) {
      stopped_a_build = stopped_a_build || !attempt.stopped_by.empty(); // a stall or time limit
    }
  }
  std::string engine_store = stopped_a_build ? m_engine.name() : std::string();
  for (const auto& line : remove_leftovers(find_leftovers(m_chain, engine_store))) {
    m_folder.log(line);
  }
  keep_records(); // the record is final and indexed: only older runs go
  return exit_code;
}

int Run::crashed(const std::string& reason) {
  // From the main thread once every stage's thread has ended, or from any thread at all when
  // an exception escaped one (std::terminate). The record is taken as the other threads do:
  // held for a copy or a save at a time, so a wait ends soon; unless the crashing thread holds
  // it already, or the thread holding it waits on the one that crashed.
  m_stopped_by_error = true;
  m_cancel.cancel();
  std::unique_lock record(m_mutex, std::defer_lock);
  if (!m_mutex.held_here() && !record.try_lock_for(std::chrono::seconds(10))) {
    m_folder.log(fmt::format("run {}: crashed: {}; its record was held by a thread that did not "
                             "let go of it, so the next run of this checkout marks it abandoned",
                             m_folder.run_id(), reason));
    m_console.note(fmt::format("internal error: {}; the run stopped", reason));
    return k_exit_crash;
  }
  std::string now = utc_iso8601(m_clock.wall());
  m_record.status = "crashed";
  m_record.status_reason = reason;
  m_record.ended = now;
  for (auto& stage : m_record.stages) {
    if (stage.status == "running") {
      stage.status = "crashed";
      stage.ended = now;
    }
    for (auto& attempt : stage.attempts) {
      if (attempt.verdict == "running") {
        attempt.verdict = "crashed";
      }
    }
  }
  m_folder.log(fmt::format("run {}: crashed: {}", m_record.run_id, reason));
  save();
  run_ended(k_exit_crash);
  m_console.note(fmt::format("internal error: {}; the run stopped and its record says so: {}",
                             reason, (m_folder.path() / "manifest.json").string()));
  note_history();
  return k_exit_crash;
}

int Run::execute_stages(const std::vector<const Stage*>& stages,
                        const std::vector<BuildRequest>& requests) {
  RunForecast forecast = forecast_run(m_chain, stages);
  m_eta = std::move(forecast.etas);
  std::chrono::steady_clock::time_point start = m_clock.steady();
  m_folder.log(fmt::format("run {}: chain {} ({}), engine {} {}, host {}, stages: {}",
                           m_record.run_id, m_chain.name, m_chain.file.string(), m_engine.name(),
                           m_record.engine_version, m_record.host, [&] {
                             std::vector<std::string> names;
                             for (const Stage* s : stages) {
                               names.push_back(s->name);
                             }
                             return join(names, ", ");
                           }()));
  {
    std::vector<std::string> selected;
    for (const Stage* s : stages) {
      selected.push_back(s->name);
    }
    m_events.emit(EventType::run_started, {{"run_id", m_record.run_id},
                                           {"chain", m_chain.name},
                                           {"chain_file", m_chain.file.string()},
                                           {"engine", m_engine.name()},
                                           {"engine_version", m_record.engine_version},
                                           {"host", m_record.host},
                                           {"started", m_record.started},
                                           {"stages", selected}});
    for (const Stage* s : stages) {
      const StageRecord& record = *m_record.find_stage(s->name);
      m_events.emit(EventType::stage_queued,
                    {{"stage", s->name}, {"lane", record.lane}, {"needs", record.needs}});
    }
  }
  save(); // the record as it starts: every part of it an event
  m_console.note(fmt::format("run {}: {} stage(s) of chain {} on {} {}", m_record.run_id,
                             stages.size(), m_chain.name, m_engine.name(),
                             m_record.engine_version));
  if (m_engine.name() == "buildkit") {
    m_folder.log(fmt::format("BuildKit keeps at most 1 MiB of a step's output stream, 100 KiB per "
                             "second, unless its daemon says otherwise; kiln warns of any step "
                             "it clips: {}",
                             k_lift_log_limit));
  }
  for (const std::string& line : forecast.warnings) {
    m_folder.log(line);
    m_console.note(line);
  }
  if (m_options.no_cache_export) {
    m_folder.log("--no-cache-export: every registry-facing cache argument is left out; the local "
                 "tier stays");
  }
  m_disk = disk_policy(m_chain);
  m_sites.emplace(m_chain, stages, m_seams.store);
  m_disks = m_sites->measured_disks(m_disk.cache_root);
  for (const auto& line : normalize_policy(m_disk)) {
    disk_log(m_folder, m_console, line);
  }
  if (GateResult gate = preflight_sites(); !gate.ok || !gate.lines.empty()) {
    for (const auto& line : gate.lines) {
      disk_log(m_folder, m_console, line);
    }
    if (!gate.ok) {
      m_record.status = "refused:disk";
      m_folder.log("disk preflight refused the run: " + gate.message);
      m_console.note("error: " + gate.message);
      for (const Stage* stage : stages) {
        m_record.find_stage(stage->name)->status = "skipped";
      }
      m_record.ended = utc_iso8601(m_clock.wall());
      save();
      run_ended(k_exit_usage);
      m_console.summary(m_record, m_folder.path());
      return k_exit_usage;
    }
  }
  std::vector<std::string> names;
  for (const Stage* s : stages) {
    names.push_back(s->name);
  }
  m_gates.emplace(m_chain, m_engine, names, ScanCache(m_chain.records / "scans"));
  // A need this run does not build is the image its last good build left, looked up once: from
  // here on it is named by what it is.
  for (const Stage* stage : stages) {
    for (const auto& need : stage->needs) {
      if (std::find(names.begin(), names.end(), need) == names.end() &&
          m_identities.count(need) == 0) {
        std::string identity =
            m_engine.stage_image_identity(stage_context(m_chain, *m_chain.find_stage(need)));
        if (!identity.empty()) {
          m_identities[need] = identity;
          m_folder.log(fmt::format("stage {}: from an earlier run, image {}", need, identity));
        }
      }
    }
  }
  m_engine.look_ahead();
  start_sampler();
  start_watchdogs();
  std::optional<Budget> budget = run_budget();
  schedule(stages, requests,
           budget.value_or(Budget{0, online_cores(), online_cores(), online_cores(), 0, ""}));
  for (auto& watchdog : m_watchdogs) {
    watchdog->stop();
  }
  move_stable_tags();
  publish_all(stages);
  if (auto kept = m_judge.save(); !kept) {
    m_folder.log("run: the file hashes were not kept (the next run reads every file again): " +
                 kept.error());
  }
  int exit_code = run_outcome();
  finish_sampler();
  if (std::vector<std::string> lost = m_folder.write_errors(); !lost.empty()) {
    // Builds that succeeded with a record that lost writes are not an ok run: what the record
    // misses (a cut log, a stale manifest) is what a reader would trust.
    m_folder.log(fmt::format("run {}: {} write(s) of the record failed, the first: {}",
                             m_record.run_id, lost.size(), lost.front()));
    if (exit_code == k_exit_ok) {
      m_record.status = "record-incomplete";
      m_record.status_reason = lost.front();
      exit_code = k_exit_record;
    }
  }
  m_record.ended = utc_iso8601(m_clock.wall());
  m_record.wall_seconds = seconds_since(start);
  mark_critical_path(m_record);
  m_folder.log(fmt::format("run {}: {} in {:.1f}s; critical path {} ({:.1f}s of builds)",
                           m_record.run_id, m_record.status, m_record.wall_seconds,
                           join(m_record.critical_path, " -> "), m_record.critical_path_seconds));
  save();
  run_ended(exit_code);
  m_console.summary(m_record, m_folder.path());
  note_history();
  return exit_code;
}

} // namespace kiln
