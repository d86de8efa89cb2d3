#include "gates/image_env.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>

#include "util/pattern.h"

namespace kiln {
namespace {

// Names that point sccache at a remote store or carry cloud credentials. A trailing `*` makes
// a prefix; the rest are exact, so SCCACHE_BUCKET does not also refuse SCCACHE_BUCKETS.
const std::vector<std::string> k_build_host_names = {
    "SCCACHE_WEBDAV_*",
    "SCCACHE_REDIS*",
    "SCCACHE_BUCKET",
    "SCCACHE_ENDPOINT",
    "SCCACHE_REGION",
    "SCCACHE_S3_*",
    "SCCACHE_GCS_*",
    "SCCACHE_AZURE_*",
    "SCCACHE_MEMCACHED*",
    "SCCACHE_MULTILEVEL_CHAIN",
    "SCCACHE_FORCE_LOCAL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    // The build host's proxies: BuildKit passes these as predefined ARGs precisely so that
    // they do not persist in the image.
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "FTP_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
};

constexpr std::string_view k_fix =
    "pass it to the build as an ARG or a build secret (RUN --mount=type=secret), never ENV";

char upper(char c) {
  return static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return upper(x) == upper(y); });
}

// Windows images look names up case-insensitively, and the incident was a Windows image.
bool matches_pattern(std::string_view name, std::string_view pattern) {
  if (!pattern.empty() && pattern.back() == '*') {
    auto prefix = pattern.substr(0, pattern.size() - 1);
    return name.size() >= prefix.size() && iequals(name.substr(0, prefix.size()), prefix);
  }
  return iequals(name, pattern);
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_separator(char c) {
  return c == ',' || c == ';' || std::isspace(static_cast<unsigned char>(c)) != 0;
}

// What may follow a host: a port, a path (either slash), a query or fragment, the `@SSL@port`
// of a WebDAV UNC path, a list separator, or the end.
bool ends_host(std::string_view v, std::size_t i) {
  if (i >= v.size() || is_separator(v[i])) {
    return true;
  }
  return std::string_view(":/\\?#@").find(v[i]) != std::string_view::npos;
}

struct Hit {
  std::size_t pos;
  std::string text;
};

// The address literal starting at `i` (dotted quad, or `[ipv6]`) and the index just past it,
// when it is terminated like a host; only the literal's text is returned, brackets dropped.
std::optional<std::pair<Hit, std::size_t>> literal_at(std::string_view v, std::size_t i) {
  if (i >= v.size()) {
    return std::nullopt;
  }
  if (v[i] == '[') {
    auto close = v.find(']', i);
    if (close == std::string_view::npos || !ends_host(v, close + 1)) {
      return std::nullopt;
    }
    return std::pair{Hit{i + 1, std::string(v.substr(i + 1, close - i - 1))}, close + 1};
  }
  auto end = i;
  while (end < v.size() && (is_digit(v[end]) || v[end] == '.')) {
    ++end;
  }
  // A dotted quad glued to letters or dashes is a hostname or a file name, not an address.
  if (end == i || !ends_host(v, end)) {
    return std::nullopt;
  }
  return std::pair{Hit{i, std::string(v.substr(i, end - i))}, end};
}

bool contains_version(std::string_view name) {
  constexpr std::string_view k_version = "VERSION";
  for (std::size_t i = 0; i + k_version.size() <= name.size(); ++i) {
    if (iequals(name.substr(i, k_version.size()), k_version)) {
      return true;
    }
  }
  return false;
}

std::optional<int> hex_group(std::string_view g) {
  if (g.empty() || g.size() > 4) {
    return std::nullopt;
  }
  int value = 0;
  for (char c : g) {
    int d = 0;
    if (is_digit(c)) {
      d = c - '0';
    } else if (upper(c) >= 'A' && upper(c) <= 'F') {
      d = upper(c) - 'A' + 10;
    } else {
      return std::nullopt;
    }
    value = value * 16 + d;
  }
  return value;
}

// Groups of one side of `::`; a dotted-quad tail (allowed only at the very end) adds two.
bool ipv6_groups(std::string_view part, bool v4_tail_allowed, std::vector<std::uint16_t>& out) {
  if (part.empty()) {
    return true;
  }
  std::size_t pos = 0;
  while (true) {
    auto colon = part.find(':', pos);
    auto group = part.substr(pos, colon == std::string_view::npos ? part.npos : colon - pos);
    if (colon == std::string_view::npos && v4_tail_allowed &&
        group.find('.') != std::string_view::npos) {
      auto v4 = parse_ipv4(group);
      if (!v4) {
        return false;
      }
      out.push_back(static_cast<std::uint16_t>((*v4)[0] << 8 | (*v4)[1]));
      out.push_back(static_cast<std::uint16_t>((*v4)[2] << 8 | (*v4)[3]));
      return true;
    }
    auto g = hex_group(group);
    if (!g) {
      return false;
    }
    out.push_back(static_cast<std::uint16_t>(*g));
    if (colon == std::string_view::npos) {
      return true;
    }
    pos = colon + 1;
  }
}

std::optional<std::string_view> ipv4_kind(const std::array<std::uint8_t, 4>& a) {
  if (a[0] == 10 || (a[0] == 172 && a[1] >= 16 && a[1] <= 31) || (a[0] == 192 && a[1] == 168)) {
    return "private (RFC 1918)";
  }
  if (a[0] == 169 && a[1] == 254) {
    return "link-local";
  }
  if (a[0] == 100 && (a[1] & 0xc0) == 64) {
    return "shared (RFC 6598, carrier-grade NAT)";
  }
  return std::nullopt;
}

} // namespace

std::optional<std::array<std::uint8_t, 4>> parse_ipv4(std::string_view text) {
  std::array<std::uint8_t, 4> out{};
  std::size_t pos = 0;
  for (std::size_t part = 0; part < 4; ++part) {
    auto end = pos;
    while (end < text.size() && is_digit(text[end])) {
      ++end;
    }
    auto digits = text.substr(pos, end - pos);
    if (digits.empty() || digits.size() > 3 || (digits.size() > 1 && digits[0] == '0')) {
      return std::nullopt;
    }
    int value = 0;
    for (char c : digits) {
      value = value * 10 + (c - '0');
    }
    if (value > 255) {
      return std::nullopt;
    }
    out[part] = static_cast<std::uint8_t>(value);
    if (part < 3) {
      if (end >= text.size() || text[end] != '.') {
        return std::nullopt;
      }
      pos = end + 1;
    } else if (end != text.size()) {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<std::array<std::uint16_t, 8>> parse_ipv6(std::string_view text) {
  auto gap = text.find("::");
  std::vector<std::uint16_t> head;
  std::vector<std::uint16_t> tail;
  if (gap == std::string_view::npos) {
    if (!ipv6_groups(text, true, head) || head.size() != 8) {
      return std::nullopt;
    }
  } else {
    // A second `::` (or `:::`) would make the gap's length ambiguous.
    if (text.find("::", gap + 1) != std::string_view::npos) {
      return std::nullopt;
    }
    if (!ipv6_groups(text.substr(0, gap), false, head) ||
        !ipv6_groups(text.substr(gap + 2), true, tail) || head.size() + tail.size() > 7) {
      return std::nullopt;
    }
  }
  std::array<std::uint16_t, 8> out{};
  std::copy(head.begin(), head.end(), out.begin());
  std::copy(tail.begin(), tail.end(), out.end() - static_cast<std::ptrdiff_t>(tail.size()));
  return out;
}

std::optional<std::string_view> refused_address_kind(std::string_view address) {
  if (auto v4 = parse_ipv4(address)) {
    return ipv4_kind(*v4);
  }
  if (address.find(':') == std::string_view::npos) {
    return std::nullopt;
  }
  // A zone (`%eth0`, or `%25eth0` inside a URL) says which interface, not which address.
  auto v6 = parse_ipv6(address.substr(0, address.find('%')));
  if (!v6) {
    return std::nullopt;
  }
  const auto& g = *v6;
  if (g[0] == 0 && g[1] == 0 && g[2] == 0 && g[3] == 0 && g[4] == 0 && g[5] == 0xffff) {
    // IPv4-mapped: the IPv4 address is what a socket reaches.
    return ipv4_kind({static_cast<std::uint8_t>(g[6] >> 8), static_cast<std::uint8_t>(g[6]),
                      static_cast<std::uint8_t>(g[7] >> 8), static_cast<std::uint8_t>(g[7])});
  }
  if ((g[0] & 0xffc0) == 0xfe80) {
    return "link-local";
  }
  if ((g[0] & 0xfe00) == 0xfc00) {
    return "unique-local (fc00::/7)";
  }
  return std::nullopt;
}

std::optional<std::string> build_host_name(std::string_view name,
                                           const std::vector<std::string>& extra_names) {
  for (const auto* list : {&k_build_host_names, &extra_names}) {
    for (const auto& pattern : *list) {
      if (matches_pattern(name, pattern)) {
        return pattern;
      }
    }
  }
  return std::nullopt;
}

std::vector<std::string> host_addresses(std::string_view name, std::string_view value) {
  std::vector<Hit> hits;
  auto consider = [&](std::optional<std::pair<Hit, std::size_t>> literal) {
    if (literal && refused_address_kind(literal->first.text)) {
      hits.push_back(std::move(literal->first));
    }
  };

  for (auto i = value.find("://"); i != std::string_view::npos; i = value.find("://", i + 3)) {
    consider(literal_at(value, i + 3));
  }
  // Also covers `scheme://user:pass@host`, `git@host:repo` and `redis://:pw@host`.
  for (auto i = value.find('@'); i != std::string_view::npos; i = value.find('@', i + 1)) {
    consider(literal_at(value, i + 1));
  }
  for (auto i = value.find("\\\\"); i != std::string_view::npos; i = value.find("\\\\", i + 2)) {
    consider(literal_at(value, i + 2));
  }

  // A version list is not a host list, so a VERSION name exempts whole values and items; a
  // URL or `host:port` under such a name is still a host.
  const bool versions = contains_version(name);
  std::size_t begin = 0;
  while (begin < value.size()) {
    if (is_separator(value[begin])) {
      ++begin;
      continue;
    }
    auto end = begin;
    while (end < value.size() && !is_separator(value[end])) {
      ++end;
    }
    auto item = value.substr(begin, end - begin);
    if (!versions) {
      auto pos = begin;
      if (item.size() > 2 && item.front() == '[' && item.back() == ']') {
        item = item.substr(1, item.size() - 2);
        ++pos;
      }
      // Only an unbracketed whole item may be bare IPv6: after it, `:port` is ambiguous.
      if (refused_address_kind(item)) {
        hits.push_back(Hit{pos, std::string(item)});
      }
    }
    auto literal = literal_at(value, begin);
    if (literal) {
      auto next = literal->second;
      bool port = next + 1 < end && value[next] == ':' &&
                  (is_digit(value[next + 1]) || value[next + 1] == '/');
      bool path = next < end && value[next] == '/';
      if (port || path) {
        consider(std::move(literal));
      }
    }
    begin = end;
  }

  std::stable_sort(hits.begin(), hits.end(),
                   [](const Hit& a, const Hit& b) { return a.pos < b.pos; });
  // Each once, looked up in a set: a scan of `out` per hit made a value of 40,000 addresses
  // quadratic.
  std::vector<std::string> out;
  std::unordered_set<std::string_view> seen;
  for (const auto& hit : hits) {
    if (seen.insert(hit.text).second) {
      out.push_back(hit.text);
    }
  }
  return out;
}

namespace {

// BuildKit's SecretsUsedInArgOrEnv words, each a whole part of the name (split on anything but
// letters and digits), so TOKENIZERS_PARALLELISM names no token.
const std::unordered_set<std::string> k_secret_words = {
    "apikey",   "auth",  "credential", "credentials", "key",
    "password", "pword", "passwd",     "secret",      "token"};
// BuildKit's allow-words (public, file, version) and kiln's: a name that says it holds a path,
// a location, or a public key's id or fingerprint (GPG_KEY in the official Python images) names
// no secret.
const std::unordered_set<std::string> k_not_secret_words = {
    "public", "file", "version", "path",        "dir", "url", "uri",  "endpoint", "name",
    "type",   "id",   "ids",     "fingerprint", "gpg", "pgp", "size", "length"};

struct SecretShape {
  const char* what;
  Pattern pattern;
};

// Secrets by the shape of their value, under any name; each vendor's documented prefix.
const std::vector<SecretShape>& secret_shapes() {
  static const std::vector<SecretShape> shapes = {
      {"a GitHub token", Pattern::builtin(R"(\b(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{36,})")},
      {"a GitHub token", Pattern::builtin(R"(\bgithub_pat_[A-Za-z0-9_]{22,})")},
      {"a GitLab token", Pattern::builtin(R"(\bglpat-[A-Za-z0-9_-]{20,})")},
      {"an AWS access key id", Pattern::builtin(R"(\b(?:AKIA|ASIA)[A-Z0-9]{16}\b)")},
      {"a Slack token", Pattern::builtin(R"(\bxox[abpr]-[A-Za-z0-9-]{10,})")},
      {"a PEM private key", Pattern::builtin(R"(-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----)")},
      {"a password in a URL", Pattern::builtin(R"([A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:[^/@\s]+@)")},
  };
  return shapes;
}

} // namespace

/// A secret is never printed whole: its length, and its first 4 characters when they are at
/// most a third of it and plain ASCII (a vendor prefix says which secret; a short password
/// would be half told).
std::string redacted(std::string_view secret) {
  std::string_view head = secret.substr(0, 4);
  bool ascii = std::all_of(head.begin(), head.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
  if (secret.size() < 12 || !ascii) {
    return fmt::format("({} characters)", secret.size());
  }
  return fmt::format("{}… ({} characters)", head, secret.size());
}

std::vector<SecretMatch> secrets_in(std::string_view text) {
  std::vector<SecretMatch> found;
  for (const auto& shape : secret_shapes()) {
    if (auto match = shape.pattern.find(text)) {
      found.push_back({shape.what, redacted(*match)});
    }
  }
  return found;
}

std::optional<std::string> secret_word(std::string_view name) {
  std::optional<std::string> found;
  std::string part;
  auto end_part = [&]() -> bool {
    if (k_not_secret_words.count(part) != 0) {
      return false;
    }
    if (!found && k_secret_words.count(part) != 0) {
      found = part;
    }
    part.clear();
    return true;
  };
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      part += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!end_part()) {
      return std::nullopt;
    }
  }
  return end_part() ? found : std::nullopt;
}

std::string build_host_name_message(std::string_view name, std::string_view pattern) {
  bool proxy = pattern.size() > 6 && iequals(pattern.substr(pattern.size() - 6), "_PROXY");
  return proxy ? fmt::format("{} is the build host's proxy setting (matches {}): a consumer "
                             "would send its traffic through the builder's network; BuildKit "
                             "and buildah take *_proxy as predefined build args that never "
                             "persist: {}",
                             name, pattern, k_fix)
               : fmt::format("{} is a build-host setting (matches {}): the image would point "
                             "every consumer at the builder's cache or credentials; {}",
                             name, pattern, k_fix);
}

std::vector<EnvFinding> grade_env(const std::vector<std::pair<std::string, std::string>>& env,
                                  const std::vector<std::string>& extra_names) {
  std::vector<EnvFinding> findings;
  for (const auto& [name, value] : env) {
    if (auto pattern = build_host_name(name, extra_names)) {
      findings.push_back(
          EnvFinding{name, value, name, "leak-env-name", build_host_name_message(name, *pattern)});
      continue;
    }
    if (auto word = secret_word(name); word && !value.empty()) {
      findings.push_back(EnvFinding{
          name, value, name, "leak-secret",
          fmt::format("{} is named like a secret ('{}'): its value, {}, ships in the image's "
                      "config to every consumer; pass it to the build as a build secret "
                      "(RUN --mount=type=secret), never ENV or ARG",
                      name, *word, redacted(value))});
      continue;
    }
    for (const auto& address : host_addresses(name, value)) {
      auto kind = refused_address_kind(address).value_or("private");
      findings.push_back(EnvFinding{
          name, value, address, "leak-address",
          fmt::format("{} points at {}, a {} address of the build network that no consumer "
                      "can reach; {}",
                      name, address, kind, k_fix)});
    }
    for (const auto& secret : secrets_in(value)) {
      findings.push_back(EnvFinding{
          name, value, secret.shown, "leak-secret",
          fmt::format("{} holds {}, {}, which ships in the image's config to every consumer; "
                      "pass it to the build as a build secret (RUN --mount=type=secret), "
                      "never ENV or ARG",
                      name, secret.what, secret.shown)});
    }
  }
  return findings;
}

std::vector<std::pair<std::string, std::string>>
parse_env_list(const std::vector<std::string>& entries) {
  std::vector<std::pair<std::string, std::string>> env;
  for (const auto& entry : entries) {
    if (entry.empty()) {
      continue;
    }
    auto eq = entry.find('=');
    if (eq == std::string::npos) {
      env.emplace_back(entry, "");
    } else {
      env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
    }
  }
  return env;
}

} // namespace kiln
