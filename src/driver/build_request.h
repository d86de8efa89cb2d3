#pragma once

#include <filesystem>

#include "chain/chain.h"
#include "engine/engine.h"

namespace kiln {

/// The secret a Dockerfile mounts to read its job budget (`JOBS=`, `MEMORY_LIMIT_GB=`): a
/// secret, so the host's budget never becomes part of a layer's cache key. Offered to a stage
/// whose Dockerfile mounts it.
constexpr const char* k_budget_secret = "kiln-budget";

/// Whether `stage`'s Dockerfile mounts the secret k_budget_secret: only such a stage can use a
/// share of the job budget larger than one job.
bool reads_budget(const Stage& stage);

/// Where a stage's BuildKit image lands when the chain names no registry: an OCI layout under
/// the records, beside the metadata file that names its digest. They outlive the run, so a
/// later run that builds only the next stage can still hand this one over.
std::filesystem::path stage_layout(const Chain& chain, const std::string& stage);
std::filesystem::path stage_metadata(const Chain& chain, const std::string& stage);

/// The name buildah gives a stage's image while kiln works with it: the stage's tag with a key
/// of the records folder (`localhost/hello-base:latest-kiln-3f2a9c01`), so two checkouts of
/// one chain on one host never share one. The stage's own tag, the stable name, moves to the
/// image only once every gate and smoke stage that guards it passed.
std::string work_tag(const Chain& chain, const Stage& stage);

/// Whether a disk lever may remove the stage's work name: only a test run's image (a smoke stage
/// with no stable name), which nothing builds on or publishes and every run builds again. The
/// image of a stage another stage builds on is the next run's layer cache even once its
/// dependants built: removing one untags nothing the run needs now but makes the next rebuild it.
bool work_name_removable(const Chain& chain, const Stage& stage);

/// What tells this checkout's names apart from another's: 8 hex digits of its records folder.
std::string checkout_key(const Chain& chain);

/// How a later stage is handed `stage`'s image: its work tag, layout, metadata, and its
/// repository in the registry when it is handed over by push.
NamedContext stage_context(const Chain& chain, const Stage& stage);

/// Whether a stage is handed over through the chain's registry (BuildKit with `[chain]
/// registry`), pushed by digest as it builds: only a stage another stage needs, and not one
/// whose image a gate reads, since nothing of that may leave the host before its gates and
/// smoke stages passed.
bool handed_over_by_push(const Chain& chain, const Stage& stage);

/// The labels of every image kiln builds (`dev.kiln.*`): chain, stage, lane and the pins it
/// received, each set on every image, empty when it has none, so no image carries a value it
/// inherited from its parent. They stay the same from run to run: buildah makes a label a
/// step, and a label that changed would cost the image its id and every later stage its layer
/// cache.
KeyValues provenance_labels(const Chain& chain, const Stage& stage, const KeyValues& build_args);

/// The file holding a stage's job budget, written before the stage builds.
std::filesystem::path budget_file(const Chain& chain, const std::string& stage);

/// The request that builds `stage`: its Dockerfile, build args (versions < chain < overrides),
/// the stages it needs as named contexts, kiln's tools, secrets, image handoff and cache tiers.
BuildRequest build_request(const Chain& chain, const Stage& stage, const KeyValues& overrides,
                           const std::filesystem::path& tools);

} // namespace kiln
