#include "gates/layer_tar.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>
#include <zstd.h>

#include "util/diagnostic.h"
#include "util/strings.h"

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
  /// Pass over `n` bytes of the stream; false when it ends first. A stream that can seek
  /// (a store layer's files) passes over them unread.
  virtual bool skip(std::uint64_t n) {
    std::array<char, 64 << 10> scratch;
    while (n > 0) {
      std::size_t got = read(scratch.data(),
                             static_cast<std::size_t>(std::min<std::uint64_t>(n, scratch.size())));
      if (got == 0) {
        return false;
      }
      n -= got;
    }
    return true;
  }
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

/// A layer as containers/storage keeps it (buildah's store): no tar, but its tar-split, the
/// JSON lines that hold every byte of the tar except the files' content (type 2: raw bytes,
/// base64; type 1: a file of `size` bytes by `name`), and a folder holding that content. The
/// tar it makes is the layer's tar byte for byte; a file's bytes are read only when asked, so a
/// scan that reads a few candidates never opens the rest.
class StoreDecoder : public Decoder {
public:
  StoreDecoder(Decoder& lines, const std::filesystem::path& content_dir)
      : m_lines(lines), m_root(::open(content_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (m_root < 0) {
      throw LayerError{fmt::format("cannot open its content {}: {}", content_dir.string(),
                                   std::strerror(errno))};
    }
  }
  ~StoreDecoder() override {
    close_file();
    ::close(m_root);
  }
  StoreDecoder(const StoreDecoder&) = delete;
  StoreDecoder& operator=(const StoreDecoder&) = delete;

  std::size_t read(char* out, std::size_t cap) override {
    while (true) {
      if (m_raw_pos < m_raw.size()) {
        std::size_t n = std::min(cap, m_raw.size() - m_raw_pos);
        std::copy_n(m_raw.data() + m_raw_pos, n, out);
        m_raw_pos += n;
        return n;
      }
      if (m_file_left > 0) {
        return read_file(out, cap);
      }
      if (!next_entry()) {
        return 0;
      }
    }
  }

  bool skip(std::uint64_t n) override {
    while (n > 0) {
      if (m_raw_pos < m_raw.size()) {
        std::size_t step =
            static_cast<std::size_t>(std::min<std::uint64_t>(n, m_raw.size() - m_raw_pos));
        m_raw_pos += step;
        n -= step;
      } else if (m_file_left > 0) {
        std::uint64_t step = std::min(n, m_file_left);
        m_file_offset += step; // read later at its offset, or never
        m_file_left -= step;
        n -= step;
        if (m_file_left == 0) {
          close_file();
        }
      } else if (!next_entry()) {
        return false;
      }
    }
    return true;
  }

private:
  /// At most a page of a file per read: a scan asks a file for its first bytes (an ELF header)
  /// far more often than for all of it.
  static constexpr std::size_t k_file_read = 4096;

  std::size_t read_file(char* out, std::size_t cap) {
    if (m_fd < 0) {
      open_file();
    }
    std::size_t want = static_cast<std::size_t>(
        std::min<std::uint64_t>({static_cast<std::uint64_t>(cap), m_file_left, k_file_read}));
    ssize_t got = ::pread(m_fd, out, want, static_cast<off_t>(m_file_offset));
    if (got < 0) {
      throw LayerError{
          fmt::format("cannot read {} in the store: {}", printable(m_name), std::strerror(errno))};
    }
    if (got == 0) {
      throw LayerError{fmt::format("{} in the store is shorter than its layer says: the store "
                                   "changed under the scan",
                                   printable(m_name))};
    }
    m_file_offset += static_cast<std::uint64_t>(got);
    m_file_left -= static_cast<std::uint64_t>(got);
    if (m_file_left == 0) {
      close_file();
    }
    return static_cast<std::size_t>(got);
  }

  /// The entry's file under the content folder, never through a symlink: a crafted layer's
  /// `etc -> /` must not make the scan read the host.
  void open_file() {
    int dir = ::dup(m_root);
    std::vector<std::string> parts = split(m_name, '/');
    std::erase_if(parts, [](const std::string& part) { return part.empty() || part == "."; });
    for (size_t i = 0; i < parts.size() && dir >= 0; ++i) {
      if (parts[i] == "..") {
        ::close(dir);
        throw LayerError{fmt::format("an entry path leaving the layer: {}", printable(m_name))};
      }
      bool last = i + 1 == parts.size();
      int next = ::openat(dir, parts[i].c_str(),
                          O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? 0 : O_DIRECTORY));
      int saved = errno;
      ::close(dir);
      dir = next;
      errno = saved;
    }
    if (dir < 0 || parts.empty()) {
      throw LayerError{fmt::format("cannot open {} in the store: {}", printable(m_name),
                                   parts.empty() ? "no name" : std::strerror(errno))};
    }
    m_fd = dir;
  }

  void close_file() {
    if (m_fd >= 0) {
      ::close(m_fd);
      m_fd = -1;
    }
  }

  /// The next tar-split line taken in; false at its end.
  bool next_entry() {
    std::string line;
    if (!next_line(line)) {
      return false;
    }
    auto entry = nlohmann::json::parse(line, nullptr, false);
    if (!entry.is_object() || !entry.contains("type") || !entry["type"].is_number_integer()) {
      throw LayerError{
          "a tar-split line that is not an entry: not a store layer, or a corrupt one"};
    }
    int type = entry["type"].get<int>();
    auto text = [&](const char* key) {
      return entry.contains(key) && entry[key].is_string() ? entry[key].get<std::string>()
                                                           : std::string();
    };
    m_raw.clear();
    m_raw_pos = 0;
    if (type == 2) {
      auto bytes = base64_decode(text("payload"));
      if (!bytes) {
        throw LayerError{"a tar-split segment that is not base64"};
      }
      m_raw = std::move(*bytes);
      return true;
    }
    if (type != 1) {
      throw LayerError{fmt::format("a tar-split entry of unknown type {}", type)};
    }
    // A name that is not UTF-8 is kept as its bytes, base64, in name_raw.
    m_name = text("name");
    if (auto raw = base64_decode(text("name_raw")); raw && !raw->empty()) {
      m_name = std::move(*raw);
    }
    std::uint64_t size = 0;
    if (entry.contains("size")) {
      if (!entry["size"].is_number_unsigned()) {
        throw LayerError{"a tar-split entry whose size is not a count"};
      }
      size = entry["size"].get<std::uint64_t>();
    }
    close_file();
    m_file_left = size;
    m_file_offset = 0;
    return true;
  }

  bool next_line(std::string& line) {
    while (true) {
      if (size_t end = m_text.find('\n', m_text_pos); end != std::string::npos) {
        line.assign(m_text, m_text_pos, end - m_text_pos);
        m_text_pos = end + 1;
        if (!line.empty()) {
          return true;
        }
        continue;
      }
      m_text.erase(0, m_text_pos);
      m_text_pos = 0;
      if (m_text.size() > k_tar_record_limit * 2) {
        throw LayerError{"a tar-split line over its limit: not a store layer"};
      }
      std::array<char, 64 << 10> chunk;
      std::size_t got = m_lines.read(chunk.data(), chunk.size());
      if (got == 0) {
        line = std::move(m_text);
        m_text.clear();
        return !line.empty();
      }
      m_text.append(chunk.data(), got);
    }
  }

  Decoder& m_lines;
  int m_root;
  std::string m_text; // tar-split text read and not yet taken
  std::size_t m_text_pos = 0;
  std::string m_raw; // the current segment's bytes
  std::size_t m_raw_pos = 0;
  std::string m_name; // the current file's
  std::uint64_t m_file_left = 0;
  std::uint64_t m_file_offset = 0;
  int m_fd = -1;
};

/// The decoded tar, read exactly or skipped.
class TarInput {
public:
  explicit TarInput(Decoder& decoder) : m_decoder(decoder), m_buffer(k_buffer) {}

  /// False at a clean end before any byte of the block; a block cut short is an error.
  bool read_block(char* out) { return read_exact(out, 512, true); }

  void read(char* out, std::size_t n) { read_exact(out, n, false); }

  void skip(std::uint64_t n) {
    std::size_t buffered = static_cast<std::size_t>(std::min<std::uint64_t>(n, m_end - m_pos));
    m_pos += buffered;
    if (n > buffered && !m_decoder.skip(n - buffered)) {
      throw LayerError{"the tar ends inside an entry: a truncated layer"};
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

tl::expected<void, std::string> walk_store_layer(const std::filesystem::path& tar_split,
                                                 const std::filesystem::path& content_dir,
                                                 const LayerVisitor& visit) {
  try {
    FileInput input(tar_split);
    Compressed compressed(input);
    std::unique_ptr<Decoder> lines;
    if (compressed.starts_with(k_gzip_magic)) {
      lines = std::make_unique<GzipDecoder>(compressed);
    } else {
      lines = std::make_unique<PlainDecoder>(compressed);
    }
    StoreDecoder decoder(*lines, content_dir);
    TarInput tar(decoder);
    walk_tar(tar, visit);
  } catch (const LayerError& error) {
    return tl::unexpected(fmt::format("store layer {}: {}", tar_split.string(), error.message));
  }
  return {};
}

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
