#include "engine/buildah_layers.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/fs.h"
#include "util/process.h"

namespace kiln {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

/// The store's indexes list every image and layer it holds: large for a busy host, never
/// near this.
constexpr uint64_t k_store_index_limit = 512ull << 20;

struct StorePlace {
  fs::path root;      // GraphRoot
  std::string driver; // GraphDriverName
};

tl::expected<StorePlace, std::string> ask_store_place() {
  CapturedRun info = run_captured({"buildah", "info"});
  if (!info.exit.ok()) {
    return tl::unexpected("buildah info failed: " + info.failure());
  }
  json doc = json::parse(info.output, nullptr, false);
  if (!doc.is_object() || !doc.contains("store") || !doc["store"].is_object()) {
    return tl::unexpected(std::string("buildah info printed no store"));
  }
  const json& store = doc["store"];
  StorePlace place;
  if (store.contains("GraphRoot") && store["GraphRoot"].is_string()) {
    place.root = store["GraphRoot"].get<std::string>();
  }
  if (store.contains("GraphDriverName") && store["GraphDriverName"].is_string()) {
    place.driver = store["GraphDriverName"].get<std::string>();
  }
  if (place.root.empty() || (place.driver != "overlay" && place.driver != "vfs")) {
    return tl::unexpected(fmt::format("buildah's store uses the {} driver at {}; kiln reads "
                                      "images in place from overlay and vfs stores only",
                                      place.driver.empty() ? "(unnamed)" : place.driver,
                                      place.root.string()));
  }
  return place;
}

/// Where the store is does not change while kiln runs: asked once, the answer is kept.
tl::expected<StorePlace, std::string> store_place() {
  static std::mutex mutex;
  static std::optional<StorePlace> known;
  std::lock_guard lock(mutex);
  if (known) {
    return *known;
  }
  auto place = ask_store_place();
  if (place) {
    known = *place;
  }
  return place;
}

tl::expected<json, std::string> read_index(const fs::path& path) {
  auto text = read_file(path, k_store_index_limit);
  if (!text) {
    return tl::unexpected(text.error());
  }
  json doc = json::parse(*text, nullptr, false);
  if (!doc.is_array()) {
    return tl::unexpected(path.string() + " is not a store index (a JSON array)");
  }
  return doc;
}

std::string text_at(const json& doc, const char* key) {
  return doc.contains(key) && doc[key].is_string() ? doc[key].get<std::string>() : std::string();
}

/// buildah's id of an image: its config digest without the `sha256:`.
std::string store_id(const std::string& identity) {
  return identity.starts_with("sha256:") ? identity.substr(7) : identity;
}

/// One of the store's indexes: "images" (each image's id, names and top layer) or "layers".
tl::expected<json, std::string> read_store_index(const StorePlace& place, const std::string& of) {
  return read_index(place.root / (place.driver + "-" + of) / (of + ".json"));
}

} // namespace

tl::expected<LayoutImage, std::string> buildah_store_image(const std::string& image_id) {
  std::string id = store_id(image_id);
  auto config = image_config_from_buildah(id);
  if (!config) {
    return tl::unexpected(config.error());
  }
  auto place = store_place();
  if (!place) {
    return tl::unexpected(place.error());
  }
  auto images = read_store_index(*place, "images");
  if (!images) {
    return tl::unexpected(images.error());
  }
  std::string top;
  bool found = false;
  for (const auto& image : *images) {
    if (image.is_object() && text_at(image, "id") == id) {
      top = text_at(image, "layer");
      found = true;
      break;
    }
  }
  if (!found) {
    return tl::unexpected(
        fmt::format("image {} is not in buildah's store at {}", id, place->root.string()));
  }
  auto layers = read_store_index(*place, "layers");
  if (!layers) {
    return tl::unexpected(layers.error());
  }
  std::map<std::string, const json*> by_id;
  for (const auto& layer : *layers) {
    if (layer.is_object()) {
      by_id[text_at(layer, "id")] = &layer;
    }
  }
  std::vector<LayerBlob> chain; // top first
  for (std::string at = top; !at.empty();) {
    auto layer = by_id.find(at);
    if (layer == by_id.end() || chain.size() > by_id.size()) {
      return tl::unexpected(
          fmt::format("layer {} of image {} is not in the store's index", at, id));
    }
    const fs::path content = place->driver == "overlay" ? place->root / "overlay" / at / "diff"
                                                        : place->root / "vfs" / "dir" / at;
    chain.push_back({place->root / (place->driver + "-layers") / (at + ".tar-split.gz"),
                     text_at(*layer->second, "diff-digest"),
                     "application/vnd.oci.image.layer.v1.tar", content});
    at = text_at(*layer->second, "parent");
  }
  LayoutImage image{std::move(*config), {chain.rbegin(), chain.rend()}};
  // The layers found are the image's only when they are the ones its config names.
  std::vector<std::string> found_ids;
  for (const auto& layer : image.layers) {
    found_ids.push_back(layer.digest);
  }
  if (found_ids != image.config.diff_ids) {
    return tl::unexpected(fmt::format("the layers of image {} in the store ({}) are not those its "
                                      "config names ({})",
                                      id, found_ids.size(), image.config.diff_ids.size()));
  }
  return image;
}

bool buildah_store_names(const std::string& name, const std::string& identity) {
  auto place = store_place();
  if (!place) {
    return false;
  }
  auto images = read_store_index(*place, "images");
  if (!images) {
    return false;
  }
  const std::string id = store_id(identity);
  for (const auto& image : *images) {
    if (image.is_object() && text_at(image, "id") == id && image.contains("names") &&
        image["names"].is_array()) {
      return std::find(image["names"].begin(), image["names"].end(), name) != image["names"].end();
    }
  }
  return false;
}

} // namespace kiln
