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

using Index = std::shared_ptr<const std::vector<StoreIndexEntry>>;

/// The last parse of each index is kept for as long as the file is the same one: a run reads
/// the images index once per stage when it moves the stable tags, and on a busy host that index
/// is megabytes of JSON (1.6 MB for 1,400 images). The lock is held while it parses: the stages
/// whose names move at once wait for one parse instead of each making its own.
tl::expected<Index, std::string> read_index(const fs::path& path) {
  static std::mutex mutex;
  static std::map<fs::path, std::pair<std::string, Index>> parsed;
  std::lock_guard lock(mutex);
  std::string identity = file_identity(path);
  if (auto kept = parsed.find(path);
      !identity.empty() && kept != parsed.end() && kept->second.first == identity) {
    return kept->second.second;
  }
  auto text = read_file(path, k_store_index_limit);
  if (!text) {
    return tl::unexpected(text.error());
  }
  auto entries = parse_store_index(*text);
  if (!entries) {
    return tl::unexpected(path.string() + " is not a store index (a JSON array)");
  }
  auto index = std::make_shared<const std::vector<StoreIndexEntry>>(std::move(*entries));
  // The identity taken before the read: were the file replaced meanwhile, the next look finds
  // another identity and reads again.
  if (!identity.empty()) {
    parsed[path] = {identity, index};
  }
  return index;
}

/// The entry of `index` with this id, nullptr when there is none.
const StoreIndexEntry* find_entry(const Index& index, const std::string& id) {
  auto entry = std::find_if(index->begin(), index->end(),
                            [&](const StoreIndexEntry& e) { return e.id == id; });
  return entry == index->end() ? nullptr : &*entry;
}

/// Reads an index as its tokens go by, keeping the few keys kiln reads of each entry: building
/// the whole document (big-data names, sizes and digests are most of it) took 40 ms a parse.
/// Depth 1 is inside the index's array, depth 2 inside an entry, depth 3 inside its names.
class IndexReader : public nlohmann::json_sax<json> {
public:
  std::vector<StoreIndexEntry> entries;
  bool is_array = false;

  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t value) override {
    if (m_depth == 2 && m_size != nullptr) {
      *m_size = value;
    }
    return scalar();
  }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool binary(binary_t&) override { return scalar(); }
  bool string(string_t& text) override {
    if (m_depth == 2 && m_field != nullptr) {
      *m_field = std::move(text);
    } else if (m_depth == 3 && m_in_names) {
      entries.back().names.push_back(std::move(text));
    }
    return scalar();
  }
  bool key(string_t& name) override {
    if (m_depth != 2 || entries.empty()) {
      return true;
    }
    StoreIndexEntry& entry = entries.back();
    m_field = name == "id"            ? &entry.id
              : name == "layer"       ? &entry.layer
              : name == "parent"      ? &entry.parent
              : name == "diff-digest" ? &entry.diff_digest
                                      : nullptr;
    // A key given twice counts as written last, as a whole parse would take it.
    if (m_field != nullptr) {
      m_field->clear();
    }
    m_size = name == "diff-size" ? &entry.diff_size : nullptr;
    if (m_size != nullptr) {
      *m_size = 0;
    }
    m_names_next = name == "names";
    if (m_names_next) {
      entry.names.clear();
    }
    return true;
  }
  bool start_object(std::size_t) override {
    if (m_depth == 1 && is_array) {
      entries.emplace_back();
    }
    return open(false);
  }
  bool start_array(std::size_t) override {
    if (m_depth == 0) {
      is_array = true;
    }
    return open(m_depth == 2 && m_names_next);
  }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

private:
  /// A value at depth 2 is the value of the key before it: the next key names the next field.
  bool scalar() {
    if (m_depth == 2) {
      m_field = nullptr;
      m_size = nullptr;
      m_names_next = false;
    }
    return true;
  }
  bool open(bool names) {
    scalar(); // a key whose value is an object or array sets no field
    if (m_depth == 2) {
      m_in_names = names;
    }
    ++m_depth;
    return true;
  }
  bool close() {
    --m_depth;
    if (m_depth == 2) {
      m_in_names = false;
    }
    return true;
  }

  int m_depth = 0;
  std::string* m_field = nullptr; // the text field of the entry the last key names
  uint64_t* m_size = nullptr;     // the size field of the entry the last key names
  bool m_names_next = false;      // the last key was "names"
  bool m_in_names = false;        // inside the entry's names array
};

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

tl::expected<StoreIndexes, std::string> read_store_indexes(const BuildahStorePlace& place) {
  auto images = read_store_index(place, "images");
  if (!images) {
    return tl::unexpected(images.error());
  }
  auto layers = read_store_index(place, "layers");
  if (!layers) {
    return tl::unexpected(layers.error());
  }
  return StoreIndexes{*images, *layers};
}

std::optional<std::vector<StoreIndexEntry>> parse_store_index(std::string_view text) {
  IndexReader reader;
  if (!json::sax_parse(text, &reader) || !reader.is_array) {
    return std::nullopt;
  }
  return std::move(reader.entries);
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
  const StoreIndexEntry* entry = find_entry(*images, id);
  if (entry == nullptr) {
    return tl::unexpected(
        fmt::format("image {} is not in buildah's store at {}", id, place->root.string()));
  }
  auto layers = read_store_index(*place, "layers");
  if (!layers) {
    return tl::unexpected(layers.error());
  }
  std::map<std::string, const StoreIndexEntry*> by_id;
  for (const auto& layer : **layers) {
    by_id[layer.id] = &layer;
  }
  std::vector<LayerBlob> chain; // top first
  for (std::string at = entry->layer; !at.empty();) {
    auto layer = by_id.find(at);
    if (layer == by_id.end() || chain.size() > by_id.size()) {
      return tl::unexpected(
          fmt::format("layer {} of image {} is not in the store's index", at, id));
    }
    const fs::path content = place->driver == "overlay" ? place->root / "overlay" / at / "diff"
                                                        : place->root / "vfs" / "dir" / at;
    chain.push_back({place->root / (place->driver + "-layers") / (at + ".tar-split.gz"),
                     layer->second->diff_digest, "application/vnd.oci.image.layer.v1.tar",
                     content});
    at = layer->second->parent;
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
  const StoreIndexEntry* image = find_entry(*images, bare_image_id(identity));
  return image != nullptr &&
         std::find(image->names.begin(), image->names.end(), name) != image->names.end();
}

} // namespace kiln
