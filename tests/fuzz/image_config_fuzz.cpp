// The image-env gate's OCI layout reader (index.json -> manifests -> config blob), on any
// layout, and the BuildKit metadata file that names a build's digest. The input is a bundle of
// the layout's files (fuzz_bundle.h; before the first header: index.json). Beside the layout
// lies a config whose Env holds a canary (fuzz_canary.h): a descriptor that leads out of the
// layout reads it.
// The whole input is also read as an image index, as `buildah manifest inspect` prints one.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "engine/buildkit_engine.h"
#include "engine/image_config.h"
#include "fuzz_bundle.h"
#include "fuzz_canary.h"
#include "fuzz_check.h"
#include "gates/image_env.h"

namespace {

const kiln::fuzz::Canary k_canary;
const std::string k_canary_config = R"({"config":{"Env":["CANARY=)" + k_canary.value() + R"("]}})";

void grade(const kiln::ImageEnv& env) {
  if (!env) {
    return;
  }
  for (const std::string& entry : *env) {
    FUZZ_CHECK(!k_canary.found_in(entry));
  }
  (void)kiln::grade_env(kiln::parse_env_list(*env), {});
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  static const fuzz::ScratchDir scratch;
  std::vector<fuzz::BundleFile> files = fuzz::split_bundle(fuzz::as_text(data, size), "index.json");
  std::vector<fuzz::BundleFile> placed;
  std::vector<std::string> names;
  names.reserve(files.size());
  for (const fuzz::BundleFile& file : files) {
    names.push_back("layout/" + file.name);
    placed.push_back({names.back(), file.content});
  }
  // Where `sha256:../../canary` or `../canary/x` would lead from blobs/sha256/.
  placed.push_back({"canary", k_canary_config});
  placed.push_back({"canary.json", k_canary_config});
  scratch.write(placed);
  std::filesystem::path layout = scratch.path() / "layout";

  grade(image_env(image_config_from_layout(layout)));
  if (auto configs = image_configs_from_layout(layout)) {
    FUZZ_CHECK(configs->size() <= k_layout_image_limit);
    for (const ImageConfig& config : *configs) {
      grade(config.env);
    }
  }
  for (const IndexEntry& entry : index_entries(fuzz::as_text(data, size))) {
    // An entry is a platform and a digest, never half of one.
    FUZZ_CHECK(entry.digest.empty() || !entry.platform.empty());
  }
  std::string digest = metadata_digest(layout / "metadata.json");
  if (digest.empty()) {
    // Without a metadata file, the digest index.json names first, as a build's would be.
    auto named = std::find_if(files.begin(), files.end(), [](const fuzz::BundleFile& file) {
      return file.name == "index.json";
    });
    auto index = nlohmann::json::parse(named == files.end() ? std::string_view() : named->content,
                                       nullptr, false);
    if (index.is_object() && index.contains("manifests") && index["manifests"].is_array() &&
        !index["manifests"].empty() && index["manifests"][0].is_object() &&
        index["manifests"][0].contains("digest") && index["manifests"][0]["digest"].is_string()) {
      digest = index["manifests"][0]["digest"].get<std::string>();
    }
  }
  if (!digest.empty()) {
    grade(image_env(image_config_from_layout(layout, digest)));
  }
  return 0;
}
