#include "driver/records_lock.h"

#include <cerrno>
#include <cstring>
#include <system_error>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include "util/fs.h"

namespace kiln {

namespace fs = std::filesystem;

RecordsLock::RecordsLock(RecordsLock&& other) noexcept : m_fd(other.m_fd) {
  other.m_fd = -1;
}

RecordsLock& RecordsLock::operator=(RecordsLock&& other) noexcept {
  if (this != &other) {
    if (m_fd >= 0) {
      ::close(m_fd);
    }
    m_fd = other.m_fd;
    other.m_fd = -1;
  }
  return *this;
}

RecordsLock::~RecordsLock() {
  if (m_fd >= 0) {
    ::close(m_fd); // releases the flock
  }
}

tl::expected<RecordsLock, std::string> RecordsLock::acquire(const fs::path& records) {
  std::error_code ec;
  fs::create_directories(records, ec);
  fs::path file = records / "kiln.lock";
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return tl::unexpected(fmt::format("cannot open {}: {}", file.string(), std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    ::close(fd);
    if (error != EWOULDBLOCK) {
      return tl::unexpected(fmt::format("cannot lock {}: {}", file.string(), std::strerror(error)));
    }
    std::string who = holder(records);
    return tl::unexpected(fmt::format(
        "another kiln run or command is using the records folder {}{}; wait for it to end, or "
        "give this chain other records ([chain] records)",
        records.string(), who.empty() ? "" : " (" + who + ")"));
  }
  RecordsLock lock;
  lock.m_fd = fd;
  return lock;
}

std::string RecordsLock::holder(const fs::path& records) {
  auto text = read_file(records / "kiln.lock", 4096);
  return text ? std::string(text->substr(0, text->find('\n'))) : "";
}

void RecordsLock::describe(const std::string& holder, const std::string& started) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string text =
      fmt::format("{}, pid {} on {}, started {}\n", holder, ::getpid(), host, started);
  // Best effort: the lock itself is the flock, this only names its holder.
  if (::ftruncate(m_fd, 0) == 0) {
    [[maybe_unused]] ssize_t n = ::pwrite(m_fd, text.data(), text.size(), 0);
  }
}

} // namespace kiln
