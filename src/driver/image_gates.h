#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "chain/chain.h"
#include "dockerfile/parser.h"
#include "driver/records.h"
#include "driver/scan_cache.h"
#include "engine/engine.h"
#include "gates/layer_scan.h"

namespace kiln {

/// The gates a run holds images to. A stage built by this run came from a Dockerfile the run
/// linted first; what the image-env gate grades is everything else a stage stands on (a stale
/// parent carries its leak into every stage after it) and what leaves the host. Every image is
/// named by its identity (buildah's image id, BuildKit's manifest digest), never by a tag
/// another run could move.
class ImageGates {
public:
  ImageGates(const Chain& chain, const Engine& engine, std::vector<std::string> built_by_run,
             ScanCache scans)
      : m_chain(chain), m_engine(engine), m_built_by_run(std::move(built_by_run)),
        m_scans(std::move(scans)) {}

  /// Grade every parent of `stage`'s Dockerfile that this run does not build (with `request`'s
  /// build args and named contexts): chain stages from earlier runs and images from outside
  /// the chain. Each image is graded once per run.
  std::vector<GateRecord> grade_parents(const Stage& stage, const BuildRequest& request);

  /// The image-env gate on the image a stage just built (`image`: its context, by identity):
  /// its config's Env and the build args its history spells out (`RUN |1 TOKEN=...`), and a
  /// warning when the final image's Cmd or Entrypoint came from a parent, not its Dockerfile.
  GateRecord grade_built(const Stage& stage, const NamedContext& image);

  /// The gates that read the layers of the image a stage just built, from one pass (or a scan
  /// remembered for `identity`): residue and arch for graded images, artifacts and max_layers
  /// for a stage that lists them.
  std::vector<GateRecord> grade_layers(const Stage& stage, const NamedContext& image,
                                       const std::string& identity);

  /// What the layer scan of `identity` found, once grade_layers read it: the SBOM's packages.
  std::optional<std::vector<ImageScan>> scans_of(const std::string& identity) const;

private:
  GateRecord grade(const std::string& subject, const ImageEnv& env) const;
  ScanOptions scan_options(const Stage& stage) const;

  const Chain& m_chain;
  const Engine& m_engine;
  std::vector<std::string> m_built_by_run;
  ScanCache m_scans;
  mutable std::mutex m_mutex; // stages grade at once; it guards the maps, not the engine
  std::map<std::string, GateRecord> m_graded;              // by subject
  std::map<std::string, std::vector<ImageScan>> m_scanned; // by identity
};

/// Whether `stage`'s built image is graded like a published one (image-env, residue, arch):
/// the final stage's, and a stage's with `gate_image_env`.
bool graded_after_build(const Chain& chain, const Stage& stage);

/// Whether the layers of `stage`'s image are read after it builds: a graded image, or a stage
/// with artifacts or a layer ceiling.
bool layers_read_after_build(const Chain& chain, const Stage& stage);

/// A verdict's lines for the driver log and the console: what was refused and how to fix it.
std::vector<std::string> gate_lines(const std::string& stage, const GateRecord& record);

/// The build args a history line spells out: `RUN |2 A=1 B=2 /bin/sh -c ...` (BuildKit) or
/// `|2 A=1 B=2 /bin/sh -c ...` (buildah) gives A=1, B=2; nothing for any other line.
std::vector<std::pair<std::string, std::string>> history_build_args(std::string_view created_by);

/// The outside image the run command of `target` (a Dockerfile stage, "" for the last) comes
/// from: the base it was inherited from when neither the stage nor the stages of the file it
/// is built FROM set CMD or ENTRYPOINT; nullopt when the Dockerfile sets one.
std::optional<std::string> inherited_run_command(const Dockerfile& df, const std::string& target);

} // namespace kiln
