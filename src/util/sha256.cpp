#include "util/sha256.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <vector>

namespace kiln {

namespace {

constexpr std::uint32_t k_rounds[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

std::uint32_t rotr(std::uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

} // namespace

Sha256::Sha256()
    : m_state{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
              0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::block(const unsigned char* data) {
  std::uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = (std::uint32_t(data[i * 4]) << 24) | (std::uint32_t(data[i * 4 + 1]) << 16) |
           (std::uint32_t(data[i * 4 + 2]) << 8) | std::uint32_t(data[i * 4 + 3]);
  }
  for (int i = 16; i < 64; ++i) {
    std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::uint32_t a = m_state[0], b = m_state[1], c = m_state[2], d = m_state[3];
  std::uint32_t e = m_state[4], f = m_state[5], g = m_state[6], h = m_state[7];
  for (int i = 0; i < 64; ++i) {
    std::uint32_t t1 =
        h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k_rounds[i] + w[i];
    std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  m_state[0] += a;
  m_state[1] += b;
  m_state[2] += c;
  m_state[3] += d;
  m_state[4] += e;
  m_state[5] += f;
  m_state[6] += g;
  m_state[7] += h;
}

void Sha256::update(std::string_view bytes) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t size = bytes.size();
  m_length += size;
  if (m_pending_size > 0) {
    std::size_t take = std::min(size, m_pending.size() - m_pending_size);
    std::copy_n(data, take, m_pending.begin() + static_cast<long>(m_pending_size));
    m_pending_size += take;
    data += take;
    size -= take;
    if (m_pending_size < m_pending.size()) {
      return;
    }
    block(m_pending.data());
    m_pending_size = 0;
  }
  for (; size >= 64; data += 64, size -= 64) {
    block(data);
  }
  std::copy_n(data, size, m_pending.begin());
  m_pending_size = size;
}

std::string Sha256::hex() {
  // A 1 bit, zeros up to 56 mod 64 bytes, then the message's length in bits, big-endian.
  std::uint64_t bits = m_length * 8;
  unsigned char tail[72] = {0x80};
  std::size_t pad = (m_pending_size < 56 ? 56 : 120) - m_pending_size;
  for (int i = 0; i < 8; ++i) {
    tail[pad + static_cast<std::size_t>(i)] = static_cast<unsigned char>(bits >> (56 - 8 * i));
  }
  update(std::string_view(reinterpret_cast<const char*>(tail), pad + 8));
  std::string hex;
  const char* digits = "0123456789abcdef";
  for (std::uint32_t word : m_state) {
    for (int shift = 28; shift >= 0; shift -= 4) {
      hex += digits[(word >> shift) & 0xf];
    }
  }
  return hex;
}

std::string sha256_digest(std::string_view bytes) {
  Sha256 hash;
  hash.update(bytes);
  return "sha256:" + hash.hex();
}

tl::expected<std::string, std::string> sha256_file_digest(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return tl::unexpected("cannot read " + file.string() + ": " + std::strerror(errno));
  }
  Sha256 hash;
  std::vector<char> buffer(1 << 16);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hash.update(std::string_view(buffer.data(), static_cast<std::size_t>(in.gcount())));
  }
  if (in.bad()) {
    return tl::unexpected("cannot read " + file.string() + ": a read failed");
  }
  return "sha256:" + hash.hex();
}

namespace {

std::string hex_bytes(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

} // namespace

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
  std::string block(64, '\0');
  if (key.size() > block.size()) {
    Sha256 h;
    h.update(key);
    std::string digest = hex_bytes(h.hex());
    std::copy(digest.begin(), digest.end(), block.begin());
  } else {
    std::copy(key.begin(), key.end(), block.begin());
  }
  std::string inner_pad = block, outer_pad = block;
  for (size_t i = 0; i < block.size(); ++i) {
    inner_pad[i] = static_cast<char>(inner_pad[i] ^ 0x36);
    outer_pad[i] = static_cast<char>(outer_pad[i] ^ 0x5c);
  }
  Sha256 inner;
  inner.update(inner_pad);
  inner.update(message);
  Sha256 outer;
  outer.update(outer_pad);
  outer.update(hex_bytes(inner.hex()));
  return outer.hex();
}

} // namespace kiln
