#include "engine/engine.h"

#include "engine/buildah_engine.h"

namespace kiln {

std::unique_ptr<Engine> make_engine(const Chain& chain) {
  return std::make_unique<BuildahEngine>(chain.buildah_isolation);
}

} // namespace kiln
