#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::testing {

/// A layer composed in memory, as an image builder writes one: ustar headers (a name over 100
/// bytes goes in a PAX record), whiteouts as `.wh.` entries. For what no recording shows:
/// every shape of entry at will, and layers that are broken on purpose.
class Tarball {
public:
  Tarball& file(std::string_view path, std::string_view content);
  Tarball& dir(std::string_view path);
  Tarball& symlink(std::string_view path, std::string_view target);
  Tarball& hardlink(std::string_view path, std::string_view target); // to an earlier entry
  Tarball& whiteout(std::string_view path); // deletes `path` from the layers below
  Tarball& opaque(std::string_view dir);    // hides the content `dir` had below

  /// The tar with its two end blocks.
  std::string tar() const;
  std::string gzip() const;
  std::string zstd() const;

private:
  void entry(std::string_view path, char type, std::string_view content, std::string_view link);
  std::string m_bytes;
};

/// `bytes` as one gzip member at `level` (0: stored, so its size follows the input's), with
/// `name` in its header when given: a layer may be several members one after another.
std::string gzip_member(std::string_view bytes, int level = 6, const std::string& name = {});

/// One image of a composed layout: its platform (`linux/amd64`) and its layer blobs, bottom
/// first.
struct ComposedImage {
  std::string platform;
  std::vector<std::string> layers;
};

/// An OCI image layout at `dir`: one image straight under index.json, or several behind a
/// nested index as a multi-platform build writes them. Blobs are named by digest-shaped names
/// (kiln follows the names; it does not verify the hashes).
void write_layout(const std::filesystem::path& dir, const std::vector<ComposedImage>& images);

} // namespace kiln::testing
