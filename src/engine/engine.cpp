#include "engine/engine.h"

#include "engine/buildah_engine.h"
#include "engine/buildkit_engine.h"

namespace kiln {

std::unique_ptr<Engine> make_engine(const Chain& chain) {
  if (chain.engine == "buildkit") {
    return std::make_unique<BuildkitEngine>(resolve_buildkit_address(chain.buildkit_host));
  }
  return std::make_unique<BuildahEngine>(chain.buildah_isolation);
}

} // namespace kiln
