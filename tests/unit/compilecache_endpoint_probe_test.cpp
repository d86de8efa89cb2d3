// kiln-cc's endpoint probe against real loopback sockets: listeners that accept, ports that
// refuse, and listeners whose full backlog leaves a connection hanging the way a blackholed
// address does. Nothing here sends a packet beyond loopback.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "compilecache/endpoint_probe.h"

namespace kiln::cc {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class Socket {
public:
  explicit Socket(int fd) : m_fd(fd) {}
  ~Socket() {
    if (m_fd >= 0) {
      ::close(m_fd);
    }
  }
  Socket(Socket&& other) noexcept : m_fd(other.m_fd) { other.m_fd = -1; }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return m_fd; }

private:
  int m_fd;
};

sockaddr_storage loopback(int family, const char* host, int port, socklen_t& length) {
  sockaddr_storage storage{};
  if (family == AF_INET6) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET6, host, &v6->sin6_addr);
    length = sizeof(sockaddr_in6);
  } else {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, host, &v4->sin_addr);
    length = sizeof(sockaddr_in);
  }
  return storage;
}

/// A socket listening on host:port (port 0: any free one) with room for `backlog` unaccepted
/// connections. Nothing ever accepts.
class Listener {
public:
  Listener(int family, const char* host, int port = 0, int backlog = 16)
      : m_socket(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0)), m_host(host), m_family(family) {
    int one = 1;
    ::setsockopt(m_socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t length = 0;
    sockaddr_storage address = loopback(family, host, port, length);
    m_ok = ::bind(m_socket.fd(), reinterpret_cast<sockaddr*>(&address), length) == 0 &&
           ::listen(m_socket.fd(), backlog) == 0;
    ::getsockname(m_socket.fd(), reinterpret_cast<sockaddr*>(&address), &length);
    m_port = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                                      : reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  }
  bool ok() const { return m_ok; }
  int port() const { return m_port; }

  /// Fill the accept queue until a new connection gets no answer: from then on every connect
  /// to this listener hangs, like one to an address that drops packets.
  bool fill_backlog() {
    for (int i = 0; i < 64; ++i) {
      Socket client(::socket(m_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      socklen_t length = 0;
      sockaddr_storage address = loopback(m_family, m_host, m_port, length);
      ::connect(client.fd(), reinterpret_cast<sockaddr*>(&address), length);
      pollfd waiting{client.fd(), POLLOUT, 0};
      bool answered = ::poll(&waiting, 1, 300) == 1;
      m_clients.push_back(std::move(client));
      if (!answered) {
        return true;
      }
    }
    return false;
  }

private:
  Socket m_socket;
  const char* m_host;
  int m_family;
  int m_port = 0;
  bool m_ok = false;
  std::vector<Socket> m_clients;
};

/// A port on `host` that nothing listens on: bound, to keep it ours, but never listening.
class ClosedPort {
public:
  explicit ClosedPort(const char* host = "127.0.0.1")
      : m_socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    socklen_t length = 0;
    sockaddr_storage address = loopback(AF_INET, host, 0, length);
    ::bind(m_socket.fd(), reinterpret_cast<sockaddr*>(&address), length);
    ::getsockname(m_socket.fd(), reinterpret_cast<sockaddr*>(&address), &length);
    m_port = ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  }
  int port() const { return m_port; }

private:
  Socket m_socket;
  int m_port = 0;
};

bool ipv6_loopback_available() {
  Listener listener(AF_INET6, "::1");
  return listener.ok();
}

class TempHostsFile {
public:
  explicit TempHostsFile(const std::string& content) {
    m_path = std::filesystem::temp_directory_path() /
             ("kiln-cc-hosts-" + std::to_string(::getpid()) + "-" +
              std::to_string(Clock::now().time_since_epoch().count()));
    std::ofstream(m_path) << content;
  }
  ~TempHostsFile() { std::filesystem::remove(m_path); }
  const std::filesystem::path& path() const { return m_path; }

private:
  std::filesystem::path m_path;
};

Endpoint endpoint(const std::string& url) {
  auto parsed = parse_endpoint(url, "http");
  EXPECT_TRUE(parsed.has_value()) << url;
  return parsed.value_or(Endpoint{});
}

/// A resolver that must not be reached: every test name is in its own hosts file.
Resolution no_resolver(const std::string& host, int) {
  ADD_FAILURE() << "resolver asked for " << host;
  return {{}, "no resolver"};
}

ProbeOptions options_with(std::chrono::milliseconds budget,
                          const std::filesystem::path& hosts = "/dev/null") {
  ProbeOptions options;
  options.budget = budget;
  options.hosts_file = hosts;
  options.resolver = no_resolver;
  return options;
}

TEST(EndpointParse, DefaultsThePortBySchemeAndDropsUserAndPath) {
  auto e = parse_endpoint("http://192.168.1.10:5000/sccache/", "http");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->scheme, "http");
  EXPECT_EQ(e->host, "192.168.1.10");
  EXPECT_EQ(e->port, 5000);
  EXPECT_EQ(parse_endpoint("https://cache.example", "http")->port, 443);
  EXPECT_EQ(parse_endpoint("redis://user:secret@redis.lan/0", "redis")->host, "redis.lan");
  EXPECT_EQ(parse_endpoint("redis://user:secret@redis.lan/0", "redis")->port, 6379);
  EXPECT_EQ(parse_endpoint("tcp://memcached.lan", "tcp")->port, 11211);
  auto bare = parse_endpoint("s3.lan:3900", "https");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->scheme, "https");
  EXPECT_EQ(bare->host, "s3.lan");
  EXPECT_EQ(bare->port, 3900);
  EXPECT_EQ(parse_endpoint("  HTTP://Cache.Lan  ", "http")->scheme, "http");
}

TEST(EndpointParse, TakesBracketedIpv6Literals) {
  auto e = parse_endpoint("http://[::1]:8080/x", "http");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 8080);
  EXPECT_EQ(parse_endpoint("http://[fe80::1]", "http")->port, 80);
}

TEST(EndpointParse, RefusesWhatIsNoUrl) {
  EXPECT_FALSE(parse_endpoint("", "http"));
  EXPECT_FALSE(parse_endpoint("http://", "http"));
  EXPECT_FALSE(parse_endpoint("http://host:port", "http"));
  EXPECT_FALSE(parse_endpoint("http://host:70000", "http"));
  EXPECT_FALSE(parse_endpoint("ftp://host", "http")) << "no default port for ftp";
  EXPECT_FALSE(parse_endpoint("http://[::1", "http"));
}

TEST(EndpointParse, RedactsPasswordsOnly) {
  EXPECT_EQ(redact_url("redis://user:secret@redis.lan:6379/0"),
            "redis://user:***@redis.lan:6379/0");
  EXPECT_EQ(redact_url("redis://:secret@redis.lan"), "redis://:***@redis.lan");
  EXPECT_EQ(redact_url("http://user@host/a:b@c"), "http://user@host/a:b@c");
  EXPECT_EQ(redact_url("http://host:5000/"), "http://host:5000/");
}

TEST(EndpointResolve, ReadsNumericAddressesAndTheHostsFile) {
  TempHostsFile hosts("# comment\n"
                      "127.0.0.2   Cache.Test alias.test  # trailing\n"
                      "::1         cache.test\n"
                      "127.0.0.3   other.test\n");
  auto found = resolve_locally("cache.test", 80, hosts.path());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].text, "127.0.0.2:80");
  EXPECT_EQ(found[1].text, "[::1]:80");
  EXPECT_EQ(resolve_locally("ALIAS.test", 81, hosts.path()).at(0).text, "127.0.0.2:81");
  EXPECT_TRUE(resolve_locally("missing.test", 80, hosts.path()).empty());
  EXPECT_EQ(resolve_locally("10.1.2.3", 5000, hosts.path()).at(0).text, "10.1.2.3:5000");
  EXPECT_EQ(resolve_locally("::1", 5000, hosts.path()).at(0).text, "[::1]:5000");
}

TEST(EndpointResolve, GetaddrinfoAnswersFromTheSystemHostsFile) {
  // localhost is in every /etc/hosts: this asks no DNS server.
  Resolution resolution = resolve_with_getaddrinfo("localhost", 5000);
  EXPECT_TRUE(resolution.error.empty()) << resolution.error;
  ASSERT_FALSE(resolution.addresses.empty());
}

TEST(EndpointProbe, AListeningLoopbackPortIsReachable) {
  Listener listener(AF_INET, "127.0.0.1");
  ASSERT_TRUE(listener.ok());
  ProbeResult result = probe_endpoints(
      {endpoint("http://127.0.0.1:" + std::to_string(listener.port()) + "/")}, options_with(2s));
  EXPECT_TRUE(result.reachable) << result.detail;
  EXPECT_EQ(result.detail.rfind("TCP 127.0.0.1:" + std::to_string(listener.port()) + " in ", 0), 0u)
      << result.detail;
}

TEST(EndpointProbe, AListeningIpv6LoopbackPortIsReachable) {
  if (!ipv6_loopback_available()) {
    GTEST_SKIP() << "no IPv6 loopback here";
  }
  Listener listener(AF_INET6, "::1");
  ProbeResult result = probe_endpoints(
      {endpoint("http://[::1]:" + std::to_string(listener.port()))}, options_with(2s));
  EXPECT_TRUE(result.reachable) << result.detail;
}

TEST(EndpointProbe, AClosedPortIsRefusedWithoutWaitingForTheBudget) {
  ClosedPort closed;
  ProbeResult result = probe_endpoints(
      {endpoint("http://127.0.0.1:" + std::to_string(closed.port()))}, options_with(2s));
  EXPECT_FALSE(result.reachable);
  EXPECT_NE(result.detail.find("TCP 127.0.0.1:" + std::to_string(closed.port()) + " refused"),
            std::string::npos)
      << result.detail;
  // Refused, not timed out: the detail would say "no connection within" had it waited.
  EXPECT_EQ(result.detail.find("no connection within"), std::string::npos) << result.detail;
}

TEST(EndpointProbe, AListenerThatAnswersNothingCostsTheBudgetAndNoMore) {
  Listener listener(AF_INET, "127.0.0.1", 0, 0);
  ASSERT_TRUE(listener.ok());
  ASSERT_TRUE(listener.fill_backlog()) << "the accept queue never filled";
  auto start = Clock::now();
  ProbeResult result = probe_endpoints(
      {endpoint("http://127.0.0.1:" + std::to_string(listener.port()))}, options_with(400ms));
  auto took = Clock::now() - start;
  EXPECT_FALSE(result.reachable);
  EXPECT_NE(result.detail.find("no answer; no connection within 400 ms"), std::string::npos)
      << result.detail;
  EXPECT_GE(took, 390ms);
}

TEST(EndpointProbe, EveryAddressAtOnceSoAHangingFirstAddressLosesNothing) {
  // The dual-stack case: the name's first address never answers, the second does at once.
  // One address at a time would spend the whole budget on the first and drop the host.
  Listener good(AF_INET, "127.0.0.1");
  ASSERT_TRUE(good.ok());
  Listener hanging(AF_INET, "127.0.0.2", good.port(), 0);
  if (!hanging.ok()) {
    GTEST_SKIP() << "cannot bind 127.0.0.2 here";
  }
  ASSERT_TRUE(hanging.fill_backlog());
  TempHostsFile hosts("127.0.0.2 dual.test\n127.0.0.1 dual.test\n");
  ProbeResult result =
      probe_endpoints({endpoint("http://dual.test:" + std::to_string(good.port()))},
                      options_with(2000ms, hosts.path()));
  // One address at a time would have spent the budget on the hanging one and found none.
  EXPECT_TRUE(result.reachable) << result.detail;
  EXPECT_EQ(result.detail.rfind("TCP 127.0.0.1:", 0), 0u) << result.detail;
}

TEST(EndpointProbe, EveryEndpointAtOnceToo) {
  ClosedPort closed;
  Listener good(AF_INET, "127.0.0.1");
  ProbeResult result =
      probe_endpoints({endpoint("redis://127.0.0.1:" + std::to_string(closed.port())),
                       endpoint("redis://127.0.0.1:" + std::to_string(good.port()))},
                      options_with(2s));
  EXPECT_TRUE(result.reachable) << result.detail;
}

TEST(EndpointProbe, ASlowResolverCannotStretchTheBudget) {
  ProbeOptions options = options_with(300ms);
  auto resolved = std::make_shared<std::atomic<bool>>(false);
  options.resolver = [resolved](const std::string&, int) {
    std::this_thread::sleep_for(1500ms);
    *resolved = true;
    return Resolution{};
  };
  ProbeResult result = probe_endpoints({endpoint("http://slow.test:5000")}, options);
  // The order, not a time: the probe answered while the resolver was still resolving.
  EXPECT_FALSE(*resolved);
  EXPECT_FALSE(result.reachable);
  EXPECT_NE(
      result.detail.find("slow.test: name resolution unfinished; no connection within 300 ms"),
      std::string::npos)
      << result.detail;
}

TEST(EndpointProbe, ResolutionAndConnectionShareOneBudget) {
  Listener listener(AF_INET, "127.0.0.1", 0, 0);
  ASSERT_TRUE(listener.fill_backlog());
  ProbeOptions options = options_with(500ms);
  int port = listener.port();
  // Set once a whole budget has passed since the resolver answered: a connection that got a
  // budget of its own after resolving would still be waiting then.
  auto own_budget_spent = std::make_shared<std::atomic<bool>>(false);
  options.resolver = [own_budget_spent](const std::string&, int p) {
    std::this_thread::sleep_for(300ms);
    std::thread([own_budget_spent] {
      std::this_thread::sleep_for(500ms);
      *own_budget_spent = true;
    }).detach();
    return Resolution{resolve_locally("127.0.0.1", p, "/dev/null"), ""};
  };
  auto start = Clock::now();
  ProbeResult result =
      probe_endpoints({endpoint("http://late.test:" + std::to_string(port))}, options);
  auto took = Clock::now() - start;
  EXPECT_FALSE(result.reachable) << result.detail;
  EXPECT_GE(took, 480ms);
  EXPECT_FALSE(*own_budget_spent) << "the connection got a budget of its own after resolving";
}

TEST(EndpointProbe, AResolvedNameIsConnectedTo) {
  Listener listener(AF_INET, "127.0.0.1");
  ProbeOptions options = options_with(2s);
  options.resolver = [](const std::string&, int port) {
    std::this_thread::sleep_for(50ms);
    return Resolution{resolve_locally("127.0.0.1", port, "/dev/null"), ""};
  };
  ProbeResult result =
      probe_endpoints({endpoint("http://named.test:" + std::to_string(listener.port()))}, options);
  EXPECT_TRUE(result.reachable) << result.detail;
}

TEST(EndpointProbe, AFailedResolutionSaysWhy) {
  ProbeOptions options = options_with(2s);
  options.resolver = [](const std::string& host, int) {
    return Resolution{{}, host + ": could not resolve (Name or service not known)"};
  };
  ProbeResult result = probe_endpoints({endpoint("http://nowhere.test")}, options);
  EXPECT_FALSE(result.reachable);
  EXPECT_EQ(result.detail, "nowhere.test: could not resolve (Name or service not known)");
}

} // namespace
} // namespace kiln::cc
