#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "chain/chain.h"

namespace kiln {

struct Selection {
  std::vector<std::string> only;  // --only a,b: exactly these stages
  std::string from;               // --from x: x and every stage after it in run order
  std::vector<std::string> lanes; // --lane: only these lanes' stages
};

/// The run order of the whole chain: dependencies first, file order where they allow.
/// The chain must be validated (no cycles, no unknown needs).
std::vector<const Stage*> run_order(const Chain& chain);

/// The stages a run builds, in run order. Unknown names are an error with a did-you-mean.
tl::expected<std::vector<const Stage*>, std::string> select_stages(const Chain& chain,
                                                                   const Selection& selection);

/// Each loaded Dockerfile once, as the first of `stages` built from it: stages built from
/// different targets of one Dockerfile share it, and linting it once per stage would report each
/// finding twice. The stage gives the file and the build context it is linted in.
std::vector<const Stage*> one_stage_per_dockerfile(const std::vector<const Stage*>& stages);

/// The build args one stage receives, in a stable order: versions pins, then the stage's own
/// build_args, then its lane's, then command-line overrides, later ones winning; only names the
/// stage's Dockerfile declares with ARG, so a pin a stage does not use never changes its cache key.
KeyValues stage_build_args(const Chain& chain, const Stage& stage, const KeyValues& overrides);

/// Where `stage` gets build arg `name` from, as a reader names it: `--build-arg`, `lane <x>`,
/// `chain file`, else the versions file's name (a pin); the last layer of stage_build_args()
/// that sets it.
std::string build_arg_source(const Chain& chain, const Stage& stage, const KeyValues& overrides,
                             const std::string& name);

} // namespace kiln
