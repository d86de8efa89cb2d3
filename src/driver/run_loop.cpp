#include "driver/run_loop.h"

#include <unistd.h>

#include <fmt/format.h>

#include "dockerfile/source.h"
#include "driver/abandoned_runs.h"
#include "driver/build_request.h"
#include "driver/engine_version.h"
#include "driver/kiln_tools.h"
#include "driver/leftovers.h"
#include "driver/placement.h"
#include "driver/publish.h"
#include "driver/records_lock.h"
#include "driver/run.h"
#include "driver/shown_command.h"
#include "driver/worker_probe.h"
#include "explain/plan_explain.h"
#include "lint/lint.h"
#include "util/diagnostic.h"
#include "util/strings.h"
#include "util/time.h"

namespace kiln {

namespace {

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
/// Each file's result goes to `kept` too, when given.
std::vector<std::string> lint_stage_dockerfiles(const Chain& chain,
                                                const std::vector<const Stage*>& stages,
                                                std::vector<LintResult>* kept) {
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
    if (kept != nullptr) {
      kept->push_back(std::move(result));
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
  auto lint = lint_stage_dockerfiles(chain, stages,
                                     options.output != nullptr ? &options.output->lint : nullptr);
  problems.insert(problems.end(), lint.begin(), lint.end());
  std::filesystem::path tools = kiln_tools_dir(chain.records);
  std::vector<BuildRequest> requests;
  std::vector<std::string> first_workers;
  for (const Stage* stage : stages) {
    requests.push_back(build_request(chain, *stage, options.build_arg_overrides, tools));
    requests.back().drop_registry_cache = options.no_cache_export;
    requests.back().no_cache = options.no_cache || stage->kind == StageKind::smoke;
    first_workers.emplace_back();
    if (!stage->workers.empty()) {
      // Where it goes when its first choice is free; the run places it when it starts.
      size_t first = rank_workers(chain.name, stage->name, stage->workers).front();
      point_at(requests.back(), *chain.find_worker(stage->workers[first]));
      first_workers.back() = stage->workers[first];
    }
  }

  if (options.dry_run) {
    if (!report(problems, errors)) {
      return k_exit_usage;
    }
    if (!options.explain.empty()) {
      auto plan = explain_plan(chain, engine, stages, requests, first_workers,
                               options.build_arg_overrides, options.no_cache);
      fmt::print("{}",
                 options.explain == "json" ? plan_json(plan).dump(2) + "\n" : plan_text(plan));
      return k_exit_ok;
    }
    // Each need as the run would hand it over: one this run builds by the image it builds,
    // known only then (not the one an earlier run left); one it does not build by the image
    // its last build left, looked up as the run looks it up.
    for (size_t i = 0; i < stages.size(); ++i) {
      for (size_t n = 0; n < requests[i].contexts.size() && n < stages[i]->needs.size(); ++n) {
        const std::string& need = stages[i]->needs[n];
        bool built_here = std::any_of(stages.begin(), stages.end(),
                                      [&](const Stage* s) { return s->name == need; });
        requests[i].contexts[n].identity =
            built_here ? fmt::format("<{} as built in this run>", need)
                       : engine.stage_image_identity(stage_context(chain, *chain.find_stage(need)));
      }
    }
    for (size_t i = 0; i < stages.size(); ++i) {
      fmt::print("# [{}/{}] {}\n{}\n", i + 1, stages.size(), stages[i]->name,
                 shown_command(engine.build_argv(requests[i]), requests[i].build_args));
    }
    return k_exit_ok;
  }

  // A placed stage's daemon is one of its pool's workers, each asked once; the rest build on
  // their lane's daemon or the chain's.
  std::vector<BuildRequest> unplaced;
  bool placed = false;
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i]->workers.empty()) {
      unplaced.push_back(requests[i]);
    } else {
      placed = true;
    }
  }
  WorkerProbe workers;
  if (placed) {
    workers = probe_workers(chain, stages, requests, engine, chain.records);
    for (const auto& problem : workers.problems) {
      problems.push_back(error_line(problem));
    }
  }
  auto version = placed && unplaced.empty()
                     ? tl::expected<EngineVersions, std::string>(EngineVersions{})
                     : engine_versions(engine, unplaced, chain.records);
  if (version && placed) {
    version->text =
        version->text.empty() ? workers.versions : version->text + "; " + workers.versions;
    version->warnings.insert(version->warnings.end(), workers.warnings.begin(),
                             workers.warnings.end());
  }
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
  // Looked at before the abandoned runs are marked: marking moves nothing, but a run marked
  // abandoned now is the one that could not clean up.
  bool crashed_before = latest_run_crashed(chain.records);
  std::vector<std::string> abandoned = mark_abandoned_runs(chain.records);
  for (const auto& line : abandoned) {
    console.note(line);
  }
  // With the lock held no run of this checkout builds: what its engine holds for one is left
  // over from a run that could not clean up (a SIGKILL, a crash). A run that reached its end
  // looked for its own, so the engine's store is asked only after one that did not: listing
  // buildah's containers costs a third of a second.
  std::string engine_store = crashed_before || !abandoned.empty() ? engine.name() : std::string();
  for (const auto& line : remove_leftovers(find_leftovers(chain, engine_store))) {
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
  record.workers = workers.workers;
  record.host = host_name();
  record.pid = static_cast<int>(::getpid());
  record.started = utc_iso8601(now);
  for (size_t i = 0; i < stages.size(); ++i) {
    StageRecord s;
    s.name = stages[i]->name;
    s.lane = chain.lanes.empty() ? std::string() : stages[i]->lane;
    s.tag = stages[i]->stable_name ? stages[i]->tag : std::string();
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
  lock->describe("run " + record.run_id, record.started);
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
