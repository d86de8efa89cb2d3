#include "util/http_post.h"

#include <cerrno>
#include <cstring>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

/// Wait until `fd` is ready for `events` or the deadline passes; false on the deadline.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return false;
    }
    pollfd one{fd, events, 0};
    int ready = ::poll(&one, 1, static_cast<int>(left.count()));
    if (ready > 0) {
      return true;
    }
    if (ready < 0 && errno != EINTR) {
      return false;
    }
  }
}

class Socket {
public:
  explicit Socket(int fd) : m_fd(fd) {}
  ~Socket() {
    if (m_fd >= 0) {
      ::close(m_fd);
    }
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return m_fd; }

private:
  int m_fd;
};

} // namespace

tl::expected<int, std::string> http_post(std::string_view url, std::string_view content_type,
                                         std::string_view body, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  constexpr std::string_view k_scheme = "http://";
  if (!url.starts_with(k_scheme)) {
    return tl::unexpected("only http:// endpoints are supported, not " + std::string(url));
  }
  std::string_view rest = url.substr(k_scheme.size());
  size_t slash = rest.find('/');
  std::string authority(rest.substr(0, slash));
  std::string path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  std::string host = authority;
  std::string port = "80";
  if (size_t colon = authority.rfind(':'); colon != std::string::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) {
    return tl::unexpected("no host in " + std::string(url));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return tl::unexpected("cannot resolve " + host + ": " + ::gai_strerror(rc));
  }
  std::string error = "no address of " + host;
  for (addrinfo* address = found; address != nullptr; address = address->ai_next) {
    Socket socket(::socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                           address->ai_protocol));
    if (socket.fd() < 0) {
      error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    if (::connect(socket.fd(), address->ai_addr, address->ai_addrlen) != 0 &&
        errno != EINPROGRESS) {
      error = "connect to " + authority + ": " + std::strerror(errno);
      continue;
    }
    int connect_error = 0;
    socklen_t size = sizeof connect_error;
    if (!wait_ready(socket.fd(), POLLOUT, deadline) ||
        ::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &connect_error, &size) != 0 ||
        connect_error != 0) {
      error = "connect to " + authority + ": " +
              (connect_error != 0 ? std::strerror(connect_error) : "timed out");
      continue;
    }
    ::freeaddrinfo(found);
    found = nullptr;
    std::string request = "POST " + path + " HTTP/1.1\r\nHost: " + authority +
                          "\r\nContent-Type: " + std::string(content_type) +
                          "\r\nContent-Length: " + std::to_string(body.size()) +
                          "\r\nConnection: close\r\n\r\n" + std::string(body);
    for (size_t sent = 0; sent < request.size();) {
      if (!wait_ready(socket.fd(), POLLOUT, deadline)) {
        return tl::unexpected("sending to " + authority + " timed out");
      }
      ssize_t n = ::send(socket.fd(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        return tl::unexpected("sending to " + authority + ": " + std::strerror(errno));
      }
      sent += n > 0 ? static_cast<size_t>(n) : 0;
    }
    // The status line is all that is read: `HTTP/1.1 200 OK`.
    std::string reply;
    while (reply.find("\r\n") == std::string::npos && reply.size() < 4096) {
      if (!wait_ready(socket.fd(), POLLIN, deadline)) {
        return tl::unexpected("no answer from " + authority + " in time");
      }
      char buffer[1024];
      ssize_t n = ::recv(socket.fd(), buffer, sizeof buffer, 0);
      if (n == 0) {
        break;
      }
      if (n < 0 && errno != EAGAIN && errno != EINTR) {
        return tl::unexpected("reading from " + authority + ": " + std::strerror(errno));
      }
      reply.append(buffer, n > 0 ? static_cast<size_t>(n) : 0);
    }
    if (!reply.starts_with("HTTP/1.") || reply.size() < 12) {
      return tl::unexpected(authority + " did not answer in HTTP");
    }
    try {
      return std::stoi(reply.substr(9, 3));
    } catch (const std::exception&) {
      return tl::unexpected(authority + " answered without a status code");
    }
  }
  if (found != nullptr) {
    ::freeaddrinfo(found);
  }
  return tl::unexpected(error);
}

} // namespace kiln
