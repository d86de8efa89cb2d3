#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/socket.h>

namespace kiln::cc {

/// The host and port a cache level's URL names: all a TCP connection needs.
struct Endpoint {
  std::string scheme; // lower case
  std::string host;   // an IPv6 literal without its brackets
  int port = 0;
};

/// `scheme://[user[:password]@]host[:port][/path]`. A URL without a scheme takes
/// `default_scheme` (S3 endpoints are often a bare host name). The port defaults by scheme
/// (http 80, https 443, redis and rediss 6379, tcp 11211); nullopt when there is no host, the
/// port is not a number, or the scheme has no known default.
std::optional<Endpoint> parse_endpoint(std::string_view url, std::string_view default_scheme);

/// `url` without the password of its user part: messages and logs must not carry a
/// credential that a Redis URL, for one, embeds.
std::string redact_url(std::string_view url);

struct ResolvedAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  std::string text; // 127.0.0.1:5000, [::1]:5000
};

struct Resolution {
  std::vector<ResolvedAddress> addresses;
  std::string error; // why there are none
};

/// Resolves a host name that is neither a numeric address nor in the hosts file. It may block
/// for as long as the system resolver takes; the probe runs it on a thread of its own.
using NameResolver = std::function<Resolution(const std::string& host, int port)>;

/// getaddrinfo(3). In a statically linked glibc binary it still reads /etc/hosts and asks the
/// DNS servers of /etc/resolv.conf itself, but any other source that nsswitch.conf names needs
/// the shared libraries of the very glibc kiln-cc was linked with; the error says so.
Resolution resolve_with_getaddrinfo(const std::string& host, int port);

/// Numeric addresses, and the addresses `hosts_file` lists for `host` (case-insensitive), in
/// file order; empty when neither answers. Needs no resolver library at all.
std::vector<ResolvedAddress> resolve_locally(const std::string& host, int port,
                                             const std::filesystem::path& hosts_file);

struct ProbeOptions {
  /// Shared by resolution and every connection attempt.
  std::chrono::milliseconds budget{2000};
  std::filesystem::path hosts_file = "/etc/hosts";
  NameResolver resolver = resolve_with_getaddrinfo;
};

struct ProbeResult {
  bool reachable = false;
  /// "TCP 127.0.0.1:5000 in 3 ms", or every address and name that failed, and how.
  std::string detail;
  std::chrono::milliseconds elapsed{0};
};

/// Resolve every endpoint's host and connect to every resolved address at once; the first
/// connection that succeeds counts. One address at a time would drop a reachable host: a
/// dual-stack name resolves to a closed IPv6 address first, which some stacks take about 2 s to
/// refuse, and a blackholed address never answers at all.
ProbeResult probe_endpoints(const std::vector<Endpoint>& endpoints, const ProbeOptions& options);

} // namespace kiln::cc
