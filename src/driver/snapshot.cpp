#include "driver/snapshot.h"

#include <chrono>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "driver/attempt_runner.h"
#include "driver/build_request.h"
#include "driver/kiln_tools.h"
#include "driver/records.h"
#include "driver/run_loop.h"
#include "engine/buildkit_progress.h"
#include "util/cancel.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/time.h"

namespace kiln {

namespace fs = std::filesystem;

PushedBytes pushed_bytes(const std::string& export_output, const fs::path& slug) {
  PlainProgress plain;
  std::istringstream in(export_output);
  for (std::string line; std::getline(in, line);) {
    plain.feed(line);
  }
  // The recorded status lines: "writing layer sha256:<hex> done", likewise config and manifest.
  PushedBytes pushed;
  std::vector<std::string> seen;
  for (const Vertex& vertex : plain.vertices()) {
    if (vertex.name != "exporting content cache" && vertex.name != "exporting cache to registry") {
      continue;
    }
    for (const auto& status : vertex.statuses) {
      std::string_view text = status;
      if (!text.starts_with("writing ") || !text.ends_with(" done")) {
        continue;
      }
      size_t at = text.find("sha256:");
      if (at == std::string_view::npos) {
        continue;
      }
      std::string digest(text.substr(at + 7, 64));
      if (std::find(seen.begin(), seen.end(), digest) != seen.end()) {
        continue;
      }
      seen.push_back(digest);
      ++pushed.blobs;
      std::error_code error;
      auto size = fs::file_size(slug / "blobs" / "sha256" / digest, error);
      if (error) {
        ++pushed.unsized;
      } else {
        pushed.bytes += size;
      }
    }
  }
  return pushed;
}

int snapshot_stage(const Chain& chain, const Engine& engine, const std::string& stage_name,
                   const KeyValues& overrides, Console& console, std::FILE* errors) {
  auto fail = [&](const std::string& message) {
    fmt::print(errors, "kiln: error: {}\n", message);
    return k_exit_usage;
  };
  const Stage* stage = chain.find_stage(stage_name);
  if (stage == nullptr) {
    return fail(fmt::format("chain {} has no stage '{}'; its stages: {}", chain.name, stage_name,
                            join(chain.stage_names(), ", ")));
  }
  if (engine.name() != "buildkit") {
    return fail("a cache snapshot is a BuildKit registry export; run it with --engine buildkit "
                "or set engine = \"buildkit\" in [chain]");
  }
  if (!stage->snapshot_to) {
    return fail(fmt::format("stage '{}' has no snapshot_cache_to; add snapshot_cache_to = "
                            "\"type=registry,ref=<registry>/<repo>:<tag>,mode=max\" to it",
                            stage_name));
  }
  auto green = last_ok_builds(chain.records);
  if (green.count(stage_name) == 0) {
    return fail(fmt::format("stage '{}' has no green build in {}; a snapshot re-drives a build "
                            "that succeeded (every vertex a cache hit), so run kiln run first",
                            stage_name, chain.records.string()));
  }
  auto version = engine.version();
  if (!version) {
    return fail(version.error());
  }

  BuildRequest request = build_request(chain, *stage, overrides, kiln_tools_dir(chain.records));
  request.cache_from.clear();
  request.cache_to = {stage->snapshot_to->text};
  request.export_local = false; // read the local tier so every vertex hits; leave it as it is
  // The image goes to scratch: the stage's own layout and digest stay those of its green build.
  std::string started = utc_iso8601(std::chrono::system_clock::now());
  std::string id = make_run_id(std::chrono::system_clock::now());
  fs::path folder = chain.records / "snapshots" / (stage_name + "-" + id);
  std::error_code error;
  fs::create_directories(folder, error);
  if (error) {
    return fail(fmt::format("cannot create {}: {}", folder.string(), error.message()));
  }
  request.pushed.clear();
  request.layout = folder / "image";
  request.metadata = folder / "metadata.json";
  for (auto& problem : engine.unsupported({request}, *version)) {
    return fail(problem);
  }
  for (const auto& warning : engine.version_warnings({request}, *version)) {
    console.note("warning: " + warning);
  }

  console.note(fmt::format("snapshot of stage {} (green in run {}) to {}", stage_name,
                           green[stage_name].run_id, stage->snapshot_to->attr("ref")));
  auto start = std::chrono::steady_clock::now();
  fs::path log = folder / "build.log";
  auto log_file = RecordLog::open(log);
  if (!log_file) {
    return fail(log_file.error());
  }
  console.stage_started({1, 1, stage_name, 1, 1, std::nullopt});
  AttemptOutcome outcome =
      run_attempt(engine, request, *log_file, [&](const BuildProgress& progress) {
        console.stage_progress(stage_name, progress);
      });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  console.stage_finished(stage_name, outcome.exit.ok() ? "re-driven" : "stopped");
  fs::remove_all(request.layout, error);

  auto text = read_file(log);
  PushedBytes pushed = pushed_bytes(text ? *text : std::string(), request.cache_slug);
  std::string status = outcome.exit.ok()          ? "ok"
                       : outcome.exit.interrupted ? "interrupted"
                                                  : "failed";
  nlohmann::ordered_json record = {{"stage", stage_name},
                                   {"green_run", green[stage_name].run_id},
                                   {"export", stage->snapshot_to->text},
                                   {"started", started},
                                   {"seconds", seconds},
                                   {"status", status},
                                   {"exit_code", outcome.exit.status_code()},
                                   {"blobs", pushed.blobs},
                                   {"bytes", pushed.bytes},
                                   {"unsized_blobs", pushed.unsized},
                                   {"steps_run", outcome.progress.steps_run},
                                   {"steps_cached", outcome.progress.steps_cached},
                                   {"log", "build.log"}};
  if (auto written = write_file_atomic(folder / "snapshot.json", record.dump(2) + "\n"); !written) {
    console.note("warning: " + written.error());
  }
  std::string measured =
      fmt::format("{} blob(s), {:.1f} MiB{}", pushed.blobs,
                  static_cast<double>(pushed.bytes) / (1024.0 * 1024.0),
                  pushed.unsized > 0 ? fmt::format(" (+{} blob(s) the local export does not "
                                                   "hold, size unknown)",
                                                   pushed.unsized)
                                     : std::string());
  if (status == "interrupted") {
    console.note(fmt::format("snapshot interrupted after {}; the build it copies is untouched",
                             human_duration(seconds)));
    return k_exit_interrupted;
  }
  if (status != "ok") {
    console.failure_tail(outcome.tail, log.string());
    console.note(fmt::format("snapshot failed after {}: the stage's green build is untouched; "
                             "wrote {} before the failure",
                             human_duration(seconds), measured));
    return k_exit_failed;
  }
  if (outcome.progress.steps_run > outcome.progress.steps_cached) {
    console.note(fmt::format("warning: {} of {} step(s) were not cache hits: the snapshot "
                             "rebuilt them (was the build changed since run {}?)",
                             outcome.progress.steps_run - outcome.progress.steps_cached,
                             outcome.progress.steps_run, green[stage_name].run_id));
  }
  console.note(fmt::format("snapshot of {} pushed {} in {} ({})", stage_name, measured,
                           human_duration(seconds), (folder / "snapshot.json").string()));
  return k_exit_ok;
}

} // namespace kiln
