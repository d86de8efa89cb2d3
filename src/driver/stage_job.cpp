#include "driver/stage_job.h"

#include <mutex>

#include <fmt/format.h>

#include "disk/slugs.h"
#include "driver/build_request.h"
#include "driver/compile_fallback.h"
#include "driver/compile_floor.h"
#include "driver/run_history.h"
#include "driver/salvage.h"
#include "driver/shown_command.h"
#include "forensics/history.h"
#include "forensics/log_analysis.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kiln {

namespace {

/// The step a build was at, as the console names it: `stage 2/3 step 4/5: RUN make`.
std::string step_name(const BuildProgress& progress) {
  if (progress.steps == 0) {
    return "its start, before any step";
  }
  std::string name = progress.build_stages > 0
                         ? fmt::format("stage {}/{} ", progress.build_stage, progress.build_stages)
                         : std::string();
  name += fmt::format("step {}/{}", progress.step, progress.steps);
  if (!progress.instruction.empty()) {
    name += ": " + printable(progress.instruction.substr(0, 200));
  }
  return name;
}

/// The sampler's phase: the chain's stage, and the Dockerfile stage when the engine says.
std::string phase_name(const Stage& stage, const BuildProgress& progress) {
  if (!progress.build_stage_name.empty()) {
    return stage.name + ":" + progress.build_stage_name;
  }
  if (progress.build_stages > 0) {
    return fmt::format("{}:stage {}/{}", stage.name, progress.build_stage, progress.build_stages);
  }
  return stage.name;
}

bool has_registry_cache(const BuildRequest& request) {
  return !request.cache_from.empty() || !request.cache_to.empty();
}

/// While it lives, its stage counts as building: the disk watchdog watches, and an image
/// prune waits for the store to be free.
class Building {
public:
  Building(const StageJobContext& context, const std::string& stage)
      : m_context(context), m_stage(stage), m_store(context.store_in_use) {
    m_context.run.building(m_stage, true);
  }
  ~Building() { m_context.run.building(m_stage, false); }
  Building(const Building&) = delete;
  Building& operator=(const Building&) = delete;

private:
  const StageJobContext& m_context;
  const std::string& m_stage;
  std::shared_lock<std::shared_mutex> m_store;
};

} // namespace

void disk_log(RunFolder& folder, Console& console, const std::string& line) {
  folder.log(line);
  if (line.find("[disk-reclaim]") != std::string::npos || line.find("WARN") != std::string::npos) {
    console.note(line);
  }
}

StageJob::StageJob(const StageJobContext& context, const Stage& stage, StageRecord record,
                   BuildRequest request, Budget share, int index, int count, StageEta eta)
    : m_context(context), m_stage(stage), m_record(std::move(record)),
      m_request(std::move(request)), m_share(std::move(share)), m_index(index), m_count(count),
      m_eta(std::move(eta)), m_eta_seconds(m_eta.any) {}

StageResult StageJob::run() {
  m_context.run.set_phase(m_stage.name, m_stage.name);
  StageEnd end = before_build();
  if (end == StageEnd::ok) {
    Building building(m_context, m_stage.name);
    end = build();
  }
  m_context.run.set_phase(m_stage.name, "");
  if (m_inputs && end != StageEnd::ok) {
    m_context.judge.ended_otherwise(*m_inputs, m_context.folder.path());
  }
  m_context.floors.release(m_stage.name);
  cap_exports();
  save();
  return {end, m_verdicts};
}

bool StageJob::stopping() const {
  return interrupt_signal() != 0 || m_context.cancel.cancelled();
}

double StageJob::floor_gb() const {
  return m_stage.disk_floor_gb.value_or(m_context.chain.disk.floor_gb);
}

StageEnd StageJob::disk_floor() {
  double floor = floor_gb();
  if (floor <= 0) {
    return StageEnd::ok;
  }
  // The store this stage's build writes into, measured where it is, not the client's disk.
  const StoreSite& site = m_context.sites.at(m_request.host);
  std::string store = site.levers->label();
  if (site.disk.empty()) {
    disk_log(m_context.folder, m_context.console,
             fmt::format("WARN [disk] stage {}: floor not checked: the free space of the {} cannot "
                         "be measured from this host ({})",
                         m_stage.name, store, site.disk_unknown));
    return StageEnd::ok;
  }
  bool said_held = false;
  for (;;) {
    FloorLedger::Claim claim = m_context.floors.claim(site.disk, m_stage.name, floor);
    if (!claim.error.empty()) {
      disk_log(
          m_context.folder, m_context.console,
          fmt::format("WARN [disk] stage {}: floor check skipped: {}", m_stage.name, claim.error));
      return StageEnd::ok;
    }
    std::string beside = claim.holders.empty()
                             ? std::string()
                             : fmt::format(" beside the {}G held by {} building there",
                                           gib_text(claim.others_gb), join(claim.holders, ", "));
    if (claim.fits) {
      m_context.folder.log(fmt::format("[disk] stage {}: {}G free on {} ({}), floor {}G{}",
                                       m_stage.name, gib_text(claim.free), site.disk.string(),
                                       store, gib_text(floor), beside));
      return StageEnd::ok;
    }
    if (!claim.held) {
      // Room another stage may still fill is no room: wait for one of them to end.
      if (!said_held) {
        std::string line = fmt::format(
            "[disk] stage {}: held back: {}G free on {} ({}) does not cover its floor {}G{}; it "
            "starts when one of them ends",
            m_stage.name, gib_text(claim.free), site.disk.string(), store, gib_text(floor), beside);
        m_context.folder.log(line);
        m_context.console.note(line);
        said_held = true;
      }
      if (stopping()) {
        m_record.failure = m_context.run.stop_cause() + " before it started";
        return not_started("interrupted", StageEnd::interrupted);
      }
      m_context.floors.wait_for_release(std::chrono::seconds(1));
      continue;
    }
    // Alone on that store and short: reclaim there, images only while no stage builds.
    std::unique_lock alone(m_context.store_in_use, std::try_to_lock);
    FloorScope scope = m_context.run.floor_scope();
    DiskPolicy policy = m_context.disk;
    policy.path = site.disk;
    GateResult gate = stage_floor(policy, m_stage.name, floor, scope.protected_slugs, site.levers,
                                  scope.removable_tags, alone.owns_lock());
    for (const auto& line : gate.lines) {
      disk_log(m_context.folder, m_context.console, line);
    }
    if (!gate.ok) {
      m_context.floors.release(m_stage.name);
      m_record.failure = gate.message;
      m_context.folder.log(
          fmt::format("stage {}: disk floor refused it: {}", m_stage.name, gate.message));
      return not_started("failed", StageEnd::failed);
    }
    return StageEnd::ok;
  }
}

void StageJob::floor_follows_move() {
  // The floor held on the lost worker's disk is room nothing will fill now.
  m_context.floors.release(m_stage.name);
  double floor = floor_gb();
  const StoreSite& site = m_context.sites.at(m_request.host);
  if (floor <= 0 || site.disk.empty()) {
    return;
  }
  // A stage that lost its worker does not wait again (nor does its move wait for a slot):
  // short of room it goes on, and says so.
  FloorLedger::Claim claim = m_context.floors.claim(site.disk, m_stage.name, floor);
  if (claim.error.empty() && !claim.fits) {
    disk_log(m_context.folder, m_context.console,
             fmt::format("WARN [disk] stage {}: moved to a store with {}G free on {} ({}), short "
                         "of its floor {}G{}",
                         m_stage.name, gib_text(claim.free), site.disk.string(),
                         site.levers->label(), gib_text(floor),
                         claim.holders.empty()
                             ? std::string()
                             : " beside the floors of " + join(claim.holders, ", ")));
  }
}

StageEnd StageJob::before_build() {
  if (StageEnd floor = disk_floor(); floor != StageEnd::ok) {
    return floor;
  }
  StageEnd parents = parent_gates();
  if (stopping()) {
    // A Ctrl-C stops the pulls and inspects of the gates too; what they left is no verdict.
    m_record.failure = m_context.run.stop_cause() + " before it started";
    return not_started("interrupted", StageEnd::interrupted);
  }
  if (parents != StageEnd::ok) {
    bool refused = parents == StageEnd::refused;
    m_verdicts.push_back(
        fmt::format("{}:image-env:{}", refused ? "refused" : "unverified", m_stage.name));
    return not_started(refused ? "refused" : "unverified", parents);
  }
  if (m_share.memory_limit_gb > 0 && !prepare_budget()) {
    m_context.folder.log(fmt::format("stage {}: not started: {}", m_stage.name, m_record.failure));
    return not_started("failed", StageEnd::failed);
  }
  // Each stage it needs by the image this run built or looked up, never by a tag.
  for (size_t i = 0; i < m_request.contexts.size() && i < m_stage.needs.size(); ++i) {
    if (std::string identity = m_context.run.identity(m_stage.needs[i]); !identity.empty()) {
      m_request.contexts[i].identity = identity;
    }
  }
  room_for_export();
  return StageEnd::ok;
}

void StageJob::room_for_export() {
  double floor = floor_gb();
  if (m_request.cache_slug.empty() || !m_request.export_local || floor <= 0) {
    return;
  }
  // An export is a convenience: on a disk already under the floor it would take the room
  // the builds need (exports once grew from 62 to 110 GB in one session).
  auto free = free_bytes(m_request.cache_slug.parent_path());
  if (free && *free < static_cast<uint64_t>(floor * static_cast<double>(k_gib))) {
    m_request.export_local = false;
    disk_log(m_context.folder, m_context.console,
             fmt::format("WARN [disk] stage {}: no new cache export this build: {}G free on {}, "
                         "under its floor {}G (the export it has is still read)",
                         m_stage.name, gib_text(*free), m_request.cache_slug.parent_path().string(),
                         gib_text(floor)));
  }
}

void StageJob::cap_exports() {
  const DiskPolicy& disk = m_context.disk;
  if (m_request.cache_slug.empty() || disk.exports_max_gb <= 0) {
    return;
  }
  // Two stages ending at once would list and trim the same exports.
  static std::mutex trimming;
  std::lock_guard one_at_a_time(trimming);
  auto cap = static_cast<uint64_t>(disk.exports_max_gb * static_cast<double>(k_gib));
  uint64_t total = 0;
  for (const Slug& slug : list_slugs(disk.cache_root)) {
    total += slug.bytes;
  }
  if (total <= cap) {
    return;
  }
  disk_log(m_context.folder, m_context.console,
           fmt::format("[disk-trim] cache exports hold {}G, over the {}G cap ([disk] "
                       "exports_max_gb): trimming the oldest",
                       gib_text(total), gib_text(disk.exports_max_gb)));
  TrimResult trim = trim_slugs(disk.cache_root, total - cap, disk.keep_slugs,
                               m_context.run.floor_scope().protected_slugs, disk.cache_root);
  for (const auto& line : trim.lines) {
    disk_log(m_context.folder, m_context.console, line);
  }
}

StageEnd StageJob::not_started(std::string status, StageEnd end) {
  m_record.status = std::move(status);
  m_record.ended = utc_iso8601(m_context.clock.wall());
  m_context.console.note(fmt::format("[{}] not started: {}", m_stage.name, m_record.failure));
  save();
  return end;
}

bool StageJob::prepare_budget() {
  m_record.jobs = m_share.jobs;
  m_record.memory_limit_gb = m_share.memory_limit_gb;
  for (const auto& secret : m_request.secrets) {
    if (secret.id != k_budget_secret) {
      continue;
    }
    m_context.folder.log(fmt::format("stage {}: budget: {}", m_stage.name, m_share.reason));
    std::error_code ignored;
    std::filesystem::create_directories(secret.file.parent_path(), ignored);
    if (auto written =
            write_file_atomic(secret.file, budget_file_text(m_share), Durability::rename_only);
        !written) {
      // The build would fail on the missing secret file with a message that names neither
      // kiln nor the write: say what failed here instead.
      m_record.failure = fmt::format("the job budget the Dockerfile mounts as secret '{}' could "
                                     "not be written: {}",
                                     k_budget_secret, written.error());
      return false;
    }
  }
  return true;
}

StageEnd StageJob::build() {
  m_inputs = m_context.judge.judge(m_stage, m_request, m_record.worker);
  // A build the cache should serve is not timed by a cold one, nor a cold one by it.
  m_eta_seconds = m_eta.of(build_kind(m_inputs->cause ? "built" : "reused",
                                      m_inputs->cause ? m_inputs->cause->kind : std::string(),
                                      /*steps_cached=*/1));
  if (!m_inputs->problem.empty()) {
    m_context.folder.log(fmt::format("stage {}: its last good build's inputs are unreadable, so "
                                     "a rebuild is judged as its first: {}",
                                     m_stage.name, m_inputs->problem));
  }
  Attempts built = attempt_until_done();
  if (built.end != StageEnd::ok) {
    return built.end;
  }
  const AttemptRecord build = m_record.attempts.back();
  // From here on the image is its identity: every gate reads it, every later stage is handed
  // it, whatever a tag says meanwhile.
  m_record.image_id = m_context.engine.built_image(m_request, built.outcome.progress);
  NamedContext image = stage_context(m_context.chain, m_stage);
  image.identity = m_record.image_id;
  m_context.run.set_identity(m_stage.name, m_record.image_id);
  CompileFloorVerdict floor =
      judge_compile_floor(m_stage.min_compile_requests, built.outcome.compile, built.outcome.steps);
  m_record.compile_floor = floor.note;
  if (!floor.ok) {
    m_record.failure = floor.note;
    m_context.folder.log(fmt::format("stage {}: attempt {}/{} built, but {}", m_stage.name,
                                     build.number, m_stage.attempts, floor.note));
    withdraw("it failed its compile-request floor");
    m_context.console.stage_finished(m_stage.name, "failed: " + floor.note);
    return StageEnd::failed;
  }
  std::string refused = post_build_gates(m_context.folder.path() / build.log, image);
  if (stopping()) {
    m_record.failure = m_context.run.stop_cause() + " after it built, before its gates ended";
    m_context.folder.log(fmt::format("stage {}: {}", m_stage.name, m_record.failure));
    m_context.console.stage_finished(m_stage.name, "interrupted");
    withdraw("its gates did not end");
    return StageEnd::interrupted;
  }
  if (!refused.empty()) {
    const bool unverified = refused.starts_with("unverified: ");
    m_record.failure = unverified ? refused.substr(12) : refused;
    m_context.folder.log(fmt::format("stage {}: attempt {}/{} built, but {}{}", m_stage.name,
                                     build.number, m_stage.attempts, unverified ? "" : "the ",
                                     m_record.failure));
    m_context.console.stage_finished(m_stage.name, (unverified ? "unverified: " : "refused: ") +
                                                       m_record.failure);
    withdraw(unverified ? "a gate could not read it" : "a gate refused it");
    return unverified ? StageEnd::unverified : StageEnd::refused;
  }
  std::string vertices = build.vertices > 0 ? fmt::format(", {}/{} vertices cached",
                                                          build.vertices_cached, build.vertices)
                                            : std::string();
  m_context.folder.log(
      fmt::format("stage {}: attempt {}/{} ok in {:.1f}s, {}/{} steps cached{}, image {}",
                  m_stage.name, build.number, m_stage.attempts, build.seconds, build.steps_cached,
                  build.steps_run, vertices, m_record.image_id));
  const bool reused = every_step_cached(build);
  std::optional<Cause> cause = m_context.judge.ended_ok(
      *m_inputs, reused ? "reused" : "built", m_record.image_id,
      utc_iso8601(m_context.clock.wall()), build.registry_cache_dropped, m_context.folder.path());
  if (cause) {
    m_record.cause = to_json(*cause);
    m_context.folder.log(fmt::format("stage {}: rebuilt: {}", m_stage.name, cause->summary));
  }
  m_context.console.stage_finished(m_stage.name,
                                   fmt::format("ok in {}{}", human_duration(build.seconds),
                                               reused  ? " (all steps cached)"
                                               : cause ? " (rebuilt: " + cause->summary + ")"
                                                       : ""));
  return StageEnd::ok;
}

StageJob::Attempts StageJob::attempt_until_done() {
  const Stage& stage = m_stage;
  const char* what = "attempt";
  std::chrono::steady_clock::time_point start = m_context.clock.steady();
  int import_flakes = 0;
  std::optional<Tail> previous_tail;
  std::optional<std::string> previous_stall; // the step where the previous attempt stalled
  // Attempts lost with their worker are not the stage's own: each move off a lost worker adds
  // one. Bounded, since a worker that loses two in a row leaves the run.
  int budget = stage.attempts;
  for (int n = 1; n <= budget; ++n) {
    AttemptRecord& begun = begin_attempt(n);
    m_record.command = begun.command;
    m_context.folder.log(
        fmt::format("stage {}: {} {}/{} start: {}", stage.name, what, n, budget, begun.command));
    StageView view{m_index, m_count, stage.name, n, budget, m_eta_seconds, "building"};
    m_context.console.stage_started(view);

    AttemptRecord& a = m_record.attempts.back();
    std::pair<int, int> step_seen{0, 0}; // (Dockerfile stage, step) of the last step.started
    AttemptOutcome outcome = run_logged(a, [&](const BuildProgress& progress) {
      m_context.console.stage_progress(stage.name, progress);
      m_context.run.set_phase(stage.name, phase_name(stage, progress));
      if (progress.step > 0 && std::pair{progress.build_stage, progress.step} != step_seen) {
        step_seen = {progress.build_stage, progress.step};
        m_context.events.emit(EventType::step_started,
                              {{"stage", stage.name},
                               {"attempt", n},
                               {"build_stage", progress.build_stage_name.empty()
                                                   ? std::to_string(progress.build_stage)
                                                   : progress.build_stage_name},
                               {"step", progress.step},
                               {"steps", progress.steps},
                               {"instruction", printable(progress.instruction.substr(0, 500))}});
      }
    });
    m_record.seconds = seconds_since(start);

    if (outcome.exit.interrupted || interrupt_signal() != 0) {
      a.verdict = "interrupted";
      a.reason = m_context.run.stop_cause() + "; the engine's process group was stopped";
      attempt_ended(a);
      m_context.folder.log(
          fmt::format("stage {}: {} {}/{} {}", stage.name, what, n, budget, a.reason));
      m_context.console.stage_finished(
          stage.name, fmt::format("interrupted after {}", human_duration(a.seconds)));
      return {StageEnd::interrupted, std::move(outcome)};
    }
    a.compile = outcome.compile;
    if (auto fell_back = a.compile ? compile_fallback_warning(*a.compile) : std::nullopt) {
      m_context.folder.log(
          fmt::format("stage {}: {} {}/{} warning: {}", stage.name, what, n, budget, *fell_back));
      m_context.console.note(fmt::format("warning: stage {}: {}", stage.name, *fell_back));
    }
    if (outcome.exit.ok()) {
      m_context.run.worker_answered(m_record);
      a.verdict = "ok";
      attempt_ended(a);
      return {StageEnd::ok, std::move(outcome)};
    }

    FailureVerdict verdict;
    std::optional<std::string> frozen;
    if (outcome.exit.stalled) {
      // A daemon that froze leaves its build as silent as a step that hangs: ask it first.
      std::unique_ptr<Engine> there = m_context.engine.on_host(m_request);
      frozen = (there ? *there : m_context.engine).unresponsive(k_daemon_answer_limit);
    }
    if (frozen) {
      verdict.verdict = n >= budget ? Verdict::exhausted : Verdict::retry;
      verdict.class_name = std::string(k_worker_lost_class);
      verdict.matched_line = *frozen;
      verdict.reason = fmt::format("silent for {:.0f}s at {}, and {}: the daemon stopped, not "
                                   "the step",
                                   a.silent_seconds, step_name(outcome.progress), *frozen);
      previous_stall.reset();
    } else if (outcome.exit.stalled) {
      std::string step = step_name(outcome.progress);
      verdict = classify_stall(step, previous_stall, n, budget, a.silent_seconds);
      a.matched_line = a.last_line;
      previous_stall = step;
    } else if (outcome.exit.timed_out) {
      verdict.verdict = Verdict::permanent;
      verdict.reason = fmt::format("stopped at its time limit of {} (timeout_s) during {}; raise "
                                   "the stage's timeout_s if the step needs longer",
                                   human_duration(a.seconds), step_name(outcome.progress));
      previous_stall.reset();
    } else {
      verdict = classify_failure(outcome.evidence, previous_tail, n, budget, m_context.classes,
                                 &outcome.engine_evidence);
      previous_stall.reset();
    }
    if (std::string explained = m_context.engine.explain_failure(outcome.evidence);
        !explained.empty()) {
      verdict.reason = explained + "; " + verdict.reason;
    }
    bool moved = false;
    if (verdict.class_name == k_worker_lost_class && !m_record.worker.empty()) {
      moved = m_context.run.move_off_worker(
          m_record, m_request, fmt::format("{}: {}", verdict.class_name, verdict.matched_line), n);
      if (moved) {
        floor_follows_move();
        ++budget;
        verdict.verdict = Verdict::retry;
        verdict.reason =
            fmt::format("{}; moved from worker {} to {}, and the attempt does not count as the "
                        "stage's own",
                        verdict.reason, m_record.moves.back().from, m_record.worker);
      }
    } else if (!m_record.worker.empty()) {
      m_context.run.worker_answered(m_record);
    }
    a.verdict = verdict_name(verdict.verdict);
    a.transient_class = verdict.class_name;
    if (!verdict.matched_line.empty()) {
      a.matched_line = verdict.matched_line;
    }
    a.reason = verdict.reason;
    attempt_ended(a);
    std::string failed =
        fmt::format("stage {}: {} {}/{} failed (exit {}) after {:.1f}s: {}", stage.name, what, n,
                    budget, a.exit_code, a.seconds, a.verdict);
    if (!verdict.class_name.empty()) {
      failed +=
          fmt::format(", class {}, matched line: \"{}\"", verdict.class_name, verdict.matched_line);
    }
    failed += "; " + verdict.reason;
    std::string log_path = (m_context.folder.path() / a.log).string();
    if (verdict.verdict != Verdict::retry) {
      m_record.failure = verdict.reason;
      if (stage.kind == StageKind::smoke) {
        smoke_gate(m_context.folder.path() / a.log); // the counts, for the record
      }
      m_context.folder.log(failed);
      m_context.console.stage_finished(
          stage.name,
          fmt::format("failed after {}: {}", human_duration(a.seconds), m_record.failure));
      show_failing_step_errors(log_path);
      m_context.console.failure_tail(outcome.tail, log_path);
      salvage_failed_build({m_context.chain, m_context.engine, m_context.folder, m_context.console,
                            m_context.no_salvage, m_context.cancel, [this] { save(); }},
                           stage, m_request, outcome.finished_build_stages, m_record);
      return {StageEnd::failed, std::move(outcome)};
    }
    // Another worker takes it at once: the cooldown is for a flake of the same one.
    std::chrono::milliseconds cooldown =
        moved ? std::chrono::milliseconds(0) : cooldown_before(n + 1, m_context.chain.defaults);
    double cooldown_s = std::chrono::duration<double>(cooldown).count();
    m_context.folder.log(failed + fmt::format("; retrying in {:.0f}s", cooldown_s));
    // A stall matched no line: what the step printed last says where it hung.
    std::string detail = a.matched_line.empty() ? "it printed nothing" : a.matched_line;
    m_context.console.stage_finished(
        stage.name,
        fmt::format("{} {}/{} failed ({}: {}); retrying in {}", what, n, budget, verdict.class_name,
                    printable(detail.substr(0, 200)), human_duration(cooldown_s)));
    if (verdict.class_name == k_cache_import_class) {
      drop_registry_cache_after_flakes(++import_flakes, n + 1);
    }
    save();
    previous_tail = std::move(outcome.evidence);
    if (!m_context.clock.sleep_for(cooldown, m_context.cancel)) {
      m_context.folder.log(fmt::format("stage {}: interrupted during the cooldown", stage.name));
      return {StageEnd::interrupted, {}};
    }
  }
  return {StageEnd::failed, {}}; // unreachable: the last attempt's verdict is never `retry`
}

AttemptRecord& StageJob::begin_attempt(int number) {
  AttemptRecord& attempt = m_record.attempts.emplace_back();
  attempt.number = number;
  attempt.started = utc_iso8601(m_context.clock.wall());
  attempt.log = RunFolder::attempt_log(m_stage.name, number);
  // Built now, not at the start of the run: the digests of the stages it needs and the cache
  // tiers it uses are known only now.
  attempt.command = shown_command(m_context.engine.build_argv(m_request), m_request.build_args);
  attempt.registry_cache_dropped = m_request.drop_registry_cache && has_registry_cache(m_request);
  save();
  m_context.events.emit(EventType::attempt_started, {{"stage", m_record.name},
                                                     {"attempt", number},
                                                     {"command", attempt.command},
                                                     {"log", attempt.log}});
  return attempt;
}

AttemptOutcome StageJob::run_logged(AttemptRecord& a, const ProgressListener& on_progress) {
  std::chrono::steady_clock::time_point start = m_context.clock.steady();
  auto log = m_context.folder.open_log(a.log, true);
  if (!log) {
    AttemptOutcome outcome;
    outcome.exit.spawn_error = "not started: its log cannot be written: " + log.error();
    outcome.evidence.push_back(outcome.exit.spawn_error);
    outcome.engine_evidence = outcome.evidence;
    a.exit_code = -1;
    return outcome;
  }
  BuildLimits limits{m_stage.timeout, m_stage.stall_timeout, &m_context.cancel};
  AttemptOutcome outcome = run_attempt(m_context.engine, m_request, *log, on_progress, limits,
                                       [&] { m_context.console.stage_output(m_stage.name); });
  log->finish_line_times();
  a.seconds = seconds_since(start);
  a.exit_code = outcome.exit.spawn_error.empty() ? outcome.exit.status_code() : -1;
  a.steps_run = outcome.progress.steps_run;
  a.steps_cached = outcome.progress.steps_cached;
  a.vertices = outcome.progress.vertices;
  a.vertices_cached = outcome.progress.vertices_cached;
  a.log_truncated_at_byte = log->cut_at();
  a.clip_lines = outcome.clip_lines;
  if (!a.clip_lines.empty()) {
    std::string line = fmt::format("warning: stage {}: the engine clipped a step's output ({}), "
                                   "so {} misses lines for good; {}",
                                   m_stage.name, a.clip_lines.front(), a.log, k_lift_log_limit);
    m_context.folder.log(line);
    m_context.console.note(line);
  }
  if (outcome.dropped_bytes > 0) {
    std::string line = fmt::format("warning: stage {}: {} byte(s) of the engine's output were "
                                   "dropped: its log could not be written as fast as it came "
                                   "(a slow or stuck disk); {} says where",
                                   m_stage.name, outcome.dropped_bytes, a.log);
    m_context.folder.log(line);
    m_context.console.note(line);
  }
  if (outcome.exit.stalled || outcome.exit.timed_out) {
    a.stopped_by = outcome.exit.stalled ? "stall" : "timeout";
    a.last_line = printable(outcome.last_line_at_stop.substr(0, 500));
    a.silent_seconds = std::chrono::duration<double>(outcome.exit.silent_for).count();
  }
  return outcome;
}

void StageJob::attempt_ended(const AttemptRecord& a) {
  m_context.events.emit(EventType::attempt_ended, {{"stage", m_stage.name},
                                                   {"attempt", a.number},
                                                   {"verdict", a.verdict},
                                                   {"exit_code", a.exit_code},
                                                   {"seconds", a.seconds},
                                                   {"class", a.transient_class},
                                                   {"reason", a.reason},
                                                   {"stopped_by", a.stopped_by},
                                                   {"steps_run", a.steps_run},
                                                   {"steps_cached", a.steps_cached}});
}

void StageJob::drop_registry_cache_after_flakes(int import_flakes, int next_attempt) {
  if (m_request.drop_registry_cache || !has_registry_cache(m_request) ||
      import_flakes < m_context.chain.cache.import_flakes_before_drop) {
    return;
  }
  m_request.drop_registry_cache = true;
  std::vector<std::string> dropped;
  for (const auto& spec : m_request.cache_from) {
    dropped.push_back("--import-cache " + spec);
  }
  for (const auto& spec : m_request.cache_to) {
    dropped.push_back("--export-cache " + spec);
  }
  std::string message = fmt::format(
      "stage {}: {} registry cache-import flake(s); attempt {} drops every registry-facing cache "
      "argument ({}) and finishes on the local tier{}",
      m_stage.name, import_flakes, next_attempt, join(dropped, "; "),
      m_request.cache_slug.empty() ? " (none is configured: it builds without a cache import)"
                                   : " (" + m_request.cache_slug.string() + ")");
  m_context.folder.log(message);
  m_context.console.note(message);
}

void StageJob::withdraw(const std::string& why) {
  m_context.run.set_identity(m_stage.name, "");
  if (auto withdrawn = m_context.engine.withdraw_image(
          m_request, m_record.image_id, m_stage.stable_name ? m_stage.tag : std::string());
      !withdrawn) {
    m_context.folder.log(fmt::format("stage {}: warning: its image stays where a later stage "
                                     "finds it although {}: {}",
                                     m_stage.name, why, withdrawn.error()));
  } else {
    m_context.folder.log(fmt::format("stage {}: its image was withdrawn ({}) because {}",
                                     m_stage.name, m_request.tag, why));
  }
}

void StageJob::gate_log(const GateRecord& gate) {
  m_context.events.emit(EventType::gate_verdict, {{"stage", m_stage.name},
                                                  {"gate", gate.gate},
                                                  {"subject", gate.subject},
                                                  {"verdict", gate.verdict},
                                                  {"findings", gate.findings.size()},
                                                  {"reason", gate.reason}});
  for (const auto& line : gate_lines(m_stage.name, gate)) {
    m_context.folder.log(line);
    if (gate.verdict != "pass" || line.find(" gate: warning: ") != std::string::npos) {
      m_context.console.note(line);
    }
  }
}

StageEnd StageJob::parent_gates() {
  bool refused = false;
  std::string unreadable;
  for (auto& gate : m_context.gates.grade_parents(m_stage, m_request)) {
    gate_log(gate);
    refused = refused || gate.verdict == "refused";
    if (gate.verdict == "unreadable" && unreadable.empty()) {
      unreadable = gate.subject + ": " + gate.reason;
    }
    m_record.gates.push_back(std::move(gate));
  }
  if (refused) {
    m_record.failure = "the image-env gate refused a parent this run did not build: rebuild it "
                       "from a Dockerfile that passes `kiln lint` (a build-host setting belongs "
                       "in an ARG or a secret, never in ENV)";
    return StageEnd::refused;
  }
  if (!unreadable.empty()) {
    m_record.failure = "the image-env gate could not read a parent this run did not build (" +
                       unreadable + "); rebuild it in this run";
    return StageEnd::unverified;
  }
  return StageEnd::ok;
}

SmokeVerdict StageJob::smoke_gate(const std::filesystem::path& log) {
  // Streamed: a test suite's log may be gigabytes, and only its summaries count.
  auto read = find_test_summaries_in(log);
  SmokeCounts counts = read ? std::move(*read) : SmokeCounts{};
  SmokeRecord smoke;
  smoke.min_passed = m_stage.min_passed.value_or(m_context.chain.gates.min_passed);
  smoke.max_skipped = m_stage.max_skipped.value_or(m_context.chain.gates.max_skipped);
  SmokeVerdict verdict = judge_smoke(counts, smoke.min_passed, smoke.max_skipped);
  if (!read) {
    verdict.reason += " (" + read.error() + ")";
  }
  smoke.passed = counts.passed;
  smoke.failed = counts.failed;
  smoke.skipped = counts.skipped;
  for (const auto& summary : counts.summaries) {
    smoke.summaries.push_back(
        fmt::format("{} line {}: {}", summary.format, summary.line, summary.text));
  }
  smoke.verdict = verdict.ok ? "pass" : "failed";
  smoke.reason = verdict.reason;
  m_context.folder.log(fmt::format("stage {}: smoke: {} passed, {} failed, {} skipped in {} "
                                   "summar{} (floors: min_passed {}, max_skipped {}): {}",
                                   m_stage.name, counts.passed, counts.failed, counts.skipped,
                                   counts.summaries.size(),
                                   counts.summaries.size() == 1 ? "y" : "ies", smoke.min_passed,
                                   smoke.max_skipped, verdict.ok ? "pass" : verdict.reason));
  m_record.smoke = std::move(smoke);
  return verdict;
}

std::string StageJob::post_build_gates(const std::filesystem::path& log,
                                       const NamedContext& image) {
  const Stage& stage = m_stage;
  if (stage.kind == StageKind::smoke) {
    const AttemptRecord& build = m_record.attempts.back();
    if (build.log_truncated_at_byte) {
      // A log kiln itself cut holds no verdict on the tests: saying so is not a refusal.
      m_verdicts.push_back("unverified:smoke:" + stage.name);
      std::vector<std::string> lost = m_context.folder.write_errors();
      return fmt::format("unverified: the smoke gate cannot judge {}: kiln could not write it "
                         "whole (cut at byte {}: {}), so the tests' summary may be what was lost",
                         build.log, *build.log_truncated_at_byte,
                         lost.empty() ? "a record write failed" : lost.front());
    }
    if (SmokeVerdict verdict = smoke_gate(log); !verdict.ok) {
      m_verdicts.push_back("refused:smoke:" + stage.name);
      return "smoke gate: " + verdict.reason;
    }
  }
  if (graded_after_build(m_context.chain, stage)) {
    GateRecord gate = m_context.gates.grade_built(stage, image);
    if (stopping()) {
      return {}; // an inspect stopped by Ctrl-C left no verdict: build() says interrupted
    }
    gate_log(gate);
    std::string verdict = gate.verdict;
    std::string reason = gate.reason;
    m_record.gates.push_back(std::move(gate));
    if (verdict == "unreadable") {
      m_verdicts.push_back("unverified:image-env:" + stage.name);
      return fmt::format("unverified: the image-env gate cannot read the config of the image of "
                         "stage {}: {}",
                         stage.name, reason);
    }
    if (verdict != "pass") {
      m_verdicts.push_back("refused:image-env:" + stage.name);
      return fmt::format("image-env gate: the image of stage {} carries the build host{}; move "
                         "each setting to an ARG or a secret, never ENV or a build arg a RUN "
                         "spells out (details in driver.log)",
                         stage.name,
                         stage.known_as() == m_context.chain.gates.final_stage
                             ? " and is not published (no flag waives this gate)"
                             : "");
    }
  }
  if (layers_read_after_build(m_context.chain, stage)) {
    return layer_gates(image);
  }
  return {};
}

std::string StageJob::layer_gates(const NamedContext& image) {
  const Stage& stage = m_stage;
  std::vector<GateRecord> gates = m_context.gates.grade_layers(stage, image, image.identity);
  if (stopping()) {
    return {}; // a read stopped by Ctrl-C left no verdict: build() says interrupted
  }
  const bool final_stage = stage.known_as() == m_context.chain.gates.final_stage;
  std::string failure;
  for (auto& gate : gates) {
    gate_log(gate);
    if (gate.verdict == "unreadable") {
      m_verdicts.push_back(fmt::format("unverified:{}:{}", gate.gate, stage.name));
    } else if (gate.verdict != "pass") {
      m_verdicts.push_back(fmt::format("refused:{}:{}", gate.gate, stage.name));
    }
    if (gate.verdict != "pass" && failure.empty()) {
      failure =
          gate.verdict == "unreadable"
              ? fmt::format("unverified: the {} gate cannot read the layers of the image of "
                            "stage {}: {}",
                            gate.gate, stage.name, gate.reason)
          : gate.gate == "residue"
              ? fmt::format("residue gate: the image of stage {} carries build-host files in its "
                            "layers{}; keep each out of every layer (a build secret or mount), "
                            "or allow it in [gates] residue_allow with a reason (details in "
                            "driver.log)",
                            stage.name, final_stage ? " and is not published" : "")
          : gate.gate == "arch"
              ? fmt::format("arch gate: the image of stage {} holds ELF files of another "
                            "platform: {}",
                            stage.name, join(gate.findings, "; "))
              : fmt::format("artifacts gate: the image of stage {}: {}", stage.name,
                            join(gate.findings, "; "));
    }
    m_record.gates.push_back(std::move(gate));
  }
  return failure;
}

void StageJob::show_failing_step_errors(const std::string& log_path) {
  auto analysed = forensics::analyze_log_file(log_path, log_path, forensics::Options{});
  if (!analysed) {
    return;
  }
  for (const forensics::StepResult& step : analysed->steps) {
    if (!step.errors.empty() && !step.errors_from_tail) {
      m_context.console.failure_errors(m_stage.name, step.name, step.errors,
                                       step.error_lines_total);
      return;
    }
  }
}

} // namespace kiln
