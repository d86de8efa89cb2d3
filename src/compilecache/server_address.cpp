#include "compilecache/server_address.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/un.h>
#include <unistd.h>

namespace kiln::cc {

namespace {

constexpr int k_default_sccache_port = 4226;

// A loopback connect is answered or refused at once; it waits only when the server's accept
// queue is full, and then the kernel retries after a second. Two seconds lets one retry through
// before giving up on a server that busy.
constexpr int k_probe_timeout_ms = 2000;

// sccache writes abstract socket names escaped the way Rust's ascii::escape_default does.
std::string unescape_ascii(std::string_view s) {
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c - 'A' + 10;
  };
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    char c = s[++i];
    if (c == 'x' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else {
      out.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c);
    }
  }
  return out;
}

} // namespace

ServerAddress sccache_server_address(const char* uds, const char* port_text) {
  ServerAddress address;
  if (uds != nullptr && *uds != '\0') {
    std::string_view value(uds);
    auto* un = reinterpret_cast<sockaddr_un*>(&address.storage);
    un->sun_family = AF_UNIX;
    std::string path;
    std::size_t offset = 0;
    if (value.starts_with("\\x00")) {
      path = unescape_ascii(value.substr(4));
      offset = 1; // sun_path[0] stays NUL: the abstract namespace
      address.text = "unix:@" + path;
    } else {
      path = value;
      address.text = "unix:" + path;
    }
    std::size_t n = std::min(path.size(), sizeof(un->sun_path) - 1 - offset);
    std::memcpy(un->sun_path + offset, path.data(), n);
    address.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + offset + n +
                                            (offset == 0 ? 1 : 0));
    return address;
  }
  int port = k_default_sccache_port;
  if (port_text != nullptr) {
    // sccache parses it as a u16 and falls back to the default on anything else.
    char* end = nullptr;
    errno = 0;
    long value = std::strtol(port_text, &end, 10);
    if (errno == 0 && end != port_text && *end == '\0' && value >= 0 && value <= 65535 &&
        std::isdigit(static_cast<unsigned char>(*port_text))) {
      port = static_cast<int>(value);
    }
  }
  auto* in = reinterpret_cast<sockaddr_in*>(&address.storage);
  in->sin_family = AF_INET;
  in->sin_port = htons(static_cast<std::uint16_t>(port));
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.length = sizeof(sockaddr_in);
  address.text = "127.0.0.1:" + std::to_string(port);
  return address;
}

bool server_answers(const ServerAddress& address) {
  int fd = ::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return false;
  }
  bool answers = false;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address.storage), address.length) == 0) {
    answers = true;
  } else if (errno == EAGAIN && address.storage.ss_family == AF_UNIX) {
    answers = true; // a unix socket's backlog is full: the server is there, only busy
  } else if (errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int error = 0;
    socklen_t error_length = sizeof(error);
    answers = ::poll(&p, 1, k_probe_timeout_ms) == 1 &&
              ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &error_length) == 0 && error == 0;
  }
  if (answers) {
    // Closed with a reset, not a FIN: a clean close leaves this end in TIME_WAIT for a minute,
    // one per compile, and a container's teardown waits for every TIME_WAIT to expire (measured
    // on the Windows lane: 120 s after each RUN that talked to a server over loopback).
    linger reset{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  }
  ::close(fd);
  return answers;
}

} // namespace kiln::cc
