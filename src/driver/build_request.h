#pragma once

#include <filesystem>

#include "chain/chain.h"
#include "engine/engine.h"

namespace kiln {

/// The secret a Dockerfile mounts to read its job budget (`JOBS=`, `MEMORY_LIMIT_GB=`): a
/// secret, so the host's budget never becomes part of a layer's cache key. Offered to a stage
/// whose Dockerfile mounts it.
constexpr const char* k_budget_secret = "kiln-budget";

/// Where a stage's BuildKit image lands when the chain names no registry: an OCI layout under
/// the records, beside the metadata file that names its digest. They outlive the run, so a
/// later run that builds only the next stage can still hand this one over.
std::filesystem::path stage_layout(const Chain& chain, const std::string& stage);
std::filesystem::path stage_metadata(const Chain& chain, const std::string& stage);

/// How a later stage is handed `stage`'s image: its tag, layout, metadata and pushed reference.
NamedContext stage_context(const Chain& chain, const Stage& stage);

/// The label that stamps an image with the run that built it.
constexpr const char* k_run_id_label = "dev.kiln.run-id";

/// Whether a stage's image leaves the host: the final stage's, when the chain pushes it to a
/// registry or assembles an index from it.
bool leaves_host(const Chain& chain, const Stage& stage);

/// The labels of every image kiln builds (`dev.kiln.*`): chain, stage, lane and the pins it
/// received. They stay the same from run to run: buildah makes a label a step, and a label
/// that changed would cost the image its id and every later stage its layer cache.
KeyValues provenance_labels(const Chain& chain, const Stage& stage, const KeyValues& build_args);

/// Stamp the request with the run that builds it, for an image that leaves the host: what the
/// index's coherence and freshness gates read back.
void stamp_run(BuildRequest& request, const std::string& run_id);

/// The file holding a stage's job budget, written before the stage builds.
std::filesystem::path budget_file(const Chain& chain, const std::string& stage);

/// The request that builds `stage`: its Dockerfile, build args (versions < chain < overrides),
/// the stages it needs as named contexts, kiln's tools, secrets, image handoff and cache tiers.
BuildRequest build_request(const Chain& chain, const Stage& stage, const KeyValues& overrides,
                           const std::filesystem::path& tools);

} // namespace kiln
