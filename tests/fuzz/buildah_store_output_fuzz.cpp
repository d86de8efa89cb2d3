// What kiln reads of buildah's store: `buildah images --json`, `buildah info`, `buildah
// inspect`, a config blob and the images and layers indexes read in place, and `buildah rmi`
// output. Every input goes to every reader, with buildah's warnings possibly ahead of the JSON,
// as the shared pipe delivers them.
#include <nlohmann/json.hpp>

#include "disk/buildah_output.h"
#include "engine/buildah_layers.h"
#include "fuzz_bundle.h"
#include "fuzz_check.h"

namespace {

void check_steps(const kiln::BuildahImageSteps& steps) {
  for (const std::string& entry : steps.history) {
    // Each entry is the compared fields as a JSON object, whatever the config held.
    FUZZ_CHECK(nlohmann::json::parse(entry, nullptr, false).is_object());
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string_view text = fuzz::as_text(data, size);

  if (auto images = parse_buildah_images(text)) {
    for (const BuildahImage& image : *images) {
      FUZZ_CHECK(!image.id.starts_with("sha256:"));
    }
  }
  if (auto place = parse_buildah_info(text)) {
    FUZZ_CHECK(!place->root.empty());
  }
  if (auto steps = parse_buildah_inspect(text)) {
    check_steps(*steps);
  }
  if (auto steps = parse_config_steps(text)) {
    check_steps(*steps);
  }
  if (auto entries = parse_store_index(text)) {
    for (const StoreIndexEntry& entry : *entries) {
      FUZZ_CHECK(entry.id.size() <= size && entry.names.size() <= size);
    }
  }
  BuildahRemoval removal;
  read_buildah_removal(text, removal);
  for (const std::string& id : removal.removed) {
    FUZZ_CHECK(id.size() == 64);
  }
  return 0;
}
