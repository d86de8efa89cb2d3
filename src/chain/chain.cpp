#include "chain/chain.h"

namespace kiln {

const Stage* Chain::find_stage(const std::string& name) const {
  for (const auto& stage : stages) {
    if (stage.name == name) {
      return &stage;
    }
  }
  return nullptr;
}

} // namespace kiln
