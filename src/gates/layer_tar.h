#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace kiln {

/// One entry of an image layer's tar, as the layer means it.
struct LayerEntry {
  enum class Type { file, dir, symlink, hardlink, other };
  /// Relative to the image's root, without `./`, a leading or a trailing `/`: `root/.npmrc`.
  std::string path;
  Type type = Type::other;
  std::uint64_t size = 0;
  std::string link; // a symlink's or a hard link's target
  /// A whiteout (`.wh.<name>`): `path` is the name it deletes, with everything under it.
  bool whiteout = false;
  /// An opaque-directory marker (`.wh..wh..opq`): `path` is the directory whose content from
  /// earlier layers it hides.
  bool opaque = false;
};

/// What a reader of a layer does with an entry: `content` gives up to `limit` bytes of a
/// regular file's content (read at most once, only while the entry is being visited); not
/// asking skips the data unread.
using ContentReader = std::function<std::string(std::size_t limit)>;
using LayerVisitor = std::function<void(const LayerEntry& entry, const ContentReader& content)>;

/// The most a name record (a PAX header or a GNU long name) may weigh: the names in a layer
/// are paths, and a larger record is a trap, not a name.
constexpr std::uint64_t k_tar_record_limit = 1 << 20;

/// Reads a layer blob in one streaming pass, in bounded memory: the compression is told by the
/// blob's first bytes (gzip, zstd or a plain tar), and the tar may be ustar, GNU (long names,
/// base-256 sizes) or PAX (`path`, `linkpath`, `size`). Every entry goes to `visit` in order.
/// An error names the blob and what was wrong with it: a truncated stream, a bad header
/// checksum, a record over its limit.
tl::expected<void, std::string> walk_layer(const std::filesystem::path& blob,
                                           const LayerVisitor& visit);

/// walk_layer over a layer in containers/storage (buildah's store): its tar-split file
/// (`<driver>-layers/<id>.tar-split.gz`) and the folder holding its files (overlay's
/// `overlay/<id>/diff`, vfs's `vfs/dir/<id>`). The entries are the layer tar's, in its order;
/// a file's content is read from the folder only when the visitor asks for it.
tl::expected<void, std::string> walk_store_layer(const std::filesystem::path& tar_split,
                                                 const std::filesystem::path& content_dir,
                                                 const LayerVisitor& visit);

/// walk_layer over bytes already in memory (a fuzz target's input, a test's composed layer).
tl::expected<void, std::string> walk_layer_bytes(std::string_view bytes, std::string_view name,
                                                 const LayerVisitor& visit);

} // namespace kiln
