#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <unordered_map>

#include <tl/expected.hpp>

namespace kiln {

/// Content hashes of files, remembered from run to run by what a stat of the file sees (device,
/// inode, size, mtime and ctime in nanoseconds), as git's index remembers them: a file whose stat
/// did not change costs a stat, not a read. Safe to share between threads.
class FileHashes {
public:
  /// Reads the table in `store` (`<records>/file-hashes`) when there is one; an unreadable or
  /// torn table is a cold start, never an error.
  explicit FileHashes(std::filesystem::path store);

  /// The lowercase hex SHA-256 of `file`'s content; an error names the file.
  tl::expected<std::string, std::string> hash(const std::filesystem::path& file);

  /// Writes the table back when a hash was added or changed. An entry whose mtime is within two
  /// seconds of now is left out: a write in the same timestamp tick as its hash would otherwise
  /// go unseen ("racily clean", in git's words), so such a file is read again next time.
  tl::expected<void, std::string> save();

  struct Counts {
    uint64_t files = 0; // hash() calls
    uint64_t read = 0;  // of them, files whose content was read
    uint64_t bytes = 0; // bytes read
  };
  Counts counts() const;

private:
  struct Entry {
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    std::string hash;
    bool operator==(const Entry&) const = default;
  };

  std::filesystem::path m_store;
  mutable std::mutex m_mutex;
  std::unordered_map<std::string, Entry> m_entries;
  bool m_changed = false;
  Counts m_counts;
};

} // namespace kiln
