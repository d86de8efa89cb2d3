#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "driver/records.h"
#include "driver/run_folder.h"
#include "engine/engine.h"
#include "engine/image_config.h"
#include "util/cancel.h"

namespace kiln {

/// One lane's final image as the run left it: what the index's gates judge.
struct LaneImage {
  std::string lane;
  std::string stage;    // `<lane>/<final stage>`
  std::string platform; // the lane's
  /// The stage's outcome in this run (built, reused, failed, skipped:<x>); "" when the run did
  /// not select it.
  std::string outcome;
  ImageConfigRead config; // the image in its place, or why there is none
  std::string source;     // where `buildah manifest add` reads it
  /// The lane's other stages this run that failed, were refused or were interrupted, `<stage>
  /// ended <outcome>`: a lane whose smoke stage failed has not shipped a tested image.
  std::vector<std::string> unfinished = {};
};

/// The index's gates over the lanes' images, in order: completeness (every lane has an image),
/// coherence (all stamped with this run's id, the same chain and pins, each for its lane's
/// platform), freshness (each built, or verified cached, in this run). The first refusal stops
/// the rest, which are named in gates_not_run with the push and its read-back.
struct IndexVerdict {
  std::vector<IndexLaneRecord> lanes;
  std::vector<GateRecord> gates;
  std::vector<std::string> gates_not_run;
  bool ok() const { return gates_not_run.empty(); }
};

IndexVerdict judge_index(const std::string& ref, const std::vector<LaneImage>& images,
                         const std::string& run_id);

/// How pushing an index ended.
struct IndexPush {
  bool ok = false;
  bool interrupted = false;
  std::string digest;  // the index's, as pushed
  std::string failure; // why not ok: the command and its last words
  Tail tail;           // the failing command's last lines, what classification reads
  /// Per lane (in `images` order), the digest its image has in the index.
  std::vector<std::string> lane_digests;
};

/// Assemble the index from `images` with `buildah manifest`, push it to `ref` and read it back
/// from the registry, which must list every lane's platform with the digest added for it. Every
/// command and its output go to `log`; `limits` (its token and stall limit) stop the command
/// running. The local lists are removed however it ends.
IndexPush push_index(const std::string& ref, bool tls_verify, const std::vector<LaneImage>& images,
                     const std::string& run_id, RecordLog& log, const BuildLimits& limits);

} // namespace kiln
