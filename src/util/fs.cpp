#include "util/fs.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/fd.h"

namespace kiln {

namespace {

/// Bytes of `data` written before an error; all of it on success.
size_t write_all(int fd, std::string_view data, int& error) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      error = errno;
      return done;
    }
    done += static_cast<size_t>(n);
  }
  return done;
}

/// Read from `fd` until `size` bytes or end of file; the bytes read. A read error sets `error`.
size_t read_full(int fd, char* buffer, size_t size, int& error) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, buffer + done, size - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      error = errno;
      return done;
    }
    if (n == 0) {
      break;
    }
    done += static_cast<size_t>(n);
  }
  return done;
}

std::string failure(std::string_view what, const std::filesystem::path& path, int error) {
  return std::string(what) + " " + path.string() + ": " + std::strerror(error);
}

} // namespace

bool is_out_of_room(std::string_view write_error) {
  for (int error : {ENOSPC, EDQUOT}) {
    if (write_error.find(std::string(": ") + std::strerror(error)) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

namespace {

std::filesystem::path nearest_existing(const std::filesystem::path& path) {
  std::filesystem::path probe = path;
  std::error_code error;
  while (!probe.empty() && !std::filesystem::exists(probe, error) && probe != probe.root_path()) {
    probe = probe.parent_path();
  }
  return probe.empty() ? std::filesystem::path(".") : probe;
}

} // namespace

tl::expected<void, std::string> write_file_atomic(const std::filesystem::path& path,
                                                  std::string_view content, Durability durability) {
  static std::atomic<unsigned> counter{0};
  std::filesystem::path tmp = path;
  tmp += ".tmp" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return tl::unexpected(failure("cannot write", tmp, errno));
  }
  int error = 0;
  bool written = write_all(fd, content, error) == content.size();
  if (written && durability == Durability::flush && ::fsync(fd) != 0) {
    written = false;
    error = errno;
  }
  ::close(fd);
  if (written && ::rename(tmp.c_str(), path.c_str()) != 0) {
    written = false;
    error = errno;
  }
  if (!written) {
    ::unlink(tmp.c_str());
    return tl::unexpected(failure("cannot write", path, error));
  }
  return {};
}

tl::expected<void, std::string> write_new_file(const std::filesystem::path& path,
                                               std::string_view content) {
  std::filesystem::path tmp = path;
  tmp += ".new" + std::to_string(::getpid());
  if (auto written = write_file_atomic(tmp, content); !written) {
    return written;
  }
  int error = ::link(tmp.c_str(), path.c_str()) == 0 ? 0 : errno;
  ::unlink(tmp.c_str());
  if (error == EEXIST) {
    return tl::unexpected(path.string() + " exists, and is not overwritten");
  }
  if (error != 0) {
    return tl::unexpected(failure("cannot write", path, error));
  }
  return {};
}

tl::expected<uint64_t, std::string> free_bytes(const std::filesystem::path& path) {
  std::filesystem::path probe = nearest_existing(path);
  struct statvfs stats {};
  if (::statvfs(probe.c_str(), &stats) != 0) {
    return tl::unexpected(failure("cannot measure free space on", probe, errno));
  }
  return static_cast<uint64_t>(stats.f_bavail) * stats.f_frsize;
}

tl::expected<uint64_t, std::string> filesystem_device(const std::filesystem::path& path) {
  std::filesystem::path probe = nearest_existing(path);
  struct stat info {};
  if (::stat(probe.c_str(), &info) != 0) {
    return tl::unexpected(failure("cannot stat", probe, errno));
  }
  return static_cast<uint64_t>(info.st_dev);
}

std::string filesystem_key(const std::filesystem::path& path) {
  auto device = filesystem_device(path);
  return device ? "dev:" + std::to_string(*device) : "path:" + path.string();
}

namespace {

/// Read from `fd` into `text` until end of file, up to `limit` bytes; `size_hint` sizes the
/// first read. An error message, or "" on success.
std::string read_fd(int fd, const std::filesystem::path& path, std::string& text, size_t size_hint,
                    uint64_t limit) {
  // One byte past the hint, so the read that returns 0 needs no second allocation.
  text.resize(std::min<uint64_t>(size_hint + 1, limit + 1));
  size_t size = 0;
  while (true) {
    if (size == text.size()) {
      if (size > limit) {
        text.clear();
        return "cannot read " + path.string() + ": larger than " + std::to_string(limit) + " bytes";
      }
      text.resize(std::min<uint64_t>(text.size() * 2, limit + 1));
    }
    int error = 0;
    size_t room = text.size() - size;
    size_t got = read_full(fd, text.data() + size, room, error);
    if (error != 0) {
      text.clear();
      return failure("cannot read", path, error);
    }
    size += got;
    if (got < room) {
      break; // end of file
    }
  }
  if (size > limit) {
    text.clear();
    return "cannot read " + path.string() + ": larger than " + std::to_string(limit) + " bytes";
  }
  text.resize(size);
  return {};
}

/// A regular file, open for reading.
struct OpenFile {
  Fd fd;
  uint64_t size = 0;
};

/// `path` opened for reading when it is a regular file, else why not ("cannot read <path>:
/// ..."). Non-blocking: opening a FIFO for reading would otherwise wait for a writer forever.
tl::expected<OpenFile, std::string> open_regular(const std::filesystem::path& path) {
  OpenFile file{Fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK))};
  struct stat info {};
  if (file.fd.get() < 0 || ::fstat(file.fd.get(), &info) != 0) {
    return tl::unexpected(failure("cannot read", path, errno));
  }
  if (!S_ISREG(info.st_mode)) {
    return tl::unexpected("cannot read " + path.string() + ": " +
                          (S_ISDIR(info.st_mode) ? "it is a directory" : "not a regular file"));
  }
  file.size = static_cast<uint64_t>(info.st_size);
  return file;
}

} // namespace

tl::expected<void, std::string> read_file_into(const std::filesystem::path& path, std::string& text,
                                               uint64_t limit) {
  text.clear();
  auto file = open_regular(path);
  if (!file) {
    return tl::unexpected(std::move(file.error()));
  }
  if (file->size > limit) {
    return tl::unexpected("cannot read " + path.string() + ": " + std::to_string(file->size) +
                          " bytes, more than the " + std::to_string(limit) + " allowed");
  }
  // st_size is exact for a regular file, but the file may grow while it is read: the loop
  // reads on to end of file, still within the limit.
  std::string error = read_fd(file->fd.get(), path, text, static_cast<size_t>(file->size), limit);
  if (!error.empty()) {
    return tl::unexpected(std::move(error));
  }
  return {};
}

tl::expected<std::string, std::string> read_file(const std::filesystem::path& path,
                                                 uint64_t limit) {
  std::string text;
  if (auto read = read_file_into(path, text, limit); !read) {
    return tl::unexpected(std::move(read.error()));
  }
  return text;
}

bool same_bytes(const std::filesystem::path& a, const std::filesystem::path& b) {
  auto first = open_regular(a);
  auto second = open_regular(b);
  if (!first || !second || first->size != second->size) {
    return false;
  }
  constexpr size_t k_chunk = 64 << 10;
  auto first_chunk = std::make_unique_for_overwrite<char[]>(k_chunk);
  auto second_chunk = std::make_unique_for_overwrite<char[]>(k_chunk);
  while (true) {
    int error = 0;
    size_t got = read_full(first->fd.get(), first_chunk.get(), k_chunk, error);
    if (read_full(second->fd.get(), second_chunk.get(), k_chunk, error) != got || error != 0 ||
        std::memcmp(first_chunk.get(), second_chunk.get(), got) != 0) {
      return false;
    }
    if (got < k_chunk) {
      return true; // both ended
    }
  }
}

tl::expected<std::string, std::string> read_proc_file(const std::filesystem::path& path,
                                                      uint64_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return tl::unexpected(failure("cannot read", path, errno));
  }
  std::string text;
  std::string error = read_fd(fd, path, text, 4096, limit);
  ::close(fd);
  if (!error.empty()) {
    return tl::unexpected(std::move(error));
  }
  return text;
}

std::string find_on_path(std::string_view name, std::string_view path) {
  while (true) {
    size_t colon = path.find(':');
    std::string_view dir = path.substr(0, colon);
    std::string candidate(dir.empty() ? "." : dir);
    candidate.push_back('/');
    candidate.append(name);
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) {
      return {};
    }
    path.remove_prefix(colon + 1);
  }
}

std::string file_identity(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return {};
  }
  auto ns = [](const timespec& t) {
    return std::to_string(t.tv_sec) + "." + std::to_string(t.tv_nsec);
  };
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + " " +
         std::to_string(st.st_size) + " " + ns(st.st_mtim) + " " + ns(st.st_ctim);
}

std::string program_identity(std::string_view name) {
  const char* path = std::getenv("PATH");
  std::string program = find_on_path(name, path != nullptr ? path : "");
  std::string identity = program.empty() ? std::string() : file_identity(program);
  return identity.empty() ? std::string() : program + " " + identity;
}

bool unix_socket_listening(const std::filesystem::path& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string& text = path.native();
  if (text.empty() || text.size() >= sizeof(address.sun_path)) {
    return false;
  }
  std::memcpy(address.sun_path, text.data(), text.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return false;
  }
  // A listener's backlog takes the connection at once; a socket file left by a dead daemon
  // refuses it.
  bool listening = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return listening;
}

AppendFile::AppendFile(AppendFile&& other) noexcept
    : m_fd(other.m_fd), m_path(std::move(other.m_path)), m_written(other.m_written),
      m_cut_at(other.m_cut_at), m_error(std::move(other.m_error)) {
  other.m_fd = -1;
}

AppendFile& AppendFile::operator=(AppendFile&& other) noexcept {
  if (this != &other) {
    close();
    m_fd = other.m_fd;
    m_path = std::move(other.m_path);
    m_written = other.m_written;
    m_cut_at = other.m_cut_at;
    m_error = std::move(other.m_error);
    other.m_fd = -1;
  }
  return *this;
}

AppendFile::~AppendFile() {
  close();
}

void AppendFile::close() {
  if (m_fd >= 0) {
    ::close(m_fd);
    m_fd = -1;
  }
}

tl::expected<void, std::string> AppendFile::open(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return tl::unexpected(failure("cannot open", path, errno));
  }
  close();
  m_fd = fd;
  m_path = path;
  m_written = 0;
  m_cut_at = 0;
  m_error.clear();
  return {};
}

bool AppendFile::write(std::string_view data) {
  if (m_fd < 0 || failed()) {
    return false;
  }
  int error = 0;
  size_t done = write_all(m_fd, data, error);
  m_written += done;
  if (done < data.size()) {
    m_cut_at = m_written;
    m_error = failure("cannot write", m_path, error);
    return false;
  }
  return true;
}

bool AppendFile::write_after_cut(std::string_view data) {
  if (m_fd < 0) {
    return false;
  }
  int error = 0;
  size_t done = write_all(m_fd, data, error);
  m_written += done;
  return done == data.size();
}

Headroom::Headroom(Headroom&& other) noexcept : m_path(std::move(other.m_path)) {
  other.m_path.clear();
}

Headroom& Headroom::operator=(Headroom&& other) noexcept {
  if (this != &other) {
    release();
    m_path = std::move(other.m_path);
    other.m_path.clear();
  }
  return *this;
}

Headroom::~Headroom() {
  release();
}

tl::expected<Headroom, std::string> Headroom::reserve(const std::filesystem::path& path,
                                                      uint64_t bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return tl::unexpected(failure("cannot reserve room at", path, errno));
  }
  int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  ::close(fd);
  if (rc != 0) {
    ::unlink(path.c_str());
    return tl::unexpected("cannot reserve " + std::to_string(bytes / 1024) + " KiB at " +
                          path.string() + ": " + std::strerror(rc));
  }
  Headroom room;
  room.m_path = path;
  return room;
}

bool Headroom::release() {
  if (m_path.empty()) {
    return false;
  }
  bool released = ::unlink(m_path.c_str()) == 0;
  m_path.clear();
  return released;
}

} // namespace kiln
