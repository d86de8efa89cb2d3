#include "engine/image_config.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/diagnostic.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/strings.h"

namespace kiln {

namespace {

using nlohmann::json;

tl::expected<json, std::string> read_json(const std::filesystem::path& file) {
  auto text = read_file(file, k_image_json_limit);
  if (!text) {
    return tl::unexpected(text.error());
  }
  json doc = json::parse(*text, nullptr, false);
  if (doc.is_discarded()) {
    return tl::unexpected(fmt::format("{} is not JSON", file.string()));
  }
  return doc;
}

/// `sha256:<hex>` -> the blob's path in the layout.
tl::expected<std::filesystem::path, std::string> blob_path(const std::filesystem::path& layout,
                                                           const json& descriptor) {
  if (!descriptor.is_object() || !descriptor.contains("digest") ||
      !descriptor["digest"].is_string()) {
    return tl::unexpected(std::string("a descriptor without a digest"));
  }
  const std::string& digest = descriptor["digest"].get_ref<const std::string&>();
  if (!is_oci_digest(digest)) {
    return tl::unexpected(
        fmt::format("{}: a descriptor's digest '{}' is not sha256: and 64 lowercase hex digits; "
                    "is it an OCI image layout, written by an image tool?",
                    layout.string(), printable(digest.substr(0, 100))));
  }
  return layout / "blobs" / "sha256" / digest.substr(7);
}

std::string string_at(const json& doc, const char* key) {
  return doc.contains(key) && doc[key].is_string() ? doc[key].get<std::string>() : std::string();
}

ImageConfig config_of(const json& doc) {
  ImageConfig config;
  config.os = string_at(doc, "os");
  config.architecture = string_at(doc, "architecture");
  config.variant = string_at(doc, "variant");
  auto strings = [](const json& list, std::vector<std::string>& out) {
    if (list.is_array()) {
      for (const auto& entry : list) {
        if (entry.is_string()) {
          out.push_back(entry);
        }
      }
    }
  };
  if (doc.contains("history") && doc["history"].is_array()) {
    for (const auto& entry : doc["history"]) {
      config.history.push_back(entry.is_object() ? string_at(entry, "created_by") : "");
    }
  }
  if (doc.contains("rootfs") && doc["rootfs"].is_object() && doc["rootfs"].contains("diff_ids")) {
    strings(doc["rootfs"]["diff_ids"], config.diff_ids);
  }
  if (!doc.contains("config") || !doc["config"].is_object()) {
    return config;
  }
  const json& inner = doc["config"];
  if (inner.contains("Cmd")) {
    strings(inner["Cmd"], config.cmd);
  }
  if (inner.contains("Entrypoint")) {
    strings(inner["Entrypoint"], config.entrypoint);
  }
  if (inner.contains("Env") && inner["Env"].is_array()) {
    for (const auto& entry : inner["Env"]) {
      if (entry.is_string()) {
        config.env.push_back(entry);
      }
    }
  }
  if (inner.contains("Labels") && inner["Labels"].is_object()) {
    for (const auto& [key, value] : inner["Labels"].items()) {
      if (value.is_string()) {
        config.labels[key] = value;
      }
    }
  }
  return config;
}

} // namespace

bool is_oci_digest(std::string_view digest) {
  constexpr std::string_view k_algorithm = "sha256:";
  return digest.size() == k_algorithm.size() + 64 && digest.starts_with(k_algorithm) &&
         std::all_of(digest.begin() + k_algorithm.size(), digest.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool same_platform(std::string_view a, std::string_view b) {
  auto normal = [](std::string_view platform) {
    constexpr std::string_view k_v8 = "/arm64/v8";
    return platform.ends_with(k_v8) ? platform.substr(0, platform.size() - 3) : platform;
  };
  return normal(a) == normal(b);
}

ImageEnv image_env(const ImageConfigRead& read) {
  return read.map([](const ImageConfig& config) { return config.env; });
}

std::string ImageConfig::platform() const {
  std::string platform = os + "/" + architecture;
  return variant.empty() ? platform : platform + "/" + variant;
}

ImageConfigRead image_config_from_layout(const std::filesystem::path& layout,
                                         const std::string& digest) {
  auto doc = read_json(layout / "index.json");
  if (doc && !digest.empty()) {
    const json* chosen = nullptr;
    if (doc->contains("manifests") && (*doc)["manifests"].is_array()) {
      for (const auto& entry : (*doc)["manifests"]) {
        if (entry.is_object() && entry.contains("digest") && entry["digest"] == digest) {
          chosen = &entry;
        }
      }
    }
    if (chosen == nullptr) {
      return tl::unexpected(
          fmt::format("{}/index.json names no image {}", layout.string(), digest));
    }
    auto manifest = blob_path(layout, *chosen);
    if (!manifest) {
      return tl::unexpected(manifest.error());
    }
    doc = read_json(*manifest);
  }
  // An image index may point at another index (a multi-platform image): follow the first
  // manifest until a manifest with a config turns up. A bounded walk: a loop is an error.
  for (int depth = 0; depth < 8 && doc; ++depth) {
    if (doc->contains("config")) {
      auto config_path = blob_path(layout, (*doc)["config"]);
      if (!config_path) {
        return tl::unexpected(config_path.error());
      }
      return read_json(*config_path).map(config_of);
    }
    if (!doc->contains("manifests") || !(*doc)["manifests"].is_array() ||
        (*doc)["manifests"].empty()) {
      return tl::unexpected(
          fmt::format("{} holds no image manifest; is it an OCI image layout?", layout.string()));
    }
    auto next = blob_path(layout, (*doc)["manifests"][0]);
    if (!next) {
      return tl::unexpected(next.error());
    }
    doc = read_json(*next);
  }
  if (!doc) {
    return tl::unexpected(doc.error());
  }
  return tl::unexpected(fmt::format("{}: indexes nest deeper than kiln follows", layout.string()));
}

std::vector<IndexEntry> index_entries(std::string_view index_json) {
  std::vector<IndexEntry> entries;
  auto doc = json::parse(index_json, nullptr, false);
  if (!doc.is_object() || !doc.contains("manifests") || !doc["manifests"].is_array()) {
    return entries;
  }
  for (const auto& entry : doc["manifests"]) {
    if (!entry.is_object() || !entry.contains("digest") || !entry["digest"].is_string() ||
        !entry.contains("platform") || !entry["platform"].is_object()) {
      continue;
    }
    ImageConfig platform;
    const auto& p = entry["platform"];
    platform.os = p.value("os", "");
    platform.architecture = p.value("architecture", "");
    platform.variant = p.value("variant", "");
    entries.push_back({platform.platform(), entry["digest"].get<std::string>()});
  }
  return entries;
}

tl::expected<std::vector<LayoutImage>, std::string>
layout_images(const std::filesystem::path& layout, const std::string& digest) {
  std::vector<LayoutImage> images;
  size_t followed = 0;
  std::string error;
  // Depth first, so the images come in the order the indexes list them.
  std::function<bool(const json&, int)> walk = [&](const json& doc, int depth) {
    if (doc.contains("config")) {
      auto config_path = blob_path(layout, doc["config"]);
      auto config = config_path ? read_json(*config_path) : tl::unexpected(config_path.error());
      if (!config) {
        error = config.error();
        return false;
      }
      LayoutImage image{config_of(*config), {}};
      if (doc.contains("layers") && doc["layers"].is_array()) {
        for (const auto& layer : doc["layers"]) {
          auto path = blob_path(layout, layer);
          if (!path) {
            error = path.error();
            return false;
          }
          image.layers.push_back(
              {*path, layer["digest"].get<std::string>(), string_at(layer, "mediaType")});
        }
      }
      images.push_back(std::move(image));
      return true;
    }
    if (!doc.contains("manifests") || !doc["manifests"].is_array() || doc["manifests"].empty()) {
      error =
          fmt::format("{} holds no image manifest; is it an OCI image layout?", layout.string());
      return false;
    }
    if (depth >= 8) {
      error = fmt::format("{}: indexes nest deeper than kiln follows", layout.string());
      return false;
    }
    for (const auto& entry : doc["manifests"]) {
      if (depth == 0 && !digest.empty() &&
          !(entry.is_object() && entry.contains("digest") && entry["digest"] == digest)) {
        continue;
      }
      // BuildKit's provenance and SBOM attestations sit in an index beside the images they
      // describe, as manifests for the platform unknown/unknown: no image to read.
      if (entry.is_object() && entry.contains("annotations") && entry["annotations"].is_object() &&
          entry["annotations"].contains("vnd.docker.reference.type") &&
          entry["annotations"]["vnd.docker.reference.type"] == "attestation-manifest") {
        continue;
      }
      if (++followed > k_layout_image_limit) {
        error = fmt::format("{}: more than {} images; kiln grades no more", layout.string(),
                            k_layout_image_limit);
        return false;
      }
      auto next_path = blob_path(layout, entry);
      auto next = next_path ? read_json(*next_path) : tl::unexpected(next_path.error());
      if (!next) {
        error = next.error();
        return false;
      }
      if (!walk(*next, depth + 1)) {
        return false;
      }
    }
    return true;
  };
  auto index = read_json(layout / "index.json");
  if (!index) {
    return tl::unexpected(index.error());
  }
  if (!walk(*index, 0)) {
    return tl::unexpected(error);
  }
  if (images.empty()) {
    return tl::unexpected(fmt::format("{}/index.json names no image {}", layout.string(), digest));
  }
  return images;
}

tl::expected<std::vector<ImageConfig>, std::string>
image_configs_from_layout(const std::filesystem::path& layout) {
  return layout_images(layout).map([](std::vector<LayoutImage> images) {
    std::vector<ImageConfig> configs;
    for (auto& image : images) {
      configs.push_back(std::move(image.config));
    }
    return configs;
  });
}

ImageConfigRead image_config_from_json(std::string_view text) {
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_object()) {
    return tl::unexpected(std::string("an image config is a JSON object"));
  }
  return config_of(doc);
}

ImageConfigRead image_config_from_buildah(const std::string& image) {
  CapturedRun inspect = run_captured({"buildah", "inspect", "--type", "image", "--", image});
  if (!inspect.exit.ok()) {
    return tl::unexpected(
        fmt::format("cannot inspect image {} with buildah: {}", image, inspect.failure()));
  }
  json doc = json::parse(inspect.output, nullptr, false);
  if (doc.is_discarded() || !doc.contains("OCIv1")) {
    return tl::unexpected(fmt::format("buildah inspect {} printed no OCI config", image));
  }
  return config_of(doc["OCIv1"]);
}

} // namespace kiln
