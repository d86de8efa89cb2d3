#include "driver/run_loop.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

#include "disk/levers.h"
#include "disk/watchdog.h"
#include "dockerfile/source.h"
#include "driver/abandoned_runs.h"
#include "driver/attempt.h"
#include "driver/attempt_runner.h"
#include "driver/build_request.h"
#include "driver/compile_fallback.h"
#include "driver/compile_floor.h"
#include "driver/crash.h"
#include "driver/engine_version.h"
#include "driver/events.h"
#include "driver/image_gates.h"
#include "driver/kiln_tools.h"
#include "driver/leftovers.h"
#include "driver/publish.h"
#include "driver/records.h"
#include "driver/records_lock.h"
#include "driver/run_folder.h"
#include "driver/run_history.h"
#include "driver/salvage.h"
#include "driver/scheduler.h"
#include "driver/shown_command.h"
#include "forensics/log_analysis.h"
#include "forensics/trace.h"
#include "gates/smoke_floors.h"
#include "lint/lint.h"
#include "resources/budget.h"
#include "resources/host_stats.h"
#include "resources/sampler.h"
#include "util/cancel.h"
#include "util/diagnostic.h"
#include "util/fs.h"
#include "util/http_post.h"
#include "util/strings.h"
#include "util/time.h"

namespace kiln {

namespace {

using Steady = std::chrono::steady_clock;

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

std::string error_line(const std::string& message) {
  return "kiln: error: " + message + "\n";
}

/// Print every problem; true when there were none.
bool report(const std::vector<std::string>& problems, std::FILE* errors) {
  for (const auto& problem : problems) {
    std::fputs(problem.c_str(), errors);
  }
  return problems.empty();
}

/// Everything wrong with the request that would otherwise surface mid-run.
std::vector<std::string> check_request(const std::vector<const Stage*>& stages,
                                       const RunOptions& options) {
  std::vector<std::string> problems;
  for (const auto& [key, value] : options.build_arg_overrides) {
    if (!is_identifier(key)) {
      problems.push_back(error_line(
          fmt::format("--build-arg {}={}: '{}' is not a valid ARG name; use letters, digits and _",
                      key, value, key)));
      continue;
    }
    bool declared = false;
    for (const Stage* stage : stages) {
      for (const auto& name : stage->declared_args) {
        declared = declared || name == key;
      }
    }
    if (!declared) {
      problems.push_back(error_line(
          fmt::format("--build-arg {}: no selected stage's Dockerfile declares ARG {}, so it "
                      "would reach no build; check the name or the selection",
                      key, key)));
    }
  }
  for (const Stage* stage : stages) {
    for (const auto& secret : stage->secrets) {
      if (!secret.env.empty() && std::getenv(secret.env.c_str()) == nullptr) {
        problems.push_back(format_diagnostic(
            {secret.pos,
             fmt::format("stage '{}' secret '{}' comes from ${}, which is not set", stage->name,
                         secret.id, secret.env),
             fmt::format("export {} before running kiln", secret.env)}));
      }
    }
  }
  return problems;
}

/// Every selected stage's Dockerfile through the linter, with the chain's [gates] options: a
/// build-host leak or an out-of-scope ARG found now costs nothing, found in the image it costs
/// the hours spent building it. Each file as the chain loaded it: read and parsed once; each in
/// its stage's context, whose .dockerignore decides what a COPY can reach (as `kiln lint --chain`).
std::vector<std::string> lint_stage_dockerfiles(const Chain& chain,
                                                const std::vector<const Stage*>& stages) {
  LintOptions options = lint_options(chain.gates);
  std::vector<std::string> problems;
  size_t findings = 0;
  for (const Stage* stage : one_stage_per_dockerfile(stages)) {
    const DockerfileSource* source = stage->dockerfile_source.get();
    options.context_dir = stage->context.string();
    LintResult result = lint_parsed(source->path.string(), source->text, source->parsed, options);
    if (!result.findings.empty()) {
      findings += result.findings.size();
      problems.push_back(render_tty(result, source->text));
    }
  }
  if (findings > 0) {
    problems.push_back(error_line(fmt::format(
        "lint: {} finding(s) in the stages' Dockerfiles (above); fix each, or silence one with "
        "`# kiln-lint ignore=<rule> reason=<why>` on the line above it",
        findings)));
  }
  return problems;
}

/// Needs that this run does not build must have been built before.
std::vector<std::string> check_outside_needs(const Chain& chain,
                                             const std::vector<const Stage*>& stages,
                                             const Engine& engine) {
  std::vector<std::string> problems;
  std::set<std::string> built_here;
  for (const Stage* stage : stages) {
    built_here.insert(stage->name);
  }
  std::map<std::string, bool> checked;
  for (const Stage* stage : stages) {
    for (const auto& need : stage->needs) {
      if (built_here.count(need) > 0 || checked.count(need) > 0) {
        continue;
      }
      NamedContext context = stage_context(chain, *chain.find_stage(need));
      checked[need] = engine.has_stage_image(context);
      if (!checked[need]) {
        problems.push_back(error_line(fmt::format(
            "stage '{}' needs '{}', which this run does not build, and {} has no image of it "
            "from an earlier run ({}); build it first (kiln run --only {}) or widen the selection",
            stage->name, need, engine.name(), engine.stage_image_place(context), need)));
      }
    }
  }
  return problems;
}

class Run {
public:
  Run(const Chain& chain, const Engine& engine, const RunSeams& seams, const RunOptions& options,
      Console& console, RecordsLock lock, RunFolder folder, RunRecord record)
      : m_chain(chain), m_engine(engine),
        m_clock(seams.clock != nullptr ? *seams.clock : real_clock()), m_options(options),
        m_console(console), m_lock(std::move(lock)), m_folder(std::move(folder)),
        m_record(std::move(record)),
        m_events(m_folder.path() / "events.jsonl", m_clock, options.progress_json,
                 [this](const std::string& manifest, bool ended) {
                   // Flushed once the run has ended, however it ended; the states between are
                   // atomic, not flushed: an fsync per state costs a cached chain more than its
                   // builds. A failed write is in write_errors().
                   m_folder.write_manifest(manifest,
                                           ended ? Durability::flush : Durability::rename_only);
                 }),
        m_seams(seams) {
    // Chain-file classes first: they are the more specific, and name the verdict.
    m_classes = m_chain.transient;
    m_classes.insert(m_classes.end(), builtin_transient_classes().begin(),
                     builtin_transient_classes().end());
  }

  /// Build `stages` in order, each with its request (the same index). Whatever escapes (an
  /// internal error, an allocation that failed) ends the run `crashed`, recorded, never lost.
  int execute(const std::vector<const Stage*>& stages, const std::vector<BuildRequest>& requests);

private:
  /// unverified: a gate could not read what it judges (the image, a log kiln cut): nothing
  /// says the image is bad, nothing says it is good.
  enum class StageEnd { ok, failed, refused, unverified, interrupted, crashed };
  int execute_stages(const std::vector<const Stage*>& stages,
                     const std::vector<BuildRequest>& requests);
  /// Start what the scheduler says may start, wait for a stage to end, repeat. Each stage
  /// builds on a thread of its own; every thread holds m_mutex except while it waits on the
  /// engine, so the record changes one stage at a time.
  void schedule(const std::vector<const Stage*>& stages, const std::vector<BuildRequest>& requests,
                const Budget& budget, DiskWatchdog& watchdog);
  /// One stage from its disk floor to its last gate, on its own thread, m_mutex held.
  StageEnd run_stage(size_t index, BuildRequest request, const Budget& share);
  /// Record how stage `index` ended and what the run's status must say of it.
  void stage_ended(size_t index, StageEnd end);
  /// Record the stages the scheduler skipped since the last call.
  void record_skipped();
  /// The run's status and exit code from how its stages ended.
  int run_outcome();
  /// Once every stage ended: publish what the chain publishes (publish.h), each target as one
  /// transaction, when this run built its final stage.
  void publish_all(const std::vector<const Stage*>& stages);
  /// Once every stage ended: point each ok stage's stable name at its image when every smoke
  /// stage that guards it passed in this run, and say in its record why not otherwise.
  void move_stable_tags();
  /// Point the disk watchdog at the stages past their gates and building now: its episode.
  void watch_building();
  void set_stage_phase(const std::string& stage, const std::string& phase);
  /// End the run `crashed` after `reason` escaped the run loop.
  int crashed(const std::string& reason);
  StageEnd build_stage(const Stage& stage, BuildRequest request, int index, int count);
  /// The gates after a successful build: the smoke floors of a smoke stage, the image-env and
  /// residue gates of the final stage and of flagged ones, the artifacts gate of a stage that
  /// lists artifacts. An empty string when every gate passed, else the refusal, recorded as
  /// the stage's failure.
  std::string post_build_gates(const Stage& stage, StageRecord& record,
                               const std::filesystem::path& log, const NamedContext& image);
  /// The gates that read the built image's layers (residue, arch, artifacts), in one pass.
  std::string layer_gates(const Stage& stage, StageRecord& record, const NamedContext& image);
  /// Read a smoke stage's results from its log and hold them against the floors.
  SmokeVerdict smoke_gate(const Stage& stage, StageRecord& record,
                          const std::filesystem::path& log);
  /// Grade the parents of stage `stage` this run did not build: ok, refused when one is
  /// refused, unverified when one could not be read (the record's failure says which).
  StageEnd parent_gates(const Stage& stage, const BuildRequest& request, StageRecord& record);
  /// Log a gate verdict, and put a refusal on the console.
  void gate_log(const Stage& stage, const GateRecord& gate);
  /// A new attempt of `request` on the record, saved before the engine starts so that a kill
  /// leaves it on disk.
  AttemptRecord& begin_attempt(StageRecord& record, const BuildRequest& request, int number,
                               std::string log);
  /// A stage a gate kept from starting: its record and the console line.
  void not_started(const Stage& stage, StageRecord& record, std::string status);
  /// Take back the image of a stage that built but failed after the build, so no later stage or
  /// run is handed it as good.
  void withdraw(const Stage& stage, const BuildRequest& request, const std::string& identity,
                const std::string& why);
  /// One engine invocation for attempt `a`, its output logged in the record, and what its exit
  /// and output said recorded in `a`. Its limits are the stage's time and stall limits.
  AttemptOutcome run_logged(const Stage& stage, const BuildRequest& request, AttemptRecord& a,
                            const ProgressListener& on_progress);
  struct Attempts {
    StageEnd end;
    AttemptOutcome outcome; // the last attempt's
  };
  /// Attempts of `request` until one succeeds, a verdict refuses another or an interrupt
  /// stops it; each recorded, each failure classified, the cooldowns waited.
  Attempts attempt_until_done(const Stage& stage, BuildRequest& request, StageRecord& record,
                              int index, int count);
  /// After import flakes of the registry cache, the next attempt leaves the registry out.
  void drop_registry_cache_after_flakes(const Stage& stage, BuildRequest& request,
                                        int import_flakes, int next_attempt);
  void save();
  /// How a stage ended, as its stage.ended event: built, failed or skipped (`failure` says why).
  void stage_ended_event(const StageRecord& record, const std::string& failure);
  /// The end of attempt `a` of `stage`, as an event.
  void attempt_ended(const Stage& stage, const AttemptRecord& a);
  /// The end of the run, as its last event; then its spans to the OTLP endpoint, if any.
  void run_ended(int exit_code);
  /// Send the run's spans to `[trace] otlp_endpoint` (or OTEL_EXPORTER_OTLP_ENDPOINT): a
  /// failure is a warning, never the run's.
  void export_trace();
  /// Why the run's builds were told to stop, as a record says it: `interrupted by SIGHUP`, or
  /// `stopped by an internal error` (then the signal name is no part of it).
  std::string stop_cause() const;
  /// The error lines the failed step of a log printed, on the console before its tail.
  void show_failing_step_errors(const Stage& stage, const std::string& log_path);
  /// Index the finished run in the run history and say which stages took longer than usual.
  void note_history();
  double seconds_since(Steady::time_point start) const {
    return std::chrono::duration<double>(m_clock.steady() - start).count();
  }
  /// After every preflight gate: a refused launch leaves no sampler behind.
  void start_sampler();
  /// Stop sampling and summarise it per phase, on every way out of a run.
  void finish_sampler();
  /// Whether stage `index` of the run is still wanted: waiting or running, or needed by a
  /// stage that is.
  bool still_wanted(size_t index) const;
  /// Slugs a reclaim must not trim now: those of every stage still wanted.
  std::vector<std::string> protected_slugs() const;
  /// This checkout's work names of images no stage still wanted builds on (the final image's
  /// never).
  std::vector<std::string> removable_tags() const;
  /// Every line of a disk verdict to driver.log; warnings and reclaims to the console too.
  void disk_log(const std::string& line);
  /// The job budget the running stages share: the memory-bounded budget of the host.
  std::optional<Budget> run_budget();
  /// The share of the budget `stage` builds with, logged and recorded; written where the build
  /// can mount it. False, with the record's failure set, when it could not be written.
  bool prepare_budget(const Stage& stage, const BuildRequest& request, const Budget& share,
                      StageRecord& record);

  const Chain& m_chain;
  const Engine& m_engine;
  const Clock& m_clock;
  const RunOptions& m_options;
  Console& m_console;
  std::vector<TransientClass> m_classes;
  RecordsLock m_lock;
  RunFolder m_folder;
  RunRecord m_record;
  EventLog m_events; // the run as typed events: events.jsonl, and --progress=json
  std::map<std::string, double> m_eta;
  std::unique_ptr<ResourceSampler> m_sampler;
  DiskPolicy m_disk;
  std::unique_ptr<StoreLevers> m_owned_store;
  const StoreLevers* m_store = nullptr;
  std::optional<ImageGates> m_gates;
  RunSeams m_seams;
  std::mutex m_save_mutex; // the crash path may save from another thread
  bool m_record_error_shown = false;
  // What the last save() sent of each part of the record, as JSON text: only a change is sent.
  std::string m_saved_run;
  std::map<std::string, std::string> m_saved_stages;
  std::map<std::string, std::string> m_saved_publish;

  /// Held by whichever thread changes the record; a stage's thread lets go of it only while
  /// it waits on the engine or a cooldown.
  std::mutex m_mutex;
  /// Every build and cooldown of the run watches this one: Ctrl-C reaches it from the
  /// interrupt token, and an internal error stops every stage with it.
  CancelToken m_cancel;
  const std::vector<const Stage*>* m_stages = nullptr;
  std::optional<Scheduler> m_scheduler;
  std::vector<std::string> m_failed;     // stages that failed, in the order they ended
  std::vector<std::string> m_refused;    // the run statuses of the gates that refused
  std::vector<std::string> m_unverified; // `unverified:<gate>:<stage>` of gates that could not read
  /// The identity of each stage's image this run uses: built by it, or looked up once at its
  /// start for a need it does not build. Every handoff, gate and publish names it.
  std::map<std::string, std::string> m_identities;
  bool m_interrupted = false;
  std::atomic<bool> m_stopped_by_error{false}; // an internal error cancelled m_cancel
  std::set<std::string> m_building;
  DiskWatchdog* m_watchdog = nullptr;
  std::string m_episode;    // the stages the watchdog's episode names
  std::mutex m_phase_mutex; // the sampler's phase: set from the builds' progress
  std::map<std::string, std::string> m_phases;
};

/// Let go of a held mutex for a scope: a stage's thread waiting on its engine must not keep
/// the other stages from their record.
class Unlocked {
public:
  explicit Unlocked(std::mutex& mutex) : m_mutex(mutex) { m_mutex.unlock(); }
  ~Unlocked() { m_mutex.lock(); }
  Unlocked(const Unlocked&) = delete;
  Unlocked& operator=(const Unlocked&) = delete;

private:
  std::mutex& m_mutex;
};

bool Run::still_wanted(size_t index) const {
  auto active = [&](size_t i) {
    StageState state = m_scheduler->state(i);
    return state == StageState::waiting || state == StageState::running;
  };
  const auto& dependants = m_scheduler->dependants(index);
  return active(index) || std::any_of(dependants.begin(), dependants.end(), active);
}

std::vector<std::string> Run::protected_slugs() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < m_stages->size(); ++i) {
    if (still_wanted(i)) {
      names.push_back(m_chain.cache_slug(*(*m_stages)[i]).filename().string());
    }
  }
  return names;
}

std::vector<std::string> Run::removable_tags() const {
  std::set<std::string> keep;
  for (size_t i = 0; i < m_stages->size(); ++i) {
    const Stage& stage = *(*m_stages)[i];
    if (still_wanted(i)) {
      keep.insert(stage.name);
      keep.insert(stage.needs.begin(), stage.needs.end());
    }
  }
  // This checkout's work names only: a stable name is the user's, and the final image is what
  // the chain exists to make.
  std::vector<std::string> removable;
  for (const auto& stage : m_chain.stages) {
    if (keep.count(stage.name) == 0 && stage.known_as() != m_chain.gates.final_stage) {
      removable.push_back(work_tag(m_chain, stage));
    }
  }
  return removable;
}

void Run::disk_log(const std::string& line) {
  m_folder.log(line);
  if (line.find("[disk-reclaim]") != std::string::npos || line.find("WARN") != std::string::npos) {
    m_console.note(line);
  }
}

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

void Run::start_sampler() {
  if (m_chain.resources.sample_interval.count() <= 0) {
    return;
  }
  auto interval = m_chain.resources.sample_interval;
  m_sampler = std::make_unique<ResourceSampler>(m_folder.path() / "resources.csv",
                                                m_chain.disk.path, interval);
  m_sampler->set_phase("init");
  if (auto started = m_sampler->start(); !started) {
    m_folder.log("warning: no resource sampling: " + started.error());
    m_sampler.reset();
  }
}

void Run::finish_sampler() {
  if (!m_sampler) {
    return;
  }
  m_sampler->set_phase("done");
  m_sampler->stop();
  m_sampler.reset();
  auto rows = read_resource_csv(m_folder.path() / "resources.csv");
  if (!rows) {
    m_folder.log("warning: " + rows.error());
    return;
  }
  m_record.resources = summarize(*rows);
  std::string table = format_summary(m_record.resources);
  m_folder.log("resources per phase:\n" + table);
  m_console.note("resources per phase (resources.csv):");
  for (const auto& line : split(table, '\n')) {
    if (!line.empty()) {
      m_console.note("  " + line);
    }
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

bool Run::prepare_budget(const Stage& stage, const BuildRequest& request, const Budget& share,
                         StageRecord& record) {
  record.jobs = share.jobs;
  record.memory_limit_gb = share.memory_limit_gb;
  for (const auto& secret : request.secrets) {
    if (secret.id != k_budget_secret) {
      continue;
    }
    m_folder.log(fmt::format("stage {}: budget: {}", stage.name, share.reason));
    std::error_code ignored;
    std::filesystem::create_directories(secret.file.parent_path(), ignored);
    if (auto written =
            write_file_atomic(secret.file, budget_file_text(share), Durability::rename_only);
        !written) {
      // The build would fail on the missing secret file with a message that names neither
      // kiln nor the write: say what failed here instead.
      record.failure = fmt::format("the job budget the Dockerfile mounts as secret '{}' could not "
                                   "be written: {}",
                                   k_budget_secret, written.error());
      return false;
    }
  }
  return true;
}

void Run::save() {
  std::lock_guard lock(m_save_mutex);
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

void Run::attempt_ended(const Stage& stage, const AttemptRecord& a) {
  m_events.emit(EventType::attempt_ended, {{"stage", stage.name},
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

void Run::export_trace() {
  std::string endpoint = m_chain.otlp_endpoint;
  if (const char* env = std::getenv("OTEL_EXPORTER_OTLP_ENDPOINT");
      endpoint.empty() && env != nullptr) {
    endpoint = env;
  }
  if (endpoint.empty()) {
    return;
  }
  while (endpoint.ends_with('/')) {
    endpoint.pop_back();
  }
  const std::string url = endpoint + "/v1/traces"; // OTLP/HTTP's path for spans
  std::filesystem::path events = m_folder.path() / "events.jsonl";
  auto sent = [&]() -> tl::expected<size_t, std::string> {
    auto text = read_file(events);
    if (!text) {
      return tl::unexpected(text.error());
    }
    auto trace = forensics::trace_from_events(*text, events.string());
    if (!trace) {
      return tl::unexpected(trace.error());
    }
    auto status = http_post(url, "application/json",
                            forensics::otlp_trace(*trace).dump(
                                -1, ' ', false, nlohmann::json::error_handler_t::replace),
                            std::chrono::seconds(10));
    if (!status) {
      return tl::unexpected(status.error());
    }
    if (*status < 200 || *status >= 300) {
      return tl::unexpected(fmt::format("{} answered HTTP {}", url, *status));
    }
    return trace->spans.size();
  }();
  if (sent) {
    m_folder.log(fmt::format("trace: {} span(s) sent to {}", *sent, url));
  } else {
    std::string line = fmt::format("warning: the run's trace was not sent to {}: {}; `kiln trace "
                                   "{} --format otlp` writes it",
                                   url, sent.error(), m_record.run_id);
    m_folder.log(line);
    m_console.note(line);
  }
}

std::string Run::stop_cause() const {
  if (interrupt_signal() != 0) {
    return "interrupted by " + interrupt_signal_name();
  }
  return m_stopped_by_error ? "stopped by an internal error" : "stopped";
}

bool has_registry_cache(const BuildRequest& request) {
  return !request.cache_from.empty() || !request.cache_to.empty();
}

void Run::drop_registry_cache_after_flakes(const Stage& stage, BuildRequest& request,
                                           int import_flakes, int next_attempt) {
  if (request.drop_registry_cache || !has_registry_cache(request) ||
      import_flakes < m_chain.cache.import_flakes_before_drop) {
    return;
  }
  request.drop_registry_cache = true;
  std::vector<std::string> dropped;
  for (const auto& spec : request.cache_from) {
    dropped.push_back("--import-cache " + spec);
  }
  for (const auto& spec : request.cache_to) {
    dropped.push_back("--export-cache " + spec);
  }
  std::string message = fmt::format(
      "stage {}: {} registry cache-import flake(s); attempt {} drops every registry-facing cache "
      "argument ({}) and finishes on the local tier{}",
      stage.name, import_flakes, next_attempt, join(dropped, "; "),
      request.cache_slug.empty() ? " (none is configured: it builds without a cache import)"
                                 : " (" + request.cache_slug.string() + ")");
  m_folder.log(message);
  m_console.note(message);
}

void Run::withdraw(const Stage& stage, const BuildRequest& request, const std::string& identity,
                   const std::string& why) {
  m_identities.erase(stage.name);
  if (auto withdrawn = m_engine.withdraw_image(request, identity, stage.tag); !withdrawn) {
    m_folder.log(fmt::format("stage {}: warning: its image stays where a later stage finds it "
                             "although {}: {}",
                             stage.name, why, withdrawn.error()));
  } else {
    m_folder.log(fmt::format("stage {}: its image was withdrawn ({}) because {}", stage.name,
                             request.tag, why));
  }
}

AttemptOutcome Run::run_logged(const Stage& stage, const BuildRequest& request, AttemptRecord& a,
                               const ProgressListener& on_progress) {
  Steady::time_point start = m_clock.steady();
  auto log = m_folder.open_log(a.log, true);
  if (!log) {
    AttemptOutcome outcome;
    outcome.exit.spawn_error = "not started: its log cannot be written: " + log.error();
    outcome.evidence.push_back(outcome.exit.spawn_error);
    outcome.engine_evidence = outcome.evidence;
    a.exit_code = -1;
    return outcome;
  }
  BuildLimits limits{stage.timeout, stage.stall_timeout, &m_cancel};
  AttemptOutcome outcome;
  {
    Unlocked waiting(m_mutex);
    outcome = run_attempt(m_engine, request, *log, on_progress, limits,
                          [&] { m_console.stage_output(stage.name); });
  }
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
                                   stage.name, a.clip_lines.front(), a.log, k_lift_log_limit);
    m_folder.log(line);
    m_console.note(line);
  }
  if (outcome.exit.stalled || outcome.exit.timed_out) {
    a.stopped_by = outcome.exit.stalled ? "stall" : "timeout";
    a.last_line = printable(outcome.last_line_at_stop.substr(0, 500));
    a.silent_seconds = std::chrono::duration<double>(outcome.exit.silent_for).count();
  }
  return outcome;
}

AttemptRecord& Run::begin_attempt(StageRecord& record, const BuildRequest& request, int number,
                                  std::string log) {
  AttemptRecord& attempt = record.attempts.emplace_back();
  attempt.number = number;
  attempt.started = utc_iso8601(m_clock.wall());
  attempt.log = std::move(log);
  // Built now, not at the start of the run: the digests of the stages it needs and the cache
  // tiers it uses are known only now.
  attempt.command = shown_command(m_engine.build_argv(request), request.build_args);
  attempt.registry_cache_dropped = request.drop_registry_cache && has_registry_cache(request);
  save();
  m_events.emit(EventType::attempt_started, {{"stage", record.name},
                                             {"attempt", number},
                                             {"command", attempt.command},
                                             {"log", attempt.log}});
  return attempt;
}

void Run::not_started(const Stage& stage, StageRecord& record, std::string status) {
  record.status = std::move(status);
  record.ended = utc_iso8601(m_clock.wall());
  m_console.note(fmt::format("[{}] not started: {}", stage.name, record.failure));
  save();
}

void Run::gate_log(const Stage& stage, const GateRecord& gate) {
  m_events.emit(EventType::gate_verdict, {{"stage", stage.name},
                                          {"gate", gate.gate},
                                          {"subject", gate.subject},
                                          {"verdict", gate.verdict},
                                          {"findings", gate.findings.size()},
                                          {"reason", gate.reason}});
  for (const auto& line : gate_lines(stage.name, gate)) {
    m_folder.log(line);
    if (gate.verdict != "pass" || line.find(" gate: warning: ") != std::string::npos) {
      m_console.note(line);
    }
  }
}

Run::StageEnd Run::parent_gates(const Stage& stage, const BuildRequest& request,
                                StageRecord& record) {
  bool refused = false;
  std::string unreadable;
  std::vector<GateRecord> graded;
  {
    Unlocked waiting(m_mutex); // a parent may have to be pulled
    graded = m_gates->grade_parents(stage, request);
  }
  for (auto& gate : graded) {
    gate_log(stage, gate);
    refused = refused || gate.verdict == "refused";
    if (gate.verdict == "unreadable" && unreadable.empty()) {
      unreadable = gate.subject + ": " + gate.reason;
    }
    record.gates.push_back(std::move(gate));
  }
  if (refused) {
    record.failure = "the image-env gate refused a parent this run did not build: rebuild it "
                     "from a Dockerfile that passes `kiln lint` (a build-host setting belongs in "
                     "an ARG or a secret, never in ENV)";
    return StageEnd::refused;
  }
  if (!unreadable.empty()) {
    record.failure = "the image-env gate could not read a parent this run did not build (" +
                     unreadable + "); rebuild it in this run";
    return StageEnd::unverified;
  }
  return StageEnd::ok;
}

SmokeVerdict Run::smoke_gate(const Stage& stage, StageRecord& record,
                             const std::filesystem::path& log) {
  auto text = read_file(log);
  SmokeCounts counts = find_test_summaries(text ? split(*text, '\n') : std::vector<std::string>());
  SmokeRecord smoke;
  smoke.min_passed = stage.min_passed.value_or(m_chain.gates.min_passed);
  smoke.max_skipped = stage.max_skipped.value_or(m_chain.gates.max_skipped);
  SmokeVerdict verdict = judge_smoke(counts, smoke.min_passed, smoke.max_skipped);
  smoke.passed = counts.passed;
  smoke.failed = counts.failed;
  smoke.skipped = counts.skipped;
  for (const auto& summary : counts.summaries) {
    smoke.summaries.push_back(
        fmt::format("{} line {}: {}", summary.format, summary.line, summary.text));
  }
  smoke.verdict = verdict.ok ? "pass" : "failed";
  smoke.reason = verdict.reason;
  m_folder.log(fmt::format("stage {}: smoke: {} passed, {} failed, {} skipped in {} summar{} "
                           "(floors: min_passed {}, max_skipped {}): {}",
                           stage.name, counts.passed, counts.failed, counts.skipped,
                           counts.summaries.size(), counts.summaries.size() == 1 ? "y" : "ies",
                           smoke.min_passed, smoke.max_skipped,
                           verdict.ok ? "pass" : verdict.reason));
  record.smoke = std::move(smoke);
  return verdict;
}

std::string Run::post_build_gates(const Stage& stage, StageRecord& record,
                                  const std::filesystem::path& log, const NamedContext& image) {
  if (stage.kind == StageKind::smoke) {
    const AttemptRecord& build = record.attempts.back();
    if (build.log_truncated_at_byte) {
      // A log kiln itself cut holds no verdict on the tests: saying so is not a refusal.
      m_unverified.push_back("unverified:smoke:" + stage.name);
      return fmt::format("unverified: the smoke gate cannot judge {}: kiln could not write it "
                         "whole (cut at byte {}: {}), so the tests' summary may be what was lost",
                         build.log, *build.log_truncated_at_byte,
                         m_folder.write_errors().empty() ? "a record write failed"
                                                         : m_folder.write_errors().front());
    }
    if (SmokeVerdict verdict = smoke_gate(stage, record, log); !verdict.ok) {
      m_refused.push_back("refused:smoke:" + stage.name);
      return "smoke gate: " + verdict.reason;
    }
  }
  if (graded_after_build(m_chain, stage)) {
    GateRecord gate;
    {
      Unlocked waiting(m_mutex);
      gate = m_gates->grade_built(stage, image);
    }
    if (interrupt_signal() != 0 || m_cancel.cancelled()) {
      return {}; // an inspect stopped by Ctrl-C left no verdict: build_stage says interrupted
    }
    gate_log(stage, gate);
    std::string verdict = gate.verdict;
    std::string reason = gate.reason;
    record.gates.push_back(std::move(gate));
    if (verdict == "unreadable") {
      m_unverified.push_back("unverified:image-env:" + stage.name);
      return fmt::format("unverified: the image-env gate cannot read the config of the image of "
                         "stage {}: {}",
                         stage.name, reason);
    }
    if (verdict != "pass") {
      m_refused.push_back("refused:image-env:" + stage.name);
      return fmt::format("image-env gate: the image of stage {} carries the build host{}; move "
                         "each setting to an ARG or a secret, never ENV or a build arg a RUN "
                         "spells out (details in driver.log)",
                         stage.name,
                         stage.known_as() == m_chain.gates.final_stage
                             ? " and is not published (no flag waives this gate)"
                             : "");
    }
  }
  if (layers_read_after_build(m_chain, stage)) {
    return layer_gates(stage, record, image);
  }
  return {};
}

std::string Run::layer_gates(const Stage& stage, StageRecord& record, const NamedContext& image) {
  std::vector<GateRecord> gates;
  {
    Unlocked waiting(m_mutex);
    gates = m_gates->grade_layers(stage, image, image.identity);
  }
  if (interrupt_signal() != 0 || m_cancel.cancelled()) {
    return {}; // a read stopped by Ctrl-C left no verdict: build_stage says interrupted
  }
  std::string failure;
  for (auto& gate : gates) {
    gate_log(stage, gate);
    if (gate.verdict == "unreadable") {
      m_unverified.push_back(fmt::format("unverified:{}:{}", gate.gate, stage.name));
    } else if (gate.verdict != "pass") {
      m_refused.push_back(fmt::format("refused:{}:{}", gate.gate, stage.name));
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
                            stage.name,
                            stage.known_as() == m_chain.gates.final_stage ? " and is not published"
                                                                          : "")
          : gate.gate == "arch"
              ? fmt::format("arch gate: the image of stage {} holds ELF files of another "
                            "platform: {}",
                            stage.name, join(gate.findings, "; "))
              : fmt::format("artifacts gate: the image of stage {}: {}", stage.name,
                            join(gate.findings, "; "));
    }
    record.gates.push_back(std::move(gate));
  }
  return failure;
}

Run::Attempts Run::attempt_until_done(const Stage& stage, BuildRequest& request,
                                      StageRecord& record, int index, int count) {
  const char* what = "attempt";
  Steady::time_point start = m_clock.steady();
  int import_flakes = 0;
  std::optional<Tail> previous_tail;
  std::optional<std::string> previous_stall; // the step where the previous attempt stalled
  for (int n = 1; n <= stage.attempts; ++n) {
    AttemptRecord& begun = begin_attempt(record, request, n, RunFolder::attempt_log(stage.name, n));
    record.command = begun.command;
    m_folder.log(fmt::format("stage {}: {} {}/{} start: {}", stage.name, what, n, stage.attempts,
                             begun.command));
    StageView view{index, count, stage.name, n, stage.attempts, std::nullopt, "building"};
    if (auto eta = m_eta.find(stage.name); eta != m_eta.end()) {
      view.eta_seconds = eta->second;
    }
    m_console.stage_started(view);

    AttemptRecord& a = record.attempts.back();
    std::pair<int, int> step_seen{0, 0}; // (Dockerfile stage, step) of the last step.started
    AttemptOutcome outcome = run_logged(stage, request, a, [&](const BuildProgress& progress) {
      m_console.stage_progress(stage.name, progress);
      set_stage_phase(stage.name, phase_name(stage, progress));
      if (progress.step > 0 && std::pair{progress.build_stage, progress.step} != step_seen) {
        step_seen = {progress.build_stage, progress.step};
        m_events.emit(EventType::step_started,
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
    record.seconds = seconds_since(start);

    if (outcome.exit.interrupted || interrupt_signal() != 0) {
      a.verdict = "interrupted";
      a.reason = stop_cause() + "; the engine's process group was stopped";
      attempt_ended(stage, a);
      m_folder.log(
          fmt::format("stage {}: {} {}/{} {}", stage.name, what, n, stage.attempts, a.reason));
      m_console.stage_finished(stage.name,
                               fmt::format("interrupted after {}", human_duration(a.seconds)));
      return {StageEnd::interrupted, std::move(outcome)};
    }
    a.compile = outcome.compile;
    if (auto fell_back = a.compile ? compile_fallback_warning(*a.compile) : std::nullopt) {
      m_folder.log(fmt::format("stage {}: {} {}/{} warning: {}", stage.name, what, n,
                               stage.attempts, *fell_back));
      m_console.note(fmt::format("warning: stage {}: {}", stage.name, *fell_back));
    }
    if (outcome.exit.ok()) {
      a.verdict = "ok";
      attempt_ended(stage, a);
      return {StageEnd::ok, std::move(outcome)};
    }

    FailureVerdict verdict;
    if (outcome.exit.stalled) {
      std::string step = step_name(outcome.progress);
      verdict = classify_stall(step, previous_stall, n, stage.attempts, a.silent_seconds);
      a.matched_line = a.last_line;
      previous_stall = step;
    } else if (outcome.exit.timed_out) {
      verdict.verdict = Verdict::permanent;
      verdict.reason = fmt::format("stopped at its time limit of {} (timeout_s) during {}; raise "
                                   "the stage's timeout_s if the step needs longer",
                                   human_duration(a.seconds), step_name(outcome.progress));
      previous_stall.reset();
    } else {
      verdict = classify_failure(outcome.evidence, previous_tail, n, stage.attempts, m_classes,
                                 &outcome.engine_evidence);
      previous_stall.reset();
    }
    if (std::string explained = m_engine.explain_failure(outcome.evidence); !explained.empty()) {
      verdict.reason = explained + "; " + verdict.reason;
    }
    a.verdict = verdict_name(verdict.verdict);
    a.transient_class = verdict.class_name;
    if (!verdict.matched_line.empty()) {
      a.matched_line = verdict.matched_line;
    }
    a.reason = verdict.reason;
    attempt_ended(stage, a);
    std::string failed =
        fmt::format("stage {}: {} {}/{} failed (exit {}) after {:.1f}s: {}", stage.name, what, n,
                    stage.attempts, a.exit_code, a.seconds, a.verdict);
    if (!verdict.class_name.empty()) {
      failed +=
          fmt::format(", class {}, matched line: \"{}\"", verdict.class_name, verdict.matched_line);
    }
    failed += "; " + verdict.reason;
    std::string log_path = (m_folder.path() / a.log).string();
    if (verdict.verdict != Verdict::retry) {
      record.failure = verdict.reason;
      if (stage.kind == StageKind::smoke) {
        smoke_gate(stage, record, m_folder.path() / a.log); // the counts, for the record
      }
      m_folder.log(failed);
      m_console.stage_finished(stage.name, fmt::format("failed after {}: {}",
                                                       human_duration(a.seconds), record.failure));
      show_failing_step_errors(stage, log_path);
      m_console.failure_tail(outcome.tail, log_path);
      salvage_failed_build({m_chain, m_engine, m_folder, m_console, m_options.no_salvage, m_cancel,
                            [this] { save(); },
                            [this](const std::function<void()>& work) {
                              Unlocked waiting(m_mutex);
                              work();
                            }},
                           stage, request, outcome.finished_build_stages, record);
      return {StageEnd::failed, std::move(outcome)};
    }
    std::chrono::milliseconds cooldown = cooldown_before(n + 1, m_chain.defaults);
    double cooldown_s = std::chrono::duration<double>(cooldown).count();
    m_folder.log(failed + fmt::format("; retrying in {:.0f}s", cooldown_s));
    // A stall matched no line: what the step printed last says where it hung.
    std::string detail = a.matched_line.empty() ? "it printed nothing" : a.matched_line;
    m_console.stage_finished(stage.name, fmt::format("{} {}/{} failed ({}: {}); retrying in {}",
                                                     what, n, stage.attempts, verdict.class_name,
                                                     printable(detail.substr(0, 200)),
                                                     human_duration(cooldown_s)));
    if (verdict.class_name == k_cache_import_class) {
      drop_registry_cache_after_flakes(stage, request, ++import_flakes, n + 1);
    }
    save();
    previous_tail = std::move(outcome.evidence);
    bool slept = false;
    {
      Unlocked waiting(m_mutex);
      slept = m_clock.sleep_for(cooldown, m_cancel);
    }
    if (!slept) {
      m_folder.log(fmt::format("stage {}: interrupted during the cooldown", stage.name));
      return {StageEnd::interrupted, {}};
    }
  }
  return {StageEnd::failed, {}}; // unreachable: the last attempt's verdict is never `retry`
}

Run::StageEnd Run::build_stage(const Stage& stage, BuildRequest request, int index, int count) {
  StageRecord& record = *m_record.find_stage(stage.name);
  Attempts built = attempt_until_done(stage, request, record, index, count);
  if (built.end != StageEnd::ok) {
    return built.end;
  }
  const AttemptRecord build = record.attempts.back();
  // From here on the image is its identity: every gate reads it, every later stage is handed
  // it, whatever a tag says meanwhile.
  record.image_id = m_engine.built_image(request, built.outcome.progress);
  NamedContext image = stage_context(m_chain, stage);
  image.identity = record.image_id;
  m_identities[stage.name] = record.image_id;
  CompileFloorVerdict floor =
      judge_compile_floor(stage.min_compile_requests, built.outcome.compile, built.outcome.steps);
  record.compile_floor = floor.note;
  if (!floor.ok) {
    record.failure = floor.note;
    m_folder.log(fmt::format("stage {}: attempt {}/{} built, but {}", stage.name, build.number,
                             stage.attempts, floor.note));
    withdraw(stage, request, record.image_id, "it failed its compile-request floor");
    m_console.stage_finished(stage.name, "failed: " + floor.note);
    return StageEnd::failed;
  }
  std::string refused = post_build_gates(stage, record, m_folder.path() / build.log, image);
  if (interrupt_signal() != 0 || m_cancel.cancelled()) {
    record.failure = stop_cause() + " after it built, before its gates ended";
    m_folder.log(fmt::format("stage {}: {}", stage.name, record.failure));
    m_console.stage_finished(stage.name, "interrupted");
    withdraw(stage, request, record.image_id, "its gates did not end");
    return StageEnd::interrupted;
  }
  if (!refused.empty()) {
    const bool unverified = refused.starts_with("unverified: ");
    record.failure = unverified ? refused.substr(12) : refused;
    m_folder.log(fmt::format("stage {}: attempt {}/{} built, but {}{}", stage.name, build.number,
                             stage.attempts, unverified ? "" : "the ", record.failure));
    m_console.stage_finished(stage.name,
                             (unverified ? "unverified: " : "refused: ") + record.failure);
    withdraw(stage, request, record.image_id,
             unverified ? "a gate could not read it" : "a gate refused it");
    return unverified ? StageEnd::unverified : StageEnd::refused;
  }
  std::string vertices = build.vertices > 0 ? fmt::format(", {}/{} vertices cached",
                                                          build.vertices_cached, build.vertices)
                                            : std::string();
  m_folder.log(fmt::format("stage {}: attempt {}/{} ok in {:.1f}s, {}/{} steps cached{}, image {}",
                           stage.name, build.number, stage.attempts, build.seconds,
                           build.steps_cached, build.steps_run, vertices, record.image_id));
  m_console.stage_finished(stage.name,
                           fmt::format("ok in {}{}", human_duration(build.seconds),
                                       every_step_cached(build) ? " (all steps cached)" : ""));
  return StageEnd::ok;
}

void Run::watch_building() {
  std::string building = join(std::vector<std::string>(m_building.begin(), m_building.end()), ",");
  if (building == m_episode) {
    return;
  }
  m_episode = building;
  if (building.empty()) {
    m_watchdog->stop();
  } else {
    m_watchdog->start(building, protected_slugs());
  }
}

void Run::set_stage_phase(const std::string& stage, const std::string& phase) {
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

Run::StageEnd Run::run_stage(size_t index, BuildRequest request, const Budget& share) {
  const Stage& stage = *(*m_stages)[index];
  StageRecord& record = *m_record.find_stage(stage.name);
  set_stage_phase(stage.name, stage.name);
  double floor = stage.disk_floor_gb.value_or(m_chain.disk.floor_gb);
  if (floor > 0) {
    // Images only while no other stage builds: an image prune once took a blob out from under
    // a running build.
    GateResult gate = stage_floor(m_disk, stage.name, floor, protected_slugs(), m_store,
                                  removable_tags(), m_building.empty());
    for (const auto& line : gate.lines) {
      disk_log(line);
    }
    if (!gate.ok) {
      record.failure = gate.message;
      m_folder.log(fmt::format("stage {}: disk floor refused it: {}", stage.name, gate.message));
      not_started(stage, record, "failed");
      return StageEnd::failed;
    }
  }
  StageEnd parents = parent_gates(stage, request, record);
  if (interrupt_signal() != 0 || m_cancel.cancelled()) {
    // A Ctrl-C stops the pulls and inspects of the gates too; what they left is no verdict.
    record.failure = stop_cause() + " before it started";
    not_started(stage, record, "interrupted");
    return StageEnd::interrupted;
  }
  if (parents != StageEnd::ok) {
    bool refused = parents == StageEnd::refused;
    (refused ? m_refused : m_unverified)
        .push_back(fmt::format("{}:image-env:{}", refused ? "refused" : "unverified", stage.name));
    not_started(stage, record, refused ? "refused" : "unverified");
    return parents;
  }
  if (share.memory_limit_gb > 0 && !prepare_budget(stage, request, share, record)) {
    m_folder.log(fmt::format("stage {}: not started: {}", stage.name, record.failure));
    not_started(stage, record, "failed");
    return StageEnd::failed;
  }
  // Each stage it needs by the image this run built or looked up, never by a tag.
  for (size_t i = 0; i < request.contexts.size() && i < stage.needs.size(); ++i) {
    if (auto identity = m_identities.find(stage.needs[i]); identity != m_identities.end()) {
      request.contexts[i].identity = identity->second;
    }
  }
  m_building.insert(stage.name);
  watch_building();
  return build_stage(stage, std::move(request), static_cast<int>(index) + 1,
                     static_cast<int>(m_stages->size()));
}

void Run::stage_ended(size_t index, StageEnd end) {
  const Stage& stage = *(*m_stages)[index];
  StageRecord& record = *m_record.find_stage(stage.name);
  set_stage_phase(stage.name, "");
  m_building.erase(stage.name);
  watch_building();
  record.ended = utc_iso8601(m_clock.wall());
  switch (end) {
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
  m_scheduler->finish(index, end == StageEnd::ok);
  record_skipped();
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
                   const std::vector<BuildRequest>& requests, const Budget& budget,
                   DiskWatchdog& watchdog) {
  std::vector<PlanStage> plan = plan_stages(stages);
  int max_parallel = m_options.parallel.value_or(
      m_chain.resources.max_parallel.value_or(std::max(1, budget.slots)));
  std::unique_lock lock(m_mutex);
  m_stages = &stages;
  m_watchdog = &watchdog;
  m_record.max_parallel = max_parallel;
  m_scheduler.emplace(std::move(plan),
                      SchedulerLimits{max_parallel, budget.slots, m_options.fail_fast,
                                      m_chain.max_lanes.value_or(0)});
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
  struct Ended {
    size_t index;
    StageEnd end;
    std::exception_ptr error;
  };
  std::deque<Ended> ended;
  std::condition_variable wake;
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
        // Started here, in run order, not when its thread first gets the record: stages ready
        // together start in the order the docs promise.
        StageRecord& started = *m_record.find_stage(stage.name);
        started.status = "running";
        started.started = utc_iso8601(m_clock.wall());
        m_events.emit(EventType::stage_started, {{"stage", stage.name}, {"lane", started.lane}});
        Budget share = budget_share(budget, start.slots, stage.mem_per_job_gb);
        threads[start.stage] = std::thread([this, &ended, &wake, &requests, start, share] {
          std::unique_lock held(m_mutex);
          Ended end{start.stage, StageEnd::failed, nullptr};
          try {
            end.end = run_stage(start.stage, requests[start.stage], share);
          } catch (...) {
            end.error = std::current_exception();
          }
          ended.push_back(end);
          wake.notify_all();
        });
      }
      // Woken by a stage that ended; a tenth of a second at most, to notice Ctrl-C.
      wake.wait_for(lock, std::chrono::milliseconds(100), [&] { return !ended.empty(); });
      while (!ended.empty()) {
        Ended end = ended.front();
        ended.pop_front();
        // It let go of the record to be seen here: it has nothing left to do but return.
        threads[end.index].join();
        threads.erase(end.index);
        if (end.error) {
          error = error ? error : end.error;
          m_stopped_by_error = true;
          m_cancel.cancel(); // the run cannot end well: stop every build now
          end.end = StageEnd::crashed;
        }
        stage_ended(end.index, end.end);
      }
    }
  } catch (...) {
    error = error ? error : std::current_exception();
    m_stopped_by_error = true;
    m_cancel.cancel();
    m_scheduler->stop("an internal error");
    record_skipped();
  }
  {
    Unlocked joining(m_mutex);
    for (auto& [stage, thread] : threads) {
      thread.join();
    }
  }
  if (error) {
    std::rethrow_exception(error);
  }
}

void Run::move_stable_tags() {
  for (size_t i = 0; i < m_stages->size(); ++i) {
    const Stage& stage = *(*m_stages)[i];
    StageRecord& record = *m_record.find_stage(stage.name);
    auto identity = m_identities.find(stage.name);
    if (record.status != "ok" || identity == m_identities.end()) {
      continue;
    }
    std::vector<std::string> untested;
    for (const Stage* guard : guarding_smoke_stages(m_chain, stage)) {
      const StageRecord* ran = m_record.find_stage(guard->name);
      if (ran == nullptr || ran->status != "ok") {
        untested.push_back(
            fmt::format("{} {}", guard->name,
                        ran == nullptr ? "did not run in this run" : "ended " + ran->outcome));
      }
    }
    if (!untested.empty()) {
      record.tag_held = "a smoke stage that needs it did not pass: " + join(untested, ", ");
      m_folder.log(fmt::format("stage {}: {} stays where it was: {}", stage.name, stage.tag,
                               record.tag_held));
      continue;
    }
    if (auto moved = m_engine.move_tag(identity->second, stage.tag); !moved) {
      record.tag_held = moved.error();
      m_folder.log(fmt::format("stage {}: warning: {} was not moved: {}", stage.name, stage.tag,
                               moved.error()));
      continue;
    }
    record.tag_moved = m_engine.name() == "buildah";
    if (record.tag_moved) {
      m_folder.log(
          fmt::format("stage {}: {} now names {}", stage.name, stage.tag, identity->second));
    }
  }
  save();
}

void Run::publish_all(const std::vector<const Stage*>& stages) {
  std::vector<PublishTarget> targets = publish_targets(m_chain);
  for (size_t n = 0; n < targets.size(); ++n) {
    const PublishTarget& target = targets[n];
    bool selected = std::any_of(target.stages.begin(), target.stages.end(), [&](const Stage* s) {
      return std::find(stages.begin(), stages.end(), s) != stages.end();
    });
    if (!selected) {
      m_folder.log(fmt::format("publish {}: not attempted, this run builds no {} it carries",
                               target.ref, m_chain.gates.final_stage));
      continue;
    }
    PublishRecord& record = m_record.published.emplace_back();
    record.ref = target.ref;
    if (m_interrupted || interrupt_signal() != 0 || m_cancel.cancelled()) {
      record.status = "interrupted";
      record.gates_not_run = {"completeness", "smoke", "coherence"};
      record.gates_not_run.insert(record.gates_not_run.end(), publish_steps().begin(),
                                  publish_steps().end());
      m_folder.log(fmt::format("publish {}: not attempted, the run was interrupted", target.ref));
      m_events.emit(EventType::publish_ended, {{"ref", record.ref}, {"status", record.status}});
      save();
      continue;
    }
    m_console.note(fmt::format("publish {}: {} image(s)", target.ref, target.stages.size()));
    std::string started = utc_iso8601(m_clock.wall());
    Steady::time_point start = m_clock.steady();
    record.started = started;
    save();
    set_stage_phase("publish", "publish");
    // The stages' threads have ended, and with them the watch that turns Ctrl-C into the run's
    // token: Ctrl-C reaches the publish through the interrupt token itself.
    record =
        publish({m_chain, m_engine, *m_gates, m_record, m_folder, m_identities,
                 m_options.build_arg_overrides, m_classes, m_clock, interrupt_token(),
                 [this](const std::string& line) {
                   m_folder.log(line);
                   m_console.note(line);
                 }},
                target, targets.size() == 1 ? "publish.log" : fmt::format("publish-{}.log", n + 1));
    set_stage_phase("publish", "");
    record.started = started;
    record.seconds = seconds_since(start);
    for (const auto& lane : record.lanes) {
      m_folder.log(fmt::format("publish {}: {} ({}): {} {}{}{}", record.ref, lane.stage,
                               lane.platform, lane.image, lane.identity,
                               lane.digest.empty() ? "" : " staged as " + lane.digest,
                               lane.detail.empty() ? "" : " (" + lane.detail + ")"));
    }
    std::string line = fmt::format("publish {}: {}", record.ref, record.status);
    if (record.status == "published") {
      line += fmt::format(" {} ({} image(s) with provenance and SBOM, read back from the "
                          "registry{})",
                          record.digest, record.lanes.size(),
                          m_chain.publish.sign.empty() ? "" : ", signed");
    } else {
      line += ": " + record.failure;
      if (!record.gates_not_run.empty()) {
        line += "; not run: " + join(record.gates_not_run, ", ");
      }
    }
    m_folder.log(line);
    m_console.note(line);
    if (record.status == "blocked" && m_failed.empty() && m_refused.empty()) {
      m_refused.push_back("refused:publish");
    } else if (record.status == "failed") {
      m_failed.push_back("publish");
    } else if (record.status == "interrupted") {
      m_interrupted = true;
    }
    m_events.emit(EventType::publish_ended, {{"ref", record.ref},
                                             {"status", record.status},
                                             {"digest", record.digest},
                                             {"failure", record.failure}});
    save();
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
  // However it ended: its temporary folder, and what a build stopped hard (a second Ctrl-C)
  // left in the engine's store.
  for (const auto& line : remove_leftovers(find_leftovers(m_chain, m_engine.name()))) {
    m_folder.log(line);
  }
  return exit_code;
}

int Run::crashed(const std::string& reason) {
  // From the main thread once every stage's thread has ended, or from any thread at all when
  // an exception escaped one (std::terminate): then the record is taken from the stages as
  // soon as they let go of it, or, when the crashing thread itself holds it, after a moment.
  std::unique_lock record(m_mutex, std::defer_lock);
  for (int tries = 0; tries < 200 && !record.try_lock(); ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  m_stopped_by_error = true;
  m_cancel.cancel();
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

void Run::show_failing_step_errors(const Stage& stage, const std::string& log_path) {
  std::optional<forensics::LogResult> analysed;
  {
    Unlocked waiting(m_mutex); // one pass over a log that may be gigabytes
    if (auto result = forensics::analyze_log_file(log_path, log_path, forensics::Options{})) {
      analysed = std::move(*result);
    }
  }
  if (!analysed) {
    return;
  }
  for (const forensics::StepResult& step : analysed->steps) {
    if (!step.errors.empty() && !step.errors_from_tail) {
      m_console.failure_errors(stage.name, step.name, step.errors, step.error_lines_total);
      return;
    }
  }
}

void Run::note_history() {
  HistoryNotes notes = index_finished_run(m_chain, m_folder.path());
  if (!notes.warning.empty()) {
    m_folder.log("warning: the run history was not updated: " + notes.warning);
    m_console.note("warning: the run history was not updated: " + notes.warning);
  }
  for (const std::string& line : notes.regressions) {
    m_folder.log("regression: " + line);
    m_console.note("regression: " + line);
  }
  if (m_options.output != nullptr) {
    m_options.output->log_analysis = std::move(notes.log_analysis);
  }
}

int Run::execute_stages(const std::vector<const Stage*>& stages,
                        const std::vector<BuildRequest>& requests) {
  RunForecast forecast = forecast_run(m_chain, stages);
  m_eta = std::move(forecast.etas);
  Steady::time_point start = m_clock.steady();
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
  if (m_seams.store == nullptr) {
    m_owned_store = make_store_levers(m_chain);
  }
  m_store = m_seams.store != nullptr ? m_seams.store : m_owned_store.get();
  for (const auto& line : normalize_policy(m_disk)) {
    disk_log(line);
  }
  if (GateResult gate = preflight(m_disk); !gate.ok || !gate.lines.empty()) {
    for (const auto& line : gate.lines) {
      disk_log(line);
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
  start_sampler();
  DiskWatchdog watchdog(
      m_disk, [this](const std::string& line) { disk_log(line); }, m_store);
  std::optional<Budget> budget = run_budget();
  schedule(stages, requests,
           budget.value_or(Budget{0, online_cores(), online_cores(), online_cores(), 0, ""}),
           watchdog);
  watchdog.stop();
  move_stable_tags();
  publish_all(stages);
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

} // namespace

int run_chain(const Chain& chain, const Engine& engine, const RunOptions& options, Console& console,
              std::FILE* errors, const RunSeams& seams) {
  auto selected = select_stages(chain, options.selection);
  if (!selected) {
    report({error_line(selected.error())}, errors);
    return k_exit_usage;
  }
  const std::vector<const Stage*>& stages = *selected;
  std::vector<std::string> problems = check_request(stages, options);
  auto lint = lint_stage_dockerfiles(chain, stages);
  problems.insert(problems.end(), lint.begin(), lint.end());
  std::filesystem::path tools = kiln_tools_dir(chain.records);
  std::vector<BuildRequest> requests;
  for (const Stage* stage : stages) {
    requests.push_back(build_request(chain, *stage, options.build_arg_overrides, tools));
    requests.back().drop_registry_cache = options.no_cache_export;
    requests.back().no_cache = options.no_cache || stage->kind == StageKind::smoke;
  }

  if (options.dry_run) {
    if (!report(problems, errors)) {
      return k_exit_usage;
    }
    for (size_t i = 0; i < stages.size(); ++i) {
      fmt::print("# [{}/{}] {}\n{}\n", i + 1, stages.size(), stages[i]->name,
                 shown_command(engine.build_argv(requests[i]), requests[i].build_args));
    }
    return k_exit_ok;
  }

  auto version = engine_versions(engine, requests, chain.records);
  std::vector<std::string> version_warnings;
  if (!version) {
    problems.push_back(error_line(version.error()));
  } else {
    version_warnings = version->warnings;
    for (const auto& problem : version->problems) {
      problems.push_back(error_line(problem));
    }
    if (!publish_targets(chain).empty()) {
      // Published images are pushed with skopeo whatever the engine: a host without it would
      // learn so only after every stage built.
      if (CapturedRun skopeo = run_captured({"skopeo", "--version"}); !skopeo.exit.ok()) {
        problems.push_back(error_line(fmt::format(
            "the chain publishes ({}), which kiln pushes with skopeo, and skopeo is not usable "
            "({}); install it (Debian: apt-get install skopeo)",
            chain.publish.index.empty() ? "[chain] registry" : "[publish] index",
            skopeo.failure())));
      }
    }
    auto outside = check_outside_needs(chain, stages, engine);
    problems.insert(problems.end(), outside.begin(), outside.end());
  }
  if (!report(problems, errors)) {
    return k_exit_usage;
  }
  // Only now: a request refused above must leave nothing behind.
  auto lock = RecordsLock::acquire(chain.records);
  if (!lock) {
    report({error_line(lock.error())}, errors);
    return k_exit_usage;
  }
  for (const auto& line : mark_abandoned_runs(chain.records)) {
    console.note(line);
  }
  // With the lock held no run of this checkout builds: what its engine holds for one is left
  // over from a run that could not clean up (a SIGKILL).
  for (const auto& line : remove_leftovers(find_leftovers(chain, engine.name()))) {
    console.note(line);
  }
  for (const auto& line : remove_stale_staging(chain)) {
    console.note(line);
  }
  if (version->each.size() == 1) {
    // One daemon, one remembered answer: with several, each is asked every run.
    remember_engine_version(chain.records, version->each.front());
  }
  if (auto refreshed = refresh_kiln_tools(chain.records); !refreshed) {
    report({error_line(refreshed.error())}, errors);
    return k_exit_usage;
  }

  const Clock& clock = seams.clock != nullptr ? *seams.clock : real_clock();
  auto now = clock.wall();
  auto folder = RunFolder::create(chain.records, now);
  if (!folder) {
    report({error_line(folder.error())}, errors);
    return k_exit_record;
  }
  for (const auto& warning : version_warnings) {
    console.note("warning: " + warning);
    folder->log("warning: " + warning);
  }
  if (version->each.size() == 1 && version->each.front().remembered) {
    folder->log(fmt::format("engine version {}: as an earlier run asked it, and what answered "
                            "is unchanged ({}), so not asked again",
                            version->text, (chain.records / "engine-version").string()));
  }
  RunRecord record;
  record.run_id = folder->run_id();
  record.chain_name = chain.name;
  record.chain_file = chain.file.string();
  record.engine = engine.name();
  record.engine_version = version->text;
  record.host = host_name();
  record.pid = static_cast<int>(::getpid());
  record.started = utc_iso8601(now);
  for (size_t i = 0; i < stages.size(); ++i) {
    StageRecord s;
    s.name = stages[i]->name;
    s.lane = chain.lanes.empty() ? std::string() : stages[i]->lane;
    s.tag = stages[i]->tag;
    // BuildKit builds into the stage's OCI layout: no name of the host's holds the image.
    s.work_tag = engine.name() == "buildah" ? requests[i].tag : std::string();
    s.min_compile_requests = stages[i]->min_compile_requests;
    for (const auto& need : stages[i]->needs) {
      for (const Stage* other : stages) {
        if (other->name == need) {
          s.needs.push_back(need); // a need outside the selection was built before
        }
      }
    }
    s.command = shown_command(engine.build_argv(requests[i]), requests[i].build_args);
    record.stages.push_back(s);
  }
  lock->describe(record.run_id, record.host, record.started);
  // `latest` moves only once the run has a manifest: it never names a run without a record.
  if (auto written = folder->write_manifest(record); !written || !folder->write_errors().empty()) {
    report({error_line(folder->write_errors().front() + "; nothing was built")}, errors);
    std::error_code ignored;
    std::filesystem::remove_all(folder->path(), ignored);
    return k_exit_record;
  }
  if (auto pointed = folder->point_latest(); !pointed) {
    folder->log("warning: " + pointed.error());
  }
  if (options.output != nullptr) {
    options.output->folder = folder->path();
  }
  // The engine's temporary files live in a folder of the run's own, removed at its end.
  std::filesystem::path temp = run_temp_dir(chain, record.run_id);
  std::error_code made;
  std::filesystem::create_directories(temp, made);
  if (!made) {
    for (auto& request : requests) {
      request.temp_dir = temp;
    }
  }
  Run run(chain, engine, seams, options, console, std::move(*lock), std::move(*folder),
          std::move(record));
  return run.execute(stages, requests);
}

} // namespace kiln
