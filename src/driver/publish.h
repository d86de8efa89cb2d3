#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "chain/chain.h"
#include "driver/image_gates.h"
#include "driver/publish_gates.h"
#include "driver/records.h"
#include "driver/run_folder.h"
#include "engine/engine.h"
#include "util/cancel.h"
#include "util/clock.h"

namespace kiln {

/// One reference a chain publishes to, and the final stages whose images it carries.
struct PublishTarget {
  std::string ref;                  // `host/repository:tag`
  std::vector<const Stage*> stages; // a lane's final stage each
  bool index = false;               // `[publish] index`; else one lane's image in the registry
};

/// What a chain publishes: its `[publish] index` of the lanes' final images, or else, with a
/// `[chain] registry`, each lane's final image under its registry reference.
std::vector<PublishTarget> publish_targets(const Chain& chain);

/// The smoke stages of the chain that need `stage`, directly or through other stages, in its
/// lane: what must pass before its image is published or its stable name moves.
std::vector<const Stage*> guarding_smoke_stages(const Chain& chain, const Stage& stage);

/// What a publish needs of the run that makes it.
struct PublishJob {
  const Chain& chain;
  const Engine& engine;
  const ImageGates& gates; // the layer scans, for the SBOMs
  const RunRecord& record; // the stages' outcomes, the run's id and times
  RunFolder& folder;       // where its log goes
  /// The identity of every stage's image this run used (built, or looked up for a need it did
  /// not build): the parents a provenance names.
  const std::map<std::string, std::string>& identities;
  const KeyValues& overrides; // --build-arg, as the stages received them
  const std::vector<TransientClass>& classes;
  const Clock& clock;
  const CancelToken& cancel;
  /// A line for driver.log and the console.
  std::function<void(const std::string&)> note;
};

/// The images of `target` as this run left them: what its gates judge.
std::vector<PublishImage> publish_images(const PublishJob& job, const PublishTarget& target);

/// Publish `target` as one transaction: its gates; the gated images staged by digest in an OCI
/// layout of the run's own (never rebuilt), each with an attestation manifest holding its SLSA
/// provenance v1 and SPDX 2.3 SBOM; one index pushed by digest; read back and checked digest
/// by digest; signed and verified when the chain says how; and only then tagged. Anything that
/// fails before the tag leaves the tag where it was. `log` names the publish's log, relative to
/// the run folder. Registry flakes are retried like a stage's attempts.
PublishRecord publish(const PublishJob& job, const PublishTarget& target, const std::string& log);

/// Where a run stages what it publishes: beside buildah's own temporary images (`$TMPDIR`,
/// else /var/tmp), named by the records folder and the run, so a run after one that was
/// killed finds and removes it.
std::filesystem::path publish_staging(const Chain& chain, const std::string& run_id);

/// Remove what earlier runs of this records folder staged and left (a run killed mid-push):
/// call it with the records lock held. One line per folder removed.
std::vector<std::string> remove_stale_staging(const Chain& chain);

} // namespace kiln
