#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "chain/chain.h"
#include "driver/records.h"
#include "engine/engine.h"

namespace kiln {

/// The image-env publish gate inside a run. A stage built by this run came from a Dockerfile
/// the run linted first; what the gate grades is everything else a stage stands on (a stale
/// parent carries its leak into every stage after it) and what leaves the host.
class ImageGates {
public:
  ImageGates(const Chain& chain, const Engine& engine, std::vector<std::string> built_by_run)
      : m_chain(chain), m_engine(engine), m_built_by_run(std::move(built_by_run)) {}

  /// Grade every parent of `stage`'s Dockerfile that this run does not build (with `request`'s
  /// build args and named contexts): chain stages from earlier runs and images from outside
  /// the chain. Each image is graded once per run.
  std::vector<GateRecord> grade_parents(const Stage& stage, const BuildRequest& request);

  /// Grade the image a stage just built (the final stage, or one the chain flags).
  GateRecord grade_built(const Stage& stage);

  /// Whether `stage` must pass the gate after it builds, and why.
  bool graded_after_build(const Stage& stage) const;

  /// Whether the layers of `stage`'s image are read after it builds: for residue (the images
  /// graded_after_build grades) and for its artifacts and layer ceiling.
  bool layers_read_after_build(const Stage& stage) const;

  /// The residue gate (when graded_after_build) and the artifacts gate (when the stage lists
  /// artifacts or a layer ceiling) on the image `stage` just built, from one pass over its
  /// layers; `scratch` is an empty folder the engine may export the image into.
  std::vector<GateRecord> grade_layers(const Stage& stage, const std::filesystem::path& scratch);

private:
  GateRecord grade(const std::string& subject, const ImageEnv& env) const;

  const Chain& m_chain;
  const Engine& m_engine;
  std::vector<std::string> m_built_by_run;
  std::mutex m_mutex; // stages grade at once; it guards m_graded, not the engine's answers
  std::map<std::string, GateRecord> m_graded; // by subject
};

/// A verdict's lines for the driver log and the console: what was refused and how to fix it.
std::vector<std::string> gate_lines(const std::string& stage, const GateRecord& record);

} // namespace kiln
