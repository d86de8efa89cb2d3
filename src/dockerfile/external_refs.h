#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "dockerfile/parser.h"

namespace kiln {

/// An image a build reads that no stage of its Dockerfile builds: a chain stage handed over as
/// a named context, or an image from a registry.
struct ExternalRef {
  std::string ref;     // as the build resolves it: FROM's global ARGs expanded
  std::string written; // the words that name it, e.g. `FROM ${BASE}` or `COPY --from=libs`
  Position pos;        // of FROM's image, or of the flag
};

/// What building `target` reads from outside the Dockerfile, through FROM, COPY --from and
/// RUN --mount from=, in file order: the target's own stage and every stage it builds on,
/// since the others are never built. `target` is matched ignoring case, as BuildKit does; empty
/// means the last stage, and one the file does not name means every stage. Left out are
/// `scratch` and a --from with a variable in it, whose value depends on the ARGs and ENV in
/// effect at its line.
/// Which stages of the file building `target` builds (indexed as stage_scopes() lists them):
/// the target's own and every stage it builds on through FROM, COPY --from and RUN --mount
/// from=, matched as external_refs() matches them.
std::vector<bool> stages_built(const Dockerfile& df, std::string_view target,
                               const std::vector<StageScope>& scopes);

std::vector<ExternalRef> external_refs(const Dockerfile& df, std::string_view target,
                                       const std::map<std::string, std::string>& build_args);

} // namespace kiln
