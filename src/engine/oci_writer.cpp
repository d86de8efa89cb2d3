#include "engine/oci_writer.h"

#include <fmt/format.h>

#include "engine/image_config.h"
#include "util/diagnostic.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/strings.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string text_at(const json& doc, const char* key) {
  return doc.is_object() && doc.contains(key) && doc[key].is_string() ? doc[key].get<std::string>()
                                                                      : std::string();
}

Descriptor descriptor_of(const json& doc) {
  Descriptor out;
  out.media_type = text_at(doc, "mediaType");
  out.digest = text_at(doc, "digest");
  if (doc.contains("size") && doc["size"].is_number_unsigned()) {
    out.size = doc["size"].get<std::uint64_t>();
  }
  if (doc.contains("annotations") && doc["annotations"].is_object()) {
    for (const auto& [key, value] : doc["annotations"].items()) {
      if (value.is_string()) {
        out.annotations[key] = value.get<std::string>();
      }
    }
  }
  return out;
}

} // namespace

json Descriptor::to_json() const {
  json doc = {{"mediaType", media_type}, {"digest", digest}, {"size", size}};
  if (!annotations.empty()) {
    doc["annotations"] = annotations;
  }
  if (!platform.empty()) {
    std::vector<std::string> parts = split(platform, '/');
    doc["platform"] = {{"os", parts[0]}, {"architecture", parts.size() > 1 ? parts[1] : ""}};
    if (parts.size() > 2) {
      doc["platform"]["variant"] = parts[2];
    }
  }
  return doc;
}

std::string blob_text(const json& doc) {
  return doc.dump();
}

tl::expected<LayoutWriter, std::string> LayoutWriter::create(const fs::path& dir) {
  std::error_code error;
  fs::create_directories(dir / "blobs" / "sha256", error);
  if (error) {
    return tl::unexpected(fmt::format("cannot make {}: {}", dir.string(), error.message()));
  }
  if (auto written = write_file_atomic(dir / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})",
                                       Durability::rename_only);
      !written) {
    return tl::unexpected(written.error());
  }
  return LayoutWriter(dir);
}

fs::path LayoutWriter::blob_path(const std::string& digest) const {
  return m_dir / "blobs" / "sha256" / digest.substr(7);
}

tl::expected<Descriptor, std::string> LayoutWriter::put(std::string_view bytes,
                                                        std::string media_type) {
  Descriptor out{std::move(media_type), sha256_digest(bytes), bytes.size(), {}, {}};
  if (auto written = write_file_atomic(blob_path(out.digest), bytes, Durability::rename_only);
      !written) {
    return tl::unexpected(written.error());
  }
  return out;
}

tl::expected<std::string, std::string> LayoutWriter::blob(const std::string& digest) const {
  if (!is_oci_digest(digest)) {
    return tl::unexpected(fmt::format("'{}' is not a sha256 digest", printable(digest)));
  }
  return read_file(blob_path(digest), k_image_json_limit);
}

tl::expected<Descriptor, std::string> LayoutWriter::take_manifest(const fs::path& from,
                                                                  const std::string& digest) {
  auto link = [&](const std::string& blob) -> tl::expected<void, std::string> {
    if (!is_oci_digest(blob)) {
      return tl::unexpected(fmt::format("{} names a blob '{}' that is not a sha256 digest",
                                        from.string(), printable(blob)));
    }
    fs::path source = from / "blobs" / "sha256" / blob.substr(7);
    fs::path target = blob_path(blob);
    std::error_code error;
    if (fs::exists(target, error)) {
      return {};
    }
    fs::create_hard_link(source, target, error);
    if (error) {
      error.clear();
      fs::copy_file(source, target, error);
    }
    if (error) {
      return tl::unexpected(
          fmt::format("cannot take blob {} from {}: {}", blob, from.string(), error.message()));
    }
    return {};
  };
  if (auto taken = link(digest); !taken) {
    return tl::unexpected(taken.error());
  }
  auto text = blob(digest);
  if (!text) {
    return tl::unexpected(text.error());
  }
  json manifest = json::parse(*text, nullptr, false);
  if (!manifest.is_object() || !manifest.contains("config")) {
    return tl::unexpected(fmt::format("{} in {} is not an image manifest", digest, from.string()));
  }
  std::vector<std::string> blobs = {text_at(manifest["config"], "digest")};
  if (manifest.contains("layers") && manifest["layers"].is_array()) {
    for (const auto& layer : manifest["layers"]) {
      blobs.push_back(text_at(layer, "digest"));
    }
  }
  for (const auto& each : blobs) {
    if (auto taken = link(each); !taken) {
      return tl::unexpected(taken.error());
    }
  }
  Descriptor out;
  out.media_type = text_at(manifest, "mediaType");
  if (out.media_type.empty()) {
    out.media_type = k_oci_manifest_type;
  }
  out.digest = digest;
  out.size = text->size();
  return out;
}

tl::expected<Descriptor, std::string> LayoutWriter::named(const std::string& name) const {
  auto text = read_file(m_dir / "index.json", k_image_json_limit);
  if (!text) {
    return tl::unexpected(text.error());
  }
  json index = json::parse(*text, nullptr, false);
  if (index.is_object() && index.contains("manifests") && index["manifests"].is_array()) {
    for (const auto& entry : index["manifests"]) {
      Descriptor found = descriptor_of(entry);
      auto ref = found.annotations.find("org.opencontainers.image.ref.name");
      if (ref != found.annotations.end() && ref->second == name && is_oci_digest(found.digest)) {
        found.annotations.erase(ref);
        return found;
      }
    }
  }
  return tl::unexpected(
      fmt::format("{}/index.json names no image '{}'", m_dir.string(), printable(name)));
}

tl::expected<void, std::string> LayoutWriter::name_only(const Descriptor& top,
                                                        const std::string& name) {
  Descriptor named = top;
  named.annotations["org.opencontainers.image.ref.name"] = name;
  json index = {{"schemaVersion", 2}, {"manifests", json::array({named.to_json()})}};
  return write_file_atomic(m_dir / "index.json", blob_text(index), Durability::rename_only);
}

} // namespace kiln
