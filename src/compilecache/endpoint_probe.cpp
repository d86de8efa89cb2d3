#include "compilecache/endpoint_probe.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include "util/fd.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kiln::cc {

namespace {

using Clock = std::chrono::steady_clock;

int default_port(std::string_view scheme) {
  static const std::pair<std::string_view, int> k_ports[] = {
      {"http", 80}, {"https", 443}, {"redis", 6379}, {"rediss", 6379}, {"tcp", 11211}};
  for (const auto& [name, port] : k_ports) {
    if (name == scheme) {
      return port;
    }
  }
  return 0;
}

std::string address_text(const sockaddr* address) {
  char host[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(v6->sin6_port));
  }
  const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
  ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
  return std::string(host) + ":" + std::to_string(ntohs(v4->sin_port));
}

std::vector<ResolvedAddress> from_addrinfo(const addrinfo* list) {
  std::vector<ResolvedAddress> out;
  for (const addrinfo* entry = list; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_family != AF_INET && entry->ai_family != AF_INET6) {
      continue;
    }
    ResolvedAddress address;
    std::memcpy(&address.storage, entry->ai_addr, entry->ai_addrlen);
    address.length = entry->ai_addrlen;
    address.text = address_text(entry->ai_addr);
    bool seen = std::any_of(out.begin(), out.end(),
                            [&](const ResolvedAddress& a) { return a.text == address.text; });
    if (!seen) {
      out.push_back(std::move(address));
    }
  }
  return out;
}

/// A literal address only: AI_NUMERICHOST never consults NSS, so this works in any image.
std::vector<ResolvedAddress> numeric_address(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* list = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list) != 0) {
    return {};
  }
  std::vector<ResolvedAddress> out = from_addrinfo(list);
  ::freeaddrinfo(list);
  return out;
}

std::string describe_connect_error(int error) {
  switch (error) {
  case ECONNREFUSED:
    return "refused";
  case ETIMEDOUT:
    return "timed out";
  case ENETUNREACH:
    return "network unreachable";
  case EHOSTUNREACH:
    return "host unreachable";
  default:
    return std::strerror(error);
  }
}

/// Close a connection that got through with a reset rather than a FIN: the side that closes
/// first keeps a TIME_WAIT, and on some stacks a TIME_WAIT holds a container's teardown for
/// minutes. The probe has nothing to say to the server anyway.
void close_with_reset(Fd& fd) {
  linger option{1, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &option, sizeof option);
  fd.reset();
}

/// Where resolver threads leave their answers. Shared with them, so a thread still blocked in
/// the resolver after the probe gave up finds it (and its pipe) intact.
struct Mailbox {
  std::mutex mutex;
  std::vector<std::pair<size_t, Resolution>> answers; // name index, answer
  int wake_read = -1;
  int wake_write = -1;

  Mailbox() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
      wake_read = fds[0];
      wake_write = fds[1];
    }
  }
  ~Mailbox() {
    if (wake_read >= 0) {
      ::close(wake_read);
      ::close(wake_write);
    }
  }
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;
};

struct Attempt {
  Fd fd;
  std::string text;
};

struct Name {
  std::string host;
  bool answered = false;
};

} // namespace

std::optional<Endpoint> parse_endpoint(std::string_view url, std::string_view default_scheme) {
  url = trim(url);
  Endpoint endpoint;
  std::string_view rest = url;
  if (auto pos = url.find("://"); pos != std::string_view::npos) {
    endpoint.scheme = lower(url.substr(0, pos));
    rest = url.substr(pos + 3);
  } else {
    endpoint.scheme = lower(default_scheme);
  }
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = authority.rfind('@'); at != std::string_view::npos) {
    authority.remove_prefix(at + 1);
  }
  std::string_view port_text;
  if (authority.starts_with('[')) {
    auto close = authority.find(']');
    if (close == std::string_view::npos) {
      return std::nullopt;
    }
    endpoint.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return std::nullopt;
      }
      port_text = after.substr(1);
    }
  } else if (std::count(authority.begin(), authority.end(), ':') == 1) {
    auto colon = authority.find(':');
    endpoint.host = std::string(authority.substr(0, colon));
    port_text = authority.substr(colon + 1);
  } else {
    // No colon, or a bare IPv6 literal, which can carry no port without brackets.
    endpoint.host = std::string(authority);
  }
  if (endpoint.host.empty()) {
    return std::nullopt;
  }
  if (port_text.empty()) {
    endpoint.port = default_port(endpoint.scheme);
  } else {
    int port = 0;
    for (char c : port_text) {
      if (!std::isdigit(static_cast<unsigned char>(c)) || port > 65535) {
        return std::nullopt;
      }
      port = port * 10 + (c - '0');
    }
    endpoint.port = port;
  }
  if (endpoint.port <= 0 || endpoint.port > 65535) {
    return std::nullopt;
  }
  return endpoint;
}

std::string redact_url(std::string_view url) {
  auto scheme_end = url.find("://");
  size_t start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  size_t end = url.find_first_of("/?#", start);
  std::string_view authority =
      url.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
  auto at = authority.rfind('@');
  if (at == std::string_view::npos) {
    return std::string(url);
  }
  std::string_view user = authority.substr(0, at);
  auto colon = user.find(':');
  if (colon == std::string_view::npos) {
    return std::string(url);
  }
  std::string out(url.substr(0, start));
  out += user.substr(0, colon);
  out += ":***";
  out += url.substr(start + at);
  return out;
}

Resolution resolve_with_getaddrinfo(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  Resolution resolution;
  if (rc != 0) {
    int saved_errno = errno;
    resolution.error = host + ": could not resolve (" + ::gai_strerror(rc);
    if (rc == EAI_SYSTEM) {
      resolution.error += ": " + std::string(std::strerror(saved_errno));
    }
    resolution.error += "; kiln-cc is linked statically: beyond numeric addresses and "
                        "/etc/hosts it asks only the DNS servers of /etc/resolv.conf)";
    return resolution;
  }
  resolution.addresses = from_addrinfo(list);
  ::freeaddrinfo(list);
  if (resolution.addresses.empty()) {
    resolution.error = host + ": no IPv4 or IPv6 address";
  }
  return resolution;
}

std::vector<ResolvedAddress> resolve_locally(const std::string& host, int port,
                                             const std::filesystem::path& hosts_file) {
  std::vector<ResolvedAddress> out = numeric_address(host, port);
  if (!out.empty()) {
    return out;
  }
  std::string wanted = lower(host);
  // read_file, not a stream: it takes only a regular file, so a hosts file that is a FIFO or a
  // device cannot hang or flood the probe.
  for (std::string line : split(read_file(hosts_file).value_or(""), '\n')) {
    line = line.substr(0, line.find('#'));
    std::replace(line.begin(), line.end(), '\t', ' ');
    std::vector<std::string> fields = split(line, ' ');
    std::erase(fields, "");
    for (size_t i = 1; i < fields.size(); ++i) {
      if (lower(fields[i]) != wanted) {
        continue;
      }
      for (ResolvedAddress& found : numeric_address(fields[0], port)) {
        bool seen = std::any_of(out.begin(), out.end(),
                                [&](const ResolvedAddress& a) { return a.text == found.text; });
        if (!seen) {
          out.push_back(std::move(found));
        }
      }
      break;
    }
  }
  return out;
}

ProbeResult probe_endpoints(const std::vector<Endpoint>& endpoints, const ProbeOptions& options) {
  const auto start = Clock::now();
  const auto deadline = start + options.budget;
  auto mailbox = std::make_shared<Mailbox>();
  std::vector<Attempt> pending;
  std::vector<std::string> failures;
  std::vector<Name> names;
  size_t names_outstanding = 0;
  std::optional<std::string> connected;

  auto connect_to = [&](const ResolvedAddress& address) {
    if (connected) {
      return;
    }
    Fd fd(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
      failures.push_back("TCP " + address.text + " " + std::strerror(errno));
      return;
    }
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) ==
        0) {
      connected = address.text;
      close_with_reset(fd);
      return;
    }
    if (errno == EINPROGRESS) {
      pending.push_back({std::move(fd), address.text});
      return;
    }
    failures.push_back("TCP " + address.text + " " + describe_connect_error(errno));
  };

  for (const Endpoint& endpoint : endpoints) {
    std::vector<ResolvedAddress> local =
        resolve_locally(endpoint.host, endpoint.port, options.hosts_file);
    if (!local.empty()) {
      for (const ResolvedAddress& address : local) {
        connect_to(address);
      }
      continue;
    }
    size_t index = names.size();
    names.push_back({endpoint.host});
    ++names_outstanding;
    std::thread([mailbox, resolver = options.resolver, index, host = endpoint.host,
                 port = endpoint.port] {
      Resolution resolution = resolver(host, port);
      std::lock_guard<std::mutex> lock(mailbox->mutex);
      mailbox->answers.emplace_back(index, std::move(resolution));
      [[maybe_unused]] auto n = ::write(mailbox->wake_write, "x", 1);
    }).detach();
  }

  bool out_of_time = false;
  while (!connected && (!pending.empty() || names_outstanding > 0)) {
    auto remaining = deadline - Clock::now();
    if (remaining <= Clock::duration::zero()) {
      out_of_time = true;
      break;
    }
    std::vector<pollfd> fds;
    for (const Attempt& attempt : pending) {
      fds.push_back({attempt.fd.get(), POLLOUT, 0});
    }
    if (names_outstanding > 0) {
      fds.push_back({mailbox->wake_read, POLLIN, 0});
    }
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(remaining);
    int ready = ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
    if (ready <= 0) {
      continue; // EINTR, or the deadline: the loop head decides
    }
    // Sockets first: fds holds only the attempts polled, and an answer below adds more.
    const size_t polled = pending.size();
    std::vector<Attempt> still_pending;
    for (size_t i = 0; i < polled; ++i) {
      if (fds[i].revents == 0) {
        still_pending.push_back(std::move(pending[i]));
        continue;
      }
      int error = 0;
      socklen_t length = sizeof error;
      ::getsockopt(pending[i].fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
      if (error == 0 && !connected) {
        connected = pending[i].text;
        close_with_reset(pending[i].fd);
      } else if (error != 0) {
        failures.push_back("TCP " + pending[i].text + " " + describe_connect_error(error));
      }
    }
    pending = std::move(still_pending);
    if (names_outstanding > 0 && fds[polled].revents != 0) {
      char drain[64];
      while (::read(mailbox->wake_read, drain, sizeof drain) > 0) {
      }
      std::vector<std::pair<size_t, Resolution>> answers;
      {
        std::lock_guard<std::mutex> lock(mailbox->mutex);
        answers.swap(mailbox->answers);
      }
      for (auto& [index, resolution] : answers) {
        names[index].answered = true;
        --names_outstanding;
        if (!resolution.error.empty()) {
          failures.push_back(resolution.error);
        }
        for (const ResolvedAddress& address : resolution.addresses) {
          connect_to(address);
        }
      }
    }
  }

  ProbeResult result;
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  if (connected) {
    result.reachable = true;
    result.detail = "TCP " + *connected + " in " + std::to_string(result.elapsed.count()) + " ms";
    return result;
  }
  std::vector<std::string> parts = failures;
  for (const Attempt& attempt : pending) {
    parts.push_back("TCP " + attempt.text + " no answer");
  }
  for (const Name& name : names) {
    if (!name.answered) {
      parts.push_back(name.host + ": name resolution unfinished");
    }
  }
  if (parts.empty()) {
    parts.push_back("no address to connect to");
  }
  std::string detail;
  for (size_t i = 0; i < parts.size(); ++i) {
    detail += (i == 0 ? "" : ", ") + parts[i];
  }
  if (out_of_time) {
    detail += "; no connection within " + std::to_string(options.budget.count()) + " ms";
  }
  result.detail = detail;
  return result;
}

} // namespace kiln::cc
