#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "chain/chain.h"
#include "dockerfile/parser.h"
#include "driver/console.h"
#include "driver/run_folder.h"
#include "engine/engine.h"

namespace kiln {

/// The named targets a salvage re-drives after a failed build: every stage the Dockerfile
/// names (in file order) whose steps all finished in the failed build, so each re-drive is a
/// pure cache hit and only lands its cache export. A stage that did not finish would compile.
std::vector<std::string> salvage_targets(const Dockerfile& dockerfile,
                                         const std::vector<std::string>& finished_stages);

/// What a salvage needs from the run it belongs to.
struct SalvageContext {
  const Chain& chain;
  const Engine& engine;
  RunFolder& folder;
  Console& console;
  bool disabled; // --no-salvage
  /// The run's: a signal or an internal error stops a re-drive as it stops a build.
  const CancelToken& cancel;
  std::function<void()> save; // rewrite the manifest after each re-drive
};

/// After `stage` failed: when it has a local cache tier, re-drive each of its finished named
/// targets (salvage_targets) with nothing registry-facing and the image to scratch, so their
/// local exports land; each bounded by `salvage_target_timeout_s`, skipped (and said why in
/// `record.salvage_note`) below `salvage_min_free_gb` of free space or when disabled.
void salvage_failed_build(const SalvageContext& context, const Stage& stage,
                          const BuildRequest& request,
                          const std::vector<std::string>& finished_build_stages,
                          StageRecord& record);

} // namespace kiln
