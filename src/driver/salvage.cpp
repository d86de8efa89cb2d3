#include "driver/salvage.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "disk/slugs.h"
#include "dockerfile/source.h"
#include "dockerfile/stage_names.h"
#include "driver/attempt_runner.h"
#include "util/cancel.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kiln {

std::vector<std::string> salvage_targets(const Dockerfile& dockerfile,
                                         const std::vector<std::string>& finished_stages) {
  std::vector<std::string> targets;
  for (const auto& name : named_stages(dockerfile)) {
    bool finished =
        std::find(finished_stages.begin(), finished_stages.end(), name) != finished_stages.end();
    if (finished && std::find(targets.begin(), targets.end(), name) == targets.end()) {
      targets.push_back(name);
    }
  }
  return targets;
}

void salvage_failed_build(const SalvageContext& context, const Stage& stage,
                          const BuildRequest& request,
                          const std::vector<std::string>& finished_build_stages,
                          StageRecord& record) {
  auto skip = [&](std::string note) {
    record.salvage_note = note;
    context.folder.log(fmt::format("stage {}: no salvage: {}", stage.name, note));
  };
  if (request.cache_slug.empty() || !request.export_local) {
    return; // no local tier: nothing a salvage could land
  }
  if (context.disabled || !context.chain.cache.salvage) {
    skip(context.disabled ? "--no-salvage" : "salvage = false in [cache]");
    return;
  }
  std::vector<std::string> targets =
      stage.dockerfile_source
          ? salvage_targets(stage.dockerfile_source->parsed, finished_build_stages)
          : std::vector<std::string>{};
  if (targets.empty()) {
    skip("no named target of the Dockerfile finished before the failure");
    return;
  }
  double min_free = context.chain.cache.salvage_min_free_gb;
  if (min_free > 0) {
    auto free = free_bytes(context.chain.cache.root);
    double free_gb = free ? static_cast<double>(*free) / static_cast<double>(k_gib) : -1;
    if (free && free_gb < min_free) {
      std::string note = fmt::format(
          "skipped: {}G free on {}, below salvage_min_free_gb {:g}: the export is the last "
          "thing that should write while disk is scarce",
          gib_text(*free), context.chain.cache.root.string(), min_free);
      skip(note);
      context.console.note(fmt::format("stage {}: salvage {}", stage.name, note));
      return;
    }
  }
  std::filesystem::path scratch = context.folder.path() / "salvage" / stage.name;
  context.folder.log(fmt::format("stage {}: salvage re-drives {} target(s) so their cache export "
                                 "lands in {}: {}",
                                 stage.name, targets.size(), request.cache_slug.string(),
                                 join(targets, ", ")));
  context.console.note(
      fmt::format("stage {}: salvaging the cache export of {}", stage.name, join(targets, ", ")));
  const BuildLimits limits{context.chain.cache.salvage_target_timeout, {}, &context.cancel};
  for (const auto& target : targets) {
    BuildRequest redrive = request;
    redrive.target = target;
    // Only the local export matters here; a registry that failed the build stays out, and the
    // image goes to scratch, never over the stage's last good one.
    redrive.drop_registry_cache = true;
    redrive.pushed.clear();
    redrive.layout = scratch / target;
    redrive.metadata = scratch / (target + ".metadata.json");
    SalvageRecord entry;
    entry.target = target;
    entry.log = fmt::format("stages/{}.salvage-{}.log", stage.name, target);
    auto start = std::chrono::steady_clock::now();
    auto log = context.folder.open_log(entry.log);
    if (!log) {
      context.folder.log(
          fmt::format("stage {}: no salvage of target {}: {}", stage.name, target, log.error()));
      break;
    }
    AttemptOutcome outcome = run_attempt(context.engine, redrive, *log, {}, limits);
    entry.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    entry.verdict = outcome.exit.ok()          ? "ok"
                    : outcome.exit.timed_out   ? "timed-out"
                    : outcome.exit.interrupted ? "interrupted"
                                               : "failed";
    record.salvage.push_back(entry);
    context.folder.log(fmt::format("stage {}: salvage of target {}: {} in {:.1f}s (exit {})",
                                   stage.name, target, entry.verdict, entry.seconds,
                                   outcome.exit.status_code()));
    context.save();
    if (outcome.exit.interrupted || context.cancel.cancelled()) {
      break;
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(scratch, ignored);
}

} // namespace kiln
