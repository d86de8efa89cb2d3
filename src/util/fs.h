#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace kiln {

/// Whether a write waits for the disk. Both survive the writer being killed, since the rename
/// is atomic; `flush` also survives a power cut, at the cost of an fsync (on a busy disk, more
/// than a cached stage takes to build).
enum class Durability { flush, rename_only };

/// Whether a write error of this file's functions ("cannot write PATH: <strerror>...") says the
/// filesystem is out of room: no space left (ENOSPC) or over a quota (EDQUOT).
bool is_out_of_room(std::string_view write_error);

/// Replace `path` with `content` so a reader (or a kiln killed mid-write) sees either the old
/// file or the new one, never a torn one: write a temporary beside it, fsync (with `flush`),
/// rename. The temporary's name is unique to the process and the call, so two writers never
/// share one.
tl::expected<void, std::string> write_file_atomic(const std::filesystem::path& path,
                                                  std::string_view content,
                                                  Durability durability = Durability::flush);

/// Create `path` with `content`, whole or not at all, and never over a file that exists: the
/// content goes to a temporary beside it, which is then linked to `path` (link fails when the
/// name is taken, where a rename would replace it). For files a user owns, like a chain file
/// `kiln init` writes.
tl::expected<void, std::string> write_new_file(const std::filesystem::path& path,
                                               std::string_view content);

/// What read_file reads at most unless told otherwise: larger than any file kiln reads whole,
/// small enough that a mistake (a link to /dev/zero, a log named as a Dockerfile) fails fast.
constexpr uint64_t k_default_read_limit = uint64_t{1} << 30;

/// The whole of a regular file in one open, fstat and one read: no stream buffers, no copy.
/// Anything else fails with the reason: a directory, a FIFO or a device ("is not a regular
/// file"; a FIFO never blocks the open), or more than `limit` bytes.
tl::expected<std::string, std::string> read_file(const std::filesystem::path& path,
                                                 uint64_t limit = k_default_read_limit);

/// read_file into `text`, replacing its content but keeping its buffer: a caller that
/// reads many files in turn allocates once instead of once per file.
tl::expected<void, std::string> read_file_into(const std::filesystem::path& path, std::string& text,
                                               uint64_t limit = k_default_read_limit);

/// Whether the regular files `a` and `b` hold the same bytes, compared a chunk at a time (no
/// copy of either in memory); false when either cannot be read.
bool same_bytes(const std::filesystem::path& a, const std::filesystem::path& b);

/// A /proc or /sys file: regular in name, sized 0, read until end of file up to `limit`.
tl::expected<std::string, std::string> read_proc_file(const std::filesystem::path& path,
                                                      uint64_t limit = 1 << 20);

/// Bytes an unprivileged writer can still use on the filesystem holding `path` (the nearest
/// existing folder above it when it does not exist yet).
tl::expected<uint64_t, std::string> free_bytes(const std::filesystem::path& path);

/// The device of the filesystem holding `path` (or the nearest existing folder above it):
/// two paths share free space exactly when their devices are equal.
tl::expected<uint64_t, std::string> filesystem_device(const std::filesystem::path& path);

/// What tells filesystems apart: `path`'s device, or the path itself when it cannot be read.
/// Two paths with one key share their free space.
std::string filesystem_key(const std::filesystem::path& path);

/// The executable `name` in the `:`-separated folders of `path` (an empty entry is the current
/// folder, as a shell reads it), or "" when there is none.
std::string find_on_path(std::string_view name, std::string_view path);

/// Device, inode, size, modification and change times of `path` (followed), as one line that
/// changes whenever the file is replaced or rewritten; "" when it cannot be read.
std::string file_identity(const std::filesystem::path& path);

/// The program `name` as this process's PATH finds it, then its file_identity: "<path>
/// <identity>", or "" when there is none.
std::string program_identity(std::string_view name);

/// Whether something listens on the Unix socket at `path`: a connect, closed at once.
bool unix_socket_listening(const std::filesystem::path& path);

/// A file that every write reaches at once (no user-space buffer): a log that survives the
/// writer being killed. The first failed write (a full disk) latches: the file is cut there,
/// later writes are dropped, and error() and cut_at() say what happened and where.
class AppendFile {
public:
  AppendFile() = default;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  AppendFile(AppendFile&& other) noexcept;
  AppendFile& operator=(AppendFile&& other) noexcept;
  ~AppendFile();

  tl::expected<void, std::string> open(const std::filesystem::path& path);
  /// False once a write has failed (this one or an earlier one).
  bool write(std::string_view data);
  /// Write `data` even after a failure: a marker saying where the file was cut, once room
  /// was made. False when it still does not fit.
  bool write_after_cut(std::string_view data);
  void close();
  bool is_open() const { return m_fd >= 0; }
  bool failed() const { return !m_error.empty(); }
  /// "cannot write PATH: No space left on device", or "" while every write succeeded.
  const std::string& error() const { return m_error; }
  /// Bytes in the file where the first failed write was cut off.
  uint64_t cut_at() const { return m_cut_at; }
  /// Bytes written through this object (the file's size when it was new).
  uint64_t written() const { return m_written; }

private:
  int m_fd = -1;
  std::filesystem::path m_path;
  uint64_t m_written = 0;
  uint64_t m_cut_at = 0;
  std::string m_error;
};

/// Room set aside on a filesystem for a record that must survive the disk filling up: a file
/// of `bytes` allocated now (fallocate, so it really holds the blocks) and removed by
/// release() when the record needs the room.
class Headroom {
public:
  Headroom() = default;
  Headroom(const Headroom&) = delete;
  Headroom& operator=(const Headroom&) = delete;
  Headroom(Headroom&& other) noexcept;
  Headroom& operator=(Headroom&& other) noexcept;
  ~Headroom();

  static tl::expected<Headroom, std::string> reserve(const std::filesystem::path& path,
                                                     uint64_t bytes);
  /// Give the room back to the filesystem. True when there was room to give.
  bool release();
  bool held() const { return !m_path.empty(); }

private:
  std::filesystem::path m_path;
};

} // namespace kiln
