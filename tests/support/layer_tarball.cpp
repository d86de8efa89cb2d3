#include "layer_tarball.h"

#include <array>
#include <cstring>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>
#include <zstd.h>

namespace kiln::testing {

namespace {

void put(std::array<char, 512>& header, std::size_t offset, std::string_view text) {
  std::memcpy(header.data() + offset, text.data(), text.size());
}

void put_octal(std::array<char, 512>& header, std::size_t offset, std::size_t width,
               std::uint64_t value) {
  put(header, offset, fmt::format("{:0{}o}", value, width - 1));
}

std::string padded(std::string_view data) {
  std::string out(data);
  out.append((512 - data.size() % 512) % 512, '\0');
  return out;
}

std::string header_block(std::string_view name, char type, std::uint64_t size,
                         std::string_view link) {
  std::array<char, 512> header{};
  put(header, 0, name.substr(0, 100));
  put_octal(header, 100, 8, type == '5' ? 0755 : 0644);
  put_octal(header, 108, 8, 0);
  put_octal(header, 116, 8, 0);
  put_octal(header, 124, 12, size);
  put_octal(header, 136, 12, 1700000000);
  header[156] = type;
  put(header, 157, link.substr(0, 100));
  put(header, 257,
      std::string_view("ustar\0"
                       "00",
                       8));
  std::memset(header.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (char c : header) {
    sum += static_cast<unsigned char>(c);
  }
  put(header, 148, fmt::format("{:06o}", sum));
  header[154] = '\0';
  return std::string(header.data(), header.size());
}

std::string digest_name(std::string_view blob) {
  std::size_t h = std::hash<std::string_view>{}(blob);
  return fmt::format("{:016x}{:016x}{:016x}{:016x}", h, h ^ 0x9e3779b97f4a7c15ULL, h + 1,
                     blob.size());
}

std::string store(const std::filesystem::path& dir, const std::string& blob) {
  std::string hex = digest_name(blob);
  std::filesystem::create_directories(dir / "blobs" / "sha256");
  std::ofstream(dir / "blobs" / "sha256" / hex, std::ios::binary) << blob;
  return "sha256:" + hex;
}

} // namespace

void Tarball::entry(std::string_view path, char type, std::string_view content,
                    std::string_view link) {
  if (path.size() > 100) {
    // As Go's archive/tar does: a PAX record carries the name the header cannot hold.
    std::string record = fmt::format(" path={}\n", path);
    std::size_t length = record.size(); // the length counts its own digits
    while (length != record.size() + fmt::format("{}", length).size()) {
      length = record.size() + fmt::format("{}", length).size();
    }
    std::string pax = fmt::format("{}{}", length, record);
    m_bytes += header_block("PaxHeaders/long", 'x', pax.size(), "");
    m_bytes += padded(pax);
  }
  m_bytes += header_block(path, type, content.size(), link);
  m_bytes += padded(content);
}

Tarball& Tarball::file(std::string_view path, std::string_view content) {
  entry(path, '0', content, "");
  return *this;
}

Tarball& Tarball::dir(std::string_view path) {
  entry(std::string(path) + "/", '5', "", "");
  return *this;
}

Tarball& Tarball::symlink(std::string_view path, std::string_view target) {
  entry(path, '2', "", target);
  return *this;
}

Tarball& Tarball::hardlink(std::string_view path, std::string_view target) {
  entry(path, '1', "", target);
  return *this;
}

Tarball& Tarball::whiteout(std::string_view path) {
  std::size_t slash = path.rfind('/');
  std::string dir = slash == std::string_view::npos ? "" : std::string(path.substr(0, slash + 1));
  entry(dir + ".wh." + std::string(path.substr(slash + 1)), '0', "", "");
  return *this;
}

Tarball& Tarball::opaque(std::string_view dir) {
  entry(std::string(dir) + "/.wh..wh..opq", '0', "", "");
  return *this;
}

std::string Tarball::tar() const {
  return m_bytes + std::string(1024, '\0');
}

std::string Tarball::gzip() const {
  return gzip_member(tar());
}

std::string gzip_member(std::string_view bytes, int level, const std::string& name) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2");
  }
  gz_header head{};
  std::vector<Bytef> field(name.begin(), name.end());
  field.push_back(0);
  if (!name.empty()) {
    head.name = field.data();
    deflateSetHeader(&z, &head);
  }
  std::string out(deflateBound(&z, bytes.size()) + field.size(), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string Tarball::zstd() const {
  std::string in = tar();
  std::string out(ZSTD_compressBound(in.size()), '\0');
  std::size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
  out.resize(n);
  return out;
}

void write_layout(const std::filesystem::path& dir, const std::vector<ComposedImage>& images) {
  using nlohmann::json;
  json descriptors = json::array();
  for (const auto& image : images) {
    std::string os = image.platform.substr(0, image.platform.find('/'));
    std::string arch = image.platform.substr(image.platform.find('/') + 1);
    std::string config =
        json{{"os", os}, {"architecture", arch}, {"config", json::object()}}.dump();
    json layers = json::array();
    for (const auto& blob : image.layers) {
      layers.push_back({{"mediaType", "application/vnd.oci.image.layer.v1.tar+gzip"},
                        {"digest", store(dir, blob)},
                        {"size", blob.size()}});
    }
    std::string manifest = json{
        {"schemaVersion", 2},
        {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
        {"config",
         {{"mediaType", "application/vnd.oci.image.config.v1+json"},
          {"digest", store(dir, config)},
          {"size", config.size()}}},
        {"layers", layers}}.dump();
    descriptors.push_back({{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                           {"digest", store(dir, manifest)},
                           {"size", manifest.size()},
                           {"platform", {{"os", os}, {"architecture", arch}}}});
  }
  json index = {{"schemaVersion", 2}, {"manifests", descriptors}};
  if (images.size() > 1) {
    std::string nested = json{
        {"schemaVersion", 2},
        {"mediaType", "application/vnd.oci.image.index.v1+json"},
        {"manifests",
         descriptors}}.dump();
    index = {{"schemaVersion", 2},
             {"manifests",
              {{{"mediaType", "application/vnd.oci.image.index.v1+json"},
                {"digest", store(dir, nested)},
                {"size", nested.size()}}}}};
  }
  std::ofstream(dir / "oci-layout") << R"({"imageLayoutVersion":"1.0.0"})";
  std::ofstream(dir / "index.json") << index.dump();
}

} // namespace kiln::testing
