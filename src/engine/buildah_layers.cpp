#include "engine/buildah_layers.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/fs.h"
#include "util/json_output.h"
#include "util/process.h"
#include "util/sha256.h"
#include "util/strings.h"

namespace kiln {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

/// The store's indexes list every image and layer it holds: large for a busy host, never
/// near this.
constexpr uint64_t k_store_index_limit = 512ull << 20;

/// Where the store is, from what `buildah info` printed, if kiln can read it in place.
tl::expected<BuildahStorePlace, std::string> readable_place(const std::string& info) {
  auto place = parse_buildah_info(info);
  if (place && place->driver != "overlay" && place->driver != "vfs") {
    return tl::unexpected(fmt::format("buildah's store uses the {} driver at {}; kiln reads "
                                      "images in place from overlay and vfs stores only",
                                      place->driver.empty() ? "(unnamed)" : place->driver,
                                      place->root.string()));
  }
  return place;
}

/// Where the store is does not change while kiln runs: buildah's answer is kept, a store kiln
/// cannot read in place included. A buildah that failed is asked again next time.
tl::expected<BuildahStorePlace, std::string> store_place() {
  static std::mutex mutex;
  static std::optional<tl::expected<BuildahStorePlace, std::string>> known;
  std::lock_guard lock(mutex);
  if (known) {
    return *known;
  }
  CapturedRun info = run_captured({"buildah", "info"});
  if (!info.exit.ok()) {
    return tl::unexpected("buildah info failed: " + info.failure());
  }
  known = readable_place(info.output);
  return *known;
}

using Index = std::shared_ptr<const json>;

/// The last parse of each index is kept for as long as the file is the same one: a run reads
/// the images index once per stage when it moves the stable tags, and on a busy host that index
/// is megabytes of JSON (2.3 MB for 1,480 images, 40 ms a parse).
tl::expected<Index, std::string> read_index(const fs::path& path) {
  static std::mutex mutex;
  static std::map<fs::path, std::pair<std::string, Index>> parsed;
  std::string identity = file_identity(path);
  if (!identity.empty()) {
    std::lock_guard lock(mutex);
    if (auto kept = parsed.find(path); kept != parsed.end() && kept->second.first == identity) {
      return kept->second.second;
    }
  }
  auto text = read_file(path, k_store_index_limit);
  if (!text) {
    return tl::unexpected(text.error());
  }
  auto doc = std::make_shared<json>(json::parse(*text, nullptr, false));
  if (!doc->is_array()) {
    return tl::unexpected(path.string() + " is not a store index (a JSON array)");
  }
  // The identity taken before the read: were the file replaced meanwhile, the next look finds
  // another identity and reads again.
  std::lock_guard lock(mutex);
  parsed[path] = {identity, doc};
  return doc;
}

std::string text_at(const json& doc, const char* key) {
  return doc.contains(key) && doc[key].is_string() ? doc[key].get<std::string>() : std::string();
}

/// One of the store's indexes: "images" (each image's id, names and top layer) or "layers".
tl::expected<Index, std::string> read_store_index(const BuildahStorePlace& place,
                                                  const std::string& of) {
  return read_index(place.root / (place.driver + "-" + of) / (of + ".json"));
}

} // namespace

bool is_image_id(std::string_view text) {
  return is_oci_digest(fmt::format("sha256:{}", text));
}

std::string bare_image_id(std::string_view id) {
  if (id.starts_with("sha256:")) {
    id.remove_prefix(7);
  }
  return std::string(id);
}

tl::expected<BuildahStorePlace, std::string> parse_buildah_info(std::string_view text) {
  json doc = parse_json_output(text);
  if (doc.is_discarded() || !doc.is_object()) {
    return tl::unexpected(std::string("buildah info printed no JSON object"));
  }
  auto store = doc.find("store");
  if (store == doc.end() || !store->is_object()) {
    return tl::unexpected(std::string("buildah info names no store"));
  }
  BuildahStorePlace place{text_at(*store, "GraphRoot"), text_at(*store, "GraphDriverName")};
  if (place.root.empty()) {
    return tl::unexpected(std::string("buildah info names no store.GraphRoot"));
  }
  return place;
}

std::optional<std::string> buildah_config_blob(const BuildahStorePlace& place,
                                               const std::string& image_id) {
  std::string id = bare_image_id(image_id);
  if (!is_image_id(id)) {
    return std::nullopt;
  }
  // containers/storage keeps an image's blobs beside its index, each under its key, base64'd
  // with a leading `=` when the key holds more than [a-z0-9.]: the config's key is its digest.
  fs::path file =
      place.root / (place.driver + "-images") / id / ("=" + base64_encode("sha256:" + id));
  auto blob = read_file(file, k_image_json_limit);
  if (!blob || sha256_digest(*blob) != "sha256:" + id) {
    return std::nullopt;
  }
  return std::move(*blob);
}

ImageConfigRead buildah_image_config(const std::string& image) {
  if (auto place = store_place()) {
    if (auto blob = buildah_config_blob(*place, image)) {
      return image_config_from_json(*blob);
    }
  }
  return image_config_from_buildah(image);
}

tl::expected<LayoutImage, std::string> buildah_store_image(const std::string& image_id) {
  std::string id = bare_image_id(image_id);
  auto config = buildah_image_config(id);
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
  for (const auto& image : **images) {
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
  for (const auto& layer : **layers) {
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

void locate_buildah_store() {
  (void)store_place();
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
  const std::string id = bare_image_id(identity);
  for (const auto& image : **images) {
    if (image.is_object() && text_at(image, "id") == id && image.contains("names") &&
        image["names"].is_array()) {
      return std::find(image["names"].begin(), image["names"].end(), name) != image["names"].end();
    }
  }
  return false;
}

} // namespace kiln
