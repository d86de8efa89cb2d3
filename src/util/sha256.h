#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace kiln {

/// SHA-256 (FIPS 180-4), fed in pieces: an OCI digest names a blob by it, so a digest kiln
/// writes or checks must be the real hash of the bytes.
class Sha256 {
public:
  Sha256();
  void update(std::string_view bytes);
  /// The lowercase hex of the hash of everything fed; the object is spent after it.
  std::string hex();

private:
  void block(const unsigned char* data);

  std::array<std::uint32_t, 8> m_state;
  std::array<unsigned char, 64> m_pending{};
  std::size_t m_pending_size = 0;
  std::uint64_t m_length = 0;
};

/// `sha256:<hex>` of `bytes`: an OCI digest.
std::string sha256_digest(std::string_view bytes);

/// `sha256:<hex>` of a file's content, read in pieces; an error names the file.
tl::expected<std::string, std::string> sha256_file_digest(const std::filesystem::path& file);

/// HMAC-SHA256 (RFC 2104) of `message` under `key`, lowercase hex: a value kept only to tell
/// whether it changed, without it being readable from what is kept.
std::string hmac_sha256_hex(std::string_view key, std::string_view message);

} // namespace kiln
