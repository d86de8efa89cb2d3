#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace kiln {

/// Replace `path` with `content` so a reader (or a kiln killed mid-write) sees either the old
/// file or the new one, never a torn one: write a temporary beside it, fsync, rename.
tl::expected<void, std::string> write_file_atomic(const std::filesystem::path& path,
                                                  std::string_view content);

/// The whole file in one open, fstat and (for a regular file) one read: no stream buffers,
/// no copy. A directory fails with "cannot read PATH: it is a directory".
tl::expected<std::string, std::string> read_file(const std::filesystem::path& path);

/// read_file into `text`, replacing its content but keeping its buffer: a caller that
/// reads many files in turn allocates once instead of once per file.
tl::expected<void, std::string> read_file_into(const std::filesystem::path& path,
                                               std::string& text);

/// Bytes an unprivileged writer can still use on the filesystem holding `path` (the nearest
/// existing folder above it when it does not exist yet).
tl::expected<uint64_t, std::string> free_bytes(const std::filesystem::path& path);

/// A file that every write reaches at once (no user-space buffer): a log that survives the
/// writer being killed.
class AppendFile {
public:
  AppendFile() = default;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  AppendFile(AppendFile&& other) noexcept;
  AppendFile& operator=(AppendFile&& other) noexcept;
  ~AppendFile();

  tl::expected<void, std::string> open(const std::filesystem::path& path);
  void write(std::string_view data);
  bool is_open() const { return m_fd >= 0; }

private:
  int m_fd = -1;
};

} // namespace kiln
