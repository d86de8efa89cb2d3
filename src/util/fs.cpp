#include "util/fs.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fmt/format.h>

namespace kiln {

namespace {

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

} // namespace

tl::expected<void, std::string> write_file_atomic(const std::filesystem::path& path,
                                                  std::string_view content) {
  std::filesystem::path tmp = path;
  tmp += fmt::format(".tmp{}", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return tl::unexpected(fmt::format("cannot write {}: {}", tmp.string(), std::strerror(errno)));
  }
  bool written = write_all(fd, content) && ::fsync(fd) == 0;
  int saved = errno;
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    saved = written ? errno : saved;
    ::unlink(tmp.c_str());
    return tl::unexpected(fmt::format("cannot write {}: {}", path.string(), std::strerror(saved)));
  }
  return {};
}

tl::expected<uint64_t, std::string> free_bytes(const std::filesystem::path& path) {
  std::filesystem::path probe = path;
  std::error_code error;
  while (!probe.empty() && !std::filesystem::exists(probe, error) && probe != probe.root_path()) {
    probe = probe.parent_path();
  }
  struct statvfs stats {};
  if (::statvfs(probe.empty() ? "." : probe.c_str(), &stats) != 0) {
    return tl::unexpected(
        fmt::format("cannot measure free space on {}: {}", probe.string(), std::strerror(errno)));
  }
  return static_cast<uint64_t>(stats.f_bavail) * stats.f_frsize;
}

tl::expected<void, std::string> read_file_into(const std::filesystem::path& path,
                                               std::string& text) {
  text.clear();
  auto fail = [&](int error) {
    return tl::unexpected(fmt::format("cannot read {}: {}", path.string(), std::strerror(error)));
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return fail(errno);
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    int saved = errno;
    ::close(fd);
    return fail(saved);
  }
  if (S_ISDIR(info.st_mode)) {
    ::close(fd);
    return tl::unexpected(fmt::format("cannot read {}: it is a directory", path.string()));
  }
  // st_size is exact for a regular file; pipes and /proc files report 0 or less than they
  // hold, so the loop reads on until end of file whatever the size said.
  bool sized = S_ISREG(info.st_mode) && info.st_size > 0;
  text.resize(sized ? static_cast<std::size_t>(info.st_size) + 1 : 4096);
  std::size_t size = 0;
  while (true) {
    if (size == text.size()) {
      text.resize(text.size() * 2);
    }
    ssize_t n = ::read(fd, text.data() + size, text.size() - size);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      int saved = errno;
      ::close(fd);
      text.clear();
      return fail(saved);
    }
    if (n == 0) {
      break;
    }
    size += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(size);
  return {};
}

tl::expected<std::string, std::string> read_file(const std::filesystem::path& path) {
  std::string text;
  if (auto read = read_file_into(path, text); !read) {
    return tl::unexpected(std::move(read.error()));
  }
  return text;
}

AppendFile::AppendFile(AppendFile&& other) noexcept : m_fd(other.m_fd) {
  other.m_fd = -1;
}

AppendFile& AppendFile::operator=(AppendFile&& other) noexcept {
  if (this != &other) {
    if (m_fd >= 0) {
      ::close(m_fd);
    }
    m_fd = other.m_fd;
    other.m_fd = -1;
  }
  return *this;
}

AppendFile::~AppendFile() {
  if (m_fd >= 0) {
    ::close(m_fd);
  }
}

tl::expected<void, std::string> AppendFile::open(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return tl::unexpected(fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
  }
  if (m_fd >= 0) {
    ::close(m_fd);
  }
  m_fd = fd;
  return {};
}

void AppendFile::write(std::string_view data) {
  if (m_fd >= 0) {
    write_all(m_fd, data);
  }
}

} // namespace kiln
