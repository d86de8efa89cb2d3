#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

namespace kiln {

/// The most kiln reads of one JSON document about an image (an OCI index, manifest or config,
/// BuildKit's metadata file). They weigh kilobytes and registries refuse manifests over 4 MiB:
/// a larger file is a mistake or a trap (a link to /dev/zero), not an image.
constexpr uint64_t k_image_json_limit = 16 << 20;

/// Whether `digest` is `sha256:` and 64 lowercase hex digits, the only form kiln follows: it
/// becomes a path under blobs/, where anything else (`sha256:../../etc/hostname`) could lead
/// out of the layout.
bool is_oci_digest(std::string_view digest);

/// What kiln reads of an image's config.
struct ImageConfig {
  std::vector<std::string> env; // `NAME=value` entries
  std::map<std::string, std::string> labels;
  std::string os, architecture, variant;
  std::vector<std::string> cmd, entrypoint;
  /// Each history entry's `created_by`: the instruction that made it, build args of a RUN
  /// spelled out (`RUN |1 TOKEN=... /bin/sh -c ...`).
  std::vector<std::string> history;
  std::vector<std::string> diff_ids; // rootfs.diff_ids: the layers' uncompressed digests

  /// `os/arch[/variant]`, as a lane names it.
  std::string platform() const;
};

using ImageConfigRead = tl::expected<ImageConfig, std::string>;

/// Whether two `os/arch[/variant]` name one platform: arm64 without a variant is arm64/v8, as
/// containerd matches them (builders write either).
bool same_platform(std::string_view a, std::string_view b);

/// An image config's Env entries (`NAME=value`), or why they could not be read.
using ImageEnv = tl::expected<std::vector<std::string>, std::string>;

/// The Env of a config read, what the image-env gate grades.
ImageEnv image_env(const ImageConfigRead& read);

/// The config of an image read from an OCI image layout folder: index.json -> manifest ->
/// config blob. `digest` picks the manifest index.json names (a layout can hold several); empty
/// takes the first. A nested index is followed to its first manifest. Each file must be a
/// regular file of at most k_image_json_limit bytes, named by a digest is_oci_digest accepts.
ImageConfigRead image_config_from_layout(const std::filesystem::path& layout,
                                         const std::string& digest = {});

/// The config of every image an OCI image layout holds: each manifest index.json names, and
/// through a nested index (a multi-platform image) each of its manifests, in order. A bounded
/// walk: indexes nest at most 8 deep and at most k_layout_image_limit descriptors are followed.
/// An error when any descriptor leads nowhere readable: a platform that cannot be read cannot be
/// graded.
constexpr size_t k_layout_image_limit = 256;
tl::expected<std::vector<ImageConfig>, std::string>
image_configs_from_layout(const std::filesystem::path& layout);

/// One layer of an image in an OCI layout: its blob, compressed as `media_type` says (gzip,
/// zstd or none; readers trust the blob's first bytes more than the name).
struct LayerBlob {
  std::filesystem::path path;
  std::string digest;
  std::string media_type;
  /// Set for a layer of buildah's store, read in place: `path` is then its tar-split file and
  /// this the folder holding its files (walk_store_layer).
  std::filesystem::path content_dir = {};
};

/// An image of an OCI layout: its config and its layers, bottom first.
struct LayoutImage {
  ImageConfig config;
  std::vector<LayerBlob> layers;
};

/// Every image an OCI layout holds, as image_configs_from_layout walks them, with their
/// layers; with `digest`, only what the index.json entry of that digest leads to.
tl::expected<std::vector<LayoutImage>, std::string>
layout_images(const std::filesystem::path& layout, const std::string& digest = {});

/// One image of an image index (manifest list): its platform, `os/arch[/variant]`, and digest.
struct IndexEntry {
  std::string platform;
  std::string digest;
};

/// The entries of an image index as JSON (`buildah manifest inspect`, an OCI index.json);
/// entries without a digest or platform are left out, and anything but an index gives none.
std::vector<IndexEntry> index_entries(std::string_view index_json);

/// Where an image's layers can be read: an OCI layout, and the digest of the image's entry in
/// its index.json ("" for every image it holds).
struct ImageLayout {
  std::filesystem::path path;
  std::string digest;
};

/// The config of an image in buildah's store (`buildah inspect --type image`).
ImageConfigRead image_config_from_buildah(const std::string& image);

/// An image config blob (OCI or Docker image config JSON) read.
ImageConfigRead image_config_from_json(std::string_view text);

} // namespace kiln
