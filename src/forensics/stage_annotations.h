#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "dockerfile/parser.h"
#include "forensics/report.h"

namespace kiln {

/// A stage's Dockerfile, as its chain names and parsed it.
struct StageDockerfile {
  std::string path;                   // "": the stage is not in the chain any more
  const Dockerfile* parsed = nullptr; // to find the failing step's line; may be null
};

/// GitHub Actions `::error` workflow commands, one per stage of the run that failed, was
/// refused or unverified: on its Dockerfile (`dockerfile_of` the stage's manifest name), at the
/// failing step's line when the Dockerfile has that instruction once, titled with the stage,
/// and saying the first real error line its failing step printed (else the stage's `failure`).
std::string
stage_annotations(const ReportInput& in,
                  const std::function<StageDockerfile(const std::string&)>& dockerfile_of);

/// The line of the instruction the engine printed as `step` (buildah's `RUN ...`, BuildKit's
/// `[stage 2/3] RUN ...`, cut at 200 bytes by the analysis) in `df`; 0 when no instruction, or
/// more than one, reads so.
int step_line(const Dockerfile& df, std::string_view step);

} // namespace kiln
