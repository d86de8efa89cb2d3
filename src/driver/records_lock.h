#pragma once

#include <filesystem>
#include <string>

#include <tl/expected.hpp>

namespace kiln {

/// One run at a time on a records folder: `<records>/kiln.lock`, held with flock for the run's
/// life. The kernel drops the lock when kiln dies, however it dies, so holding it also proves
/// that any other run whose manifest still says `running` is dead.
class RecordsLock {
public:
  RecordsLock() = default;
  RecordsLock(const RecordsLock&) = delete;
  RecordsLock& operator=(const RecordsLock&) = delete;
  RecordsLock(RecordsLock&& other) noexcept;
  RecordsLock& operator=(RecordsLock&& other) noexcept;
  ~RecordsLock();

  /// Take the lock, or say which run holds it and what to do.
  static tl::expected<RecordsLock, std::string> acquire(const std::filesystem::path& records);

  /// Who the lock file of `records` says holds or last held the lock (`run 20261202-..., pid
  /// 12 on host, started ...`); "" when it names no one.
  static std::string holder(const std::filesystem::path& records);

  /// Say in the lock file who holds it (`run 20261202-...`, `kiln disk reclaim`), with this
  /// process and host, for the message a second run or command prints.
  void describe(const std::string& holder, const std::string& started);

private:
  int m_fd = -1;
};

} // namespace kiln
