#include "gates/layer_tar.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <zlib.h>
#include <zstd.h>

#include "util/diagnostic.h"

namespace kiln {

namespace {

/// Thrown inside the walk and turned into the walk's error: every reader below has one way to
/// fail, which names the blob.
struct LayerError {
  std::string message;
};

constexpr std::size_t k_buffer = 256 << 10;

/// The blob's bytes: a file read in large chunks, or a buffer already in memory.
class RawInput {
public:
  virtual ~RawInput() = default;
  /// Up to `cap` bytes into `out`; 0 at the end.
  virtual std::size_t read(char* out, std::size_t cap) = 0;
};

class FileInput : public RawInput {
public:
  explicit FileInput(const std::filesystem::path& path) : m_file(std::fopen(path.c_str(), "rbe")) {
    if (m_file == nullptr) {
      throw LayerError{fmt::format("cannot open: {}", std::strerror(errno))};
    }
  }
  ~FileInput() override { std::fclose(m_file); }
  FileInput(const FileInput&) = delete;
  FileInput& operator=(const FileInput&) = delete;

  std::size_t read(char* out, std::size_t cap) override {
    std::size_t n = std::fread(out, 1, cap, m_file);
    if (n == 0 && std::ferror(m_file) != 0) {
      throw LayerError{fmt::format("read error: {}", std::strerror(errno))};
    }
    return n;
  }

private:
  std::FILE* m_file;
};

class MemoryInput : public RawInput {
public:
  explicit MemoryInput(std::string_view bytes) : m_bytes(bytes) {}
  std::size_t read(char* out, std::size_t cap) override {
    std::size_t n = std::min(cap, m_bytes.size());
    std::copy_n(m_bytes.data(), n, out); // not memcpy: an empty view may hold a null pointer
    m_bytes.remove_prefix(n);
    return n;
  }

private:
  std::string_view m_bytes;
};

/// The raw bytes with a look at the first ones, which say how the layer is compressed.
class Compressed {
public:
  explicit Compressed(RawInput& raw) : m_raw(raw), m_buffer(k_buffer) {}

  /// The unread bytes, refilled when empty; empty at the end.
  std::string_view available() {
    if (m_pos == m_end) {
      m_pos = 0;
      m_end = m_raw.read(m_buffer.data(), m_buffer.size());
    }
    return {m_buffer.data() + m_pos, m_end - m_pos};
  }
  void consume(std::size_t n) { m_pos += n; }

  /// Whether the unread bytes start with `magic`, reading on when fewer are buffered: the end
  /// of a gzip member may leave a byte or two before a refill.
  bool starts_with(std::string_view magic) {
    if (m_end - m_pos < magic.size()) {
      std::copy(m_buffer.begin() + static_cast<std::ptrdiff_t>(m_pos),
                m_buffer.begin() + static_cast<std::ptrdiff_t>(m_end), m_buffer.begin());
      m_end -= m_pos;
      m_pos = 0;
      while (m_end < magic.size()) {
        std::size_t n = m_raw.read(m_buffer.data() + m_end, m_buffer.size() - m_end);
        if (n == 0) {
          break;
        }
        m_end += n;
      }
    }
    return std::string_view(m_buffer.data() + m_pos, m_end - m_pos).substr(0, magic.size()) ==
           magic;
  }

private:
  RawInput& m_raw;
  std::vector<char> m_buffer;
  std::size_t m_pos = 0;
  std::size_t m_end = 0;
};

/// The tar stream, decompressed as the blob's first bytes say.
class Decoder {
public:
  virtual ~Decoder() = default;
  /// Up to `cap` bytes; 0 only at the end of a complete stream.
  virtual std::size_t read(char* out, std::size_t cap) = 0;
};

class PlainDecoder : public Decoder {
public:
  explicit PlainDecoder(Compressed& in) : m_in(in) {}
  std::size_t read(char* out, std::size_t cap) override {
    std::string_view chunk = m_in.available();
    std::size_t n = std::min(cap, chunk.size());
    std::copy_n(chunk.data(), n, out); // as MemoryInput: the view may be empty and null
    m_in.consume(n);
    return n;
  }

private:
  Compressed& m_in;
};

constexpr std::string_view k_gzip_magic = "\x1f\x8b";
constexpr std::string_view k_zstd_magic = "\x28\xb5\x2f\xfd";

class GzipDecoder : public Decoder {
public:
  explicit GzipDecoder(Compressed& in) : m_in(in) {
    if (inflateInit2(&m_z, 15 + 16) != Z_OK) {
      throw LayerError{"zlib could not start"};
    }
  }
  ~GzipDecoder() override { inflateEnd(&m_z); }
  GzipDecoder(const GzipDecoder&) = delete;
  GzipDecoder& operator=(const GzipDecoder&) = delete;

  std::size_t read(char* out, std::size_t cap) override {
    m_z.next_out = reinterpret_cast<Bytef*>(out);
    m_z.avail_out = static_cast<uInt>(cap);
    while (m_z.avail_out == cap && !m_done) {
      std::string_view chunk = m_in.available();
      if (chunk.empty()) {
        throw LayerError{"the gzip stream ends before its end: a truncated blob"};
      }
      m_z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(chunk.data()));
      m_z.avail_in = static_cast<uInt>(chunk.size());
      int status = inflate(&m_z, Z_NO_FLUSH);
      m_in.consume(chunk.size() - m_z.avail_in);
      if (status == Z_STREAM_END) {
        // Gzip members may follow each other (pigz, appended layers); anything else after
        // the first member is padding.
        if (m_in.starts_with(k_gzip_magic)) {
          inflateReset(&m_z);
        } else {
          m_done = true;
        }
      } else if (status != Z_OK && status != Z_BUF_ERROR) {
        throw LayerError{fmt::format("not a valid gzip stream ({})",
                                     m_z.msg != nullptr ? m_z.msg : "inflate failed")};
      }
    }
    return cap - m_z.avail_out;
  }

private:
  Compressed& m_in;
  z_stream m_z{};
  bool m_done = false;
};

class ZstdDecoder : public Decoder {
public:
  explicit ZstdDecoder(Compressed& in) : m_in(in), m_stream(ZSTD_createDStream()) {
    if (m_stream == nullptr) {
      throw LayerError{"zstd could not start"};
    }
  }
  ~ZstdDecoder() override { ZSTD_freeDStream(m_stream); }
  ZstdDecoder(const ZstdDecoder&) = delete;
  ZstdDecoder& operator=(const ZstdDecoder&) = delete;

  std::size_t read(char* out, std::size_t cap) override {
    ZSTD_outBuffer output{out, cap, 0};
    while (output.pos == 0) {
      std::string_view chunk = m_in.available();
      if (chunk.empty()) {
        if (m_frame_open) {
          throw LayerError{"the zstd stream ends inside a frame: a truncated blob"};
        }
        return 0;
      }
      ZSTD_inBuffer input{chunk.data(), chunk.size(), 0};
      std::size_t status = ZSTD_decompressStream(m_stream, &output, &input);
      m_in.consume(input.pos);
      if (ZSTD_isError(status) != 0) {
        throw LayerError{fmt::format("not a valid zstd stream ({})", ZSTD_getErrorName(status))};
      }
      m_frame_open = status != 0;
    }
    return output.pos;
  }

private:
  Compressed& m_in;
  ZSTD_DStream* m_stream;
  bool m_frame_open = false;
};

/// The decoded tar, read exactly or skipped.
class TarInput {
public:
  explicit TarInput(Decoder& decoder) : m_decoder(decoder), m_buffer(k_buffer) {}

  /// False at a clean end before any byte of the block; a block cut short is an error.
  bool read_block(char* out) { return read_exact(out, 512, true); }

  void read(char* out, std::size_t n) { read_exact(out, n, false); }

  void skip(std::uint64_t n) {
    while (n > 0) {
      if (m_pos == m_end && !refill()) {
        throw LayerError{"the tar ends inside an entry: a truncated layer"};
      }
      std::size_t step = static_cast<std::size_t>(std::min<std::uint64_t>(n, m_end - m_pos));
      m_pos += step;
      n -= step;
    }
  }

private:
  bool refill() {
    m_pos = 0;
    m_end = m_decoder.read(m_buffer.data(), m_buffer.size());
    return m_end > 0;
  }

  bool read_exact(char* out, std::size_t n, bool end_allowed) {
    std::size_t done = 0;
    while (done < n) {
      if (m_pos == m_end && !refill()) {
        if (done == 0 && end_allowed) {
          return false;
        }
        throw LayerError{"the tar ends inside an entry: a truncated layer"};
      }
      std::size_t step = std::min(n - done, m_end - m_pos);
      std::memcpy(out + done, m_buffer.data() + m_pos, step);
      m_pos += step;
      done += step;
    }
    return true;
  }

  Decoder& m_decoder;
  std::vector<char> m_buffer;
  std::size_t m_pos = 0;
  std::size_t m_end = 0;
};

std::string_view field(const char* header, std::size_t offset, std::size_t size) {
  std::string_view f(header + offset, size);
  return f.substr(0, f.find('\0'));
}

/// An octal field (spaces and NULs around it), or GNU's base-256 form for sizes over 8 GiB.
std::uint64_t number(const char* header, std::size_t offset, std::size_t size) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(header + offset);
  std::uint64_t value = 0;
  if ((bytes[0] & 0x80) != 0) {
    for (std::size_t i = 1; i < size; ++i) {
      if (value >> 56 != 0) {
        throw LayerError{"a base-256 number over 64 bits"};
      }
      value = (value << 8) | bytes[i];
    }
    return value;
  }
  std::size_t i = 0;
  while (i < size && bytes[i] == ' ') {
    ++i;
  }
  for (; i < size && bytes[i] >= '0' && bytes[i] <= '7'; ++i) {
    if (value >> 61 != 0) {
      throw LayerError{"an octal number over 64 bits"};
    }
    value = value * 8 + (bytes[i] - '0');
  }
  return value;
}

bool checksum_ok(const char* header) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(header);
  std::uint64_t unsigned_sum = 0;
  std::int64_t signed_sum = 0;
  for (std::size_t i = 0; i < 512; ++i) {
    unsigned char b = (i >= 148 && i < 156) ? ' ' : bytes[i];
    unsigned_sum += b;
    signed_sum += static_cast<signed char>(b);
  }
  std::uint64_t recorded = number(header, 148, 8);
  // Old tars summed signed chars; both sums are accepted, as GNU tar does.
  return recorded == unsigned_sum || static_cast<std::int64_t>(recorded) == signed_sum;
}

std::string normal_path(std::string_view path) {
  while (true) {
    if (path.starts_with("./")) {
      path.remove_prefix(2);
    } else if (path.starts_with("/")) {
      path.remove_prefix(1);
    } else {
      break;
    }
  }
  while (path.ends_with("/")) {
    path.remove_suffix(1);
  }
  return path == "." ? std::string() : std::string(path);
}

std::string record_text(TarInput& in, std::uint64_t size, const char* what) {
  if (size > k_tar_record_limit) {
    throw LayerError{
        fmt::format("a {} of {} bytes, over kiln's limit of {}", what, size, k_tar_record_limit)};
  }
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), text.size());
  in.skip((512 - size % 512) % 512);
  return text;
}

/// PATH_MAX: a longer path is no file an image can hold, and every path is kept in memory.
constexpr std::size_t k_path_limit = 4096;

struct PaxOverrides {
  std::optional<std::string> path;
  std::optional<std::string> link;
  std::optional<std::uint64_t> size;
};

/// PAX records: `<length> <key>=<value>\n`, the length counting the whole record.
void parse_pax(std::string_view text, PaxOverrides& out) {
  while (!text.empty()) {
    std::size_t space = text.find(' ');
    if (space == std::string_view::npos || space == 0 || space > 20) {
      throw LayerError{"a PAX header record without its length"};
    }
    std::uint64_t length = 0;
    for (char c : text.substr(0, space)) {
      if (c < '0' || c > '9') {
        throw LayerError{"a PAX header record without its length"};
      }
      length = length * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (length <= space + 1 || length > text.size() || text[length - 1] != '\n') {
      throw LayerError{"a PAX header record whose length does not match it"};
    }
    std::string_view record = text.substr(space + 1, length - space - 2);
    text.remove_prefix(length);
    std::size_t eq = record.find('=');
    if (eq == std::string_view::npos) {
      throw LayerError{"a PAX header record without '='"};
    }
    std::string_view key = record.substr(0, eq);
    std::string_view value = record.substr(eq + 1);
    if (key == "path") {
      out.path = std::string(value);
    } else if (key == "linkpath") {
      out.link = std::string(value);
    } else if (key == "size") {
      std::uint64_t size = 0;
      for (char c : value) {
        if (c < '0' || c > '9' || size > (UINT64_MAX - 9) / 10) {
          throw LayerError{"a PAX size that is not a number"};
        }
        size = size * 10 + static_cast<std::uint64_t>(c - '0');
      }
      out.size = size;
    }
  }
}

void walk_tar(TarInput& in, const LayerVisitor& visit) {
  std::array<char, 512> header{};
  PaxOverrides pending;
  std::optional<std::string> long_name;
  std::optional<std::string> long_link;
  while (in.read_block(header.data())) {
    if (std::all_of(header.begin(), header.end(), [](char c) { return c == '\0'; })) {
      return; // the end-of-archive blocks; what follows is padding
    }
    if (!checksum_ok(header.data())) {
      throw LayerError{"a tar header whose checksum does not match: not a tar layer, or a "
                       "corrupt one"};
    }
    char type = header[156];
    std::uint64_t size = number(header.data(), 124, 12);
    switch (type) {
    case 'x':
      parse_pax(record_text(in, size, "PAX header"), pending);
      continue;
    case 'g':
      record_text(in, size, "PAX global header"); // nothing kiln reads is global
      continue;
    case 'L':
      long_name = record_text(in, size, "GNU long name");
      long_name->resize(std::strlen(long_name->c_str()));
      continue;
    case 'K':
      long_link = record_text(in, size, "GNU long link name");
      long_link->resize(std::strlen(long_link->c_str()));
      continue;
    default:
      break;
    }
    std::string name(field(header.data(), 0, 100));
    // POSIX ustar only: GNU's magic is `ustar  ` and keeps times where POSIX keeps a prefix.
    if (std::string_view(header.data() + 257, 6) == std::string_view("ustar\0", 6)) {
      if (std::string_view prefix = field(header.data(), 345, 155); !prefix.empty()) {
        name = std::string(prefix) + "/" + name;
      }
    }
    LayerEntry entry;
    std::string raw = pending.path ? *pending.path : long_name ? *long_name : name;
    entry.link = pending.link ? *pending.link
                 : long_link  ? *long_link
                              : std::string(field(header.data(), 157, 100));
    if (pending.size) {
      size = *pending.size;
    }
    pending = {};
    long_name.reset();
    long_link.reset();
    switch (type) {
    case '0':
    case '\0':
    case '7':
      entry.type = LayerEntry::Type::file;
      break;
    case '1':
      entry.type = LayerEntry::Type::hardlink;
      entry.link = normal_path(entry.link);
      break;
    case '2':
      entry.type = LayerEntry::Type::symlink;
      break;
    case '5':
      entry.type = LayerEntry::Type::dir;
      break;
    default:
      entry.type = LayerEntry::Type::other;
      break;
    }
    entry.size = size;
    if (raw.find('\0') != std::string::npos || raw.size() > k_path_limit) {
      throw LayerError{fmt::format("an entry path with a NUL byte or over {} bytes: not a path "
                                   "any filesystem holds",
                                   k_path_limit)};
    }
    entry.path = normal_path(raw);
    std::size_t slash = entry.path.rfind('/');
    std::string_view base = std::string_view(entry.path).substr(slash + 1);
    std::string dir = slash == std::string::npos ? std::string() : entry.path.substr(0, slash);
    if (base == ".wh..wh..opq") {
      entry.opaque = true;
      entry.path = dir;
    } else if (base.starts_with(".wh.")) {
      entry.whiteout = true;
      entry.path = (dir.empty() ? std::string() : dir + "/") + std::string(base.substr(4));
    }
    std::uint64_t unread = size;
    bool asked = false;
    ContentReader content = [&](std::size_t limit) {
      if (asked || entry.type != LayerEntry::Type::file) {
        return std::string();
      }
      asked = true;
      std::string bytes(static_cast<std::size_t>(std::min<std::uint64_t>(limit, unread)), '\0');
      in.read(bytes.data(), bytes.size());
      unread -= bytes.size();
      return bytes;
    };
    if (!entry.path.empty() || entry.opaque) {
      visit(entry, content);
    }
    in.skip(unread); // apart: a size near 2^64 plus its padding would wrap
    in.skip((512 - size % 512) % 512);
  }
}

tl::expected<void, std::string> walk(RawInput& raw, std::string_view name,
                                     const LayerVisitor& visit) {
  try {
    Compressed compressed(raw);
    std::unique_ptr<Decoder> decoder;
    if (compressed.starts_with(k_gzip_magic)) {
      decoder = std::make_unique<GzipDecoder>(compressed);
    } else if (compressed.starts_with(k_zstd_magic)) {
      decoder = std::make_unique<ZstdDecoder>(compressed);
    } else {
      decoder = std::make_unique<PlainDecoder>(compressed);
    }
    TarInput tar(*decoder);
    walk_tar(tar, visit);
  } catch (const LayerError& error) {
    return tl::unexpected(fmt::format("layer {}: {}", printable(name), error.message));
  }
  return {};
}

} // namespace

tl::expected<void, std::string> walk_layer(const std::filesystem::path& blob,
                                           const LayerVisitor& visit) {
  try {
    FileInput input(blob);
    return walk(input, blob.string(), visit);
  } catch (const LayerError& error) {
    return tl::unexpected(fmt::format("layer {}: {}", blob.string(), error.message));
  }
}

tl::expected<void, std::string> walk_layer_bytes(std::string_view bytes, std::string_view name,
                                                 const LayerVisitor& visit) {
  MemoryInput input(bytes);
  return walk(input, name, visit);
}

} // namespace kiln
