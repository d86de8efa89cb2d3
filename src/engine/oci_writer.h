#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

namespace kiln {

constexpr const char* k_oci_index_type = "application/vnd.oci.image.index.v1+json";
constexpr const char* k_oci_manifest_type = "application/vnd.oci.image.manifest.v1+json";
constexpr const char* k_oci_config_type = "application/vnd.oci.image.config.v1+json";

/// A blob as an index or a manifest names it.
struct Descriptor {
  std::string media_type;
  std::string digest; // sha256:<hex>
  std::uint64_t size = 0;
  std::map<std::string, std::string> annotations;
  std::string platform; // `os/arch[/variant]`; "" for none

  nlohmann::json to_json() const;
};

/// Bytes as JSON is written for a blob: compact, keys sorted (nlohmann's order), so the same
/// content has the same digest.
std::string blob_text(const nlohmann::json& doc);

/// An OCI image layout being assembled in a folder of its own: blobs by their digest, and an
/// index.json that names what it holds. What is put in is checked by nothing but its digest,
/// so the digest is always the real hash of the bytes.
class LayoutWriter {
public:
  /// The folder, its `oci-layout` and `blobs/sha256` made.
  static tl::expected<LayoutWriter, std::string> create(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return m_dir; }

  /// `bytes` as a blob; its descriptor.
  tl::expected<Descriptor, std::string> put(std::string_view bytes, std::string media_type);

  /// The manifest `digest` of the layout at `from` and every blob it names (config, layers),
  /// hard-linked where the filesystem allows, else copied: an image as another layout holds
  /// it, its bytes and digest unchanged.
  tl::expected<Descriptor, std::string> take_manifest(const std::filesystem::path& from,
                                                      const std::string& digest);

  /// The descriptor index.json gives the image named `name` (its `ref.name`), as a tool that
  /// wrote into the layout (`buildah push oci:<dir>:<name>`) left it.
  tl::expected<Descriptor, std::string> named(const std::string& name) const;

  /// A blob's bytes, read back (at most the image JSON limit).
  tl::expected<std::string, std::string> blob(const std::string& digest) const;

  /// Replace index.json with one entry: `top` under the name `name`.
  tl::expected<void, std::string> name_only(const Descriptor& top, const std::string& name);

private:
  explicit LayoutWriter(std::filesystem::path dir) : m_dir(std::move(dir)) {}
  std::filesystem::path blob_path(const std::string& digest) const;

  std::filesystem::path m_dir;
};

} // namespace kiln
