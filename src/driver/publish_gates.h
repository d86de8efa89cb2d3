#pragma once

#include <string>
#include <vector>

#include "driver/records.h"
#include "engine/image_config.h"

namespace kiln {

/// One image a publish would carry: a lane's final image as this run left it.
struct PublishImage {
  std::string lane;     // "" without lanes
  std::string stage;    // `<lane>/<final stage>`
  std::string platform; // the lane's; "" when the lane names none
  /// The stage's outcome in this run (built, reused, failed, skipped:<x>); "" when the run did
  /// not select it.
  std::string outcome;
  /// The image this run built and gated (buildah's id, BuildKit's digest); "" when it has none.
  std::string identity;
  ImageConfigRead config; // that image's config, or why there is none
  /// The lane's other stages this run that failed, were refused or were interrupted, `<stage>
  /// ended <outcome>`: a lane whose smoke stage failed has not shipped a tested image.
  std::vector<std::string> unfinished = {};
  /// The smoke stages that guard the image and did not run in this run.
  std::vector<std::string> untested = {};
};

/// The gates before anything is pushed, in order: completeness (every image built in this run
/// and no stage of its lane failed), smoke (every smoke stage that needs it ran in this run),
/// coherence (all carry the same chain and pins, each its lane's platform). The first refusal
/// stops the rest, which are named in gates_not_run with the steps of the publish.
struct PublishVerdict {
  std::vector<IndexLaneRecord> lanes;
  std::vector<GateRecord> gates;
  std::vector<std::string> gates_not_run;
  bool ok() const { return gates_not_run.empty(); }
  /// Refused only because smoke stages that guard it were not selected (`--only final`): held
  /// back, not blocked by anything that failed.
  bool held = false;
};

/// What a publish does once its gates passed, in order: what gates_not_run names after them.
const std::vector<std::string>& publish_steps();

PublishVerdict judge_publish(const std::string& ref, const std::vector<PublishImage>& images);

} // namespace kiln
