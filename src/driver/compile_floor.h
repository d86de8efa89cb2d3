#pragma once

#include <optional>
#include <string>
#include <vector>

#include "driver/records.h"
#include "engine/engine.h"

namespace kiln {

/// A stage's compile-request floor against one successful build.
struct CompileFloorVerdict {
  bool ok = true;
  std::string note; // for the record: how the floor was met, or why it was not
};

/// Whether a build with these `steps` and this compile `report` meets `min_requests` (0: no
/// floor). A compile step is a RUN that calls kiln-cc. The floor applies to the compile steps
/// that ran: one the layer cache served compiled nothing and counts as satisfied. When no step
/// names kiln-cc (a script calls it), a build whose every step was cached is satisfied and any
/// other must report.
CompileFloorVerdict judge_compile_floor(int min_requests,
                                        const std::optional<CompileReport>& report,
                                        const std::vector<StepSeen>& steps);

} // namespace kiln
