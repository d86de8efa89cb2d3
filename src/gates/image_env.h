#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

/// The classifier behind the image-env publish gate: a published image must never carry the
/// build host in its ENV. A Windows image once shipped the owner's LAN WebDAV cache endpoint as
/// SCCACHE_WEBDAV_ENDPOINT and every consumer's sccache server died on its storage check; name
/// or value-shape linters (hadolint, dockle, trivy) cannot catch that, because the fault is
/// which host a value points at. The same rules grade a Dockerfile lint (ENV values, ARG
/// defaults) and the gate over a built image's config Env, from one case file
/// (tests/fixtures/image-env-cases.json).
///
/// Three rules:
/// - leak-env-name: a name that configures a remote compile cache, carries cloud credentials
///   (SCCACHE_WEBDAV_*, SCCACHE_REDIS*, AWS_SECRET_ACCESS_KEY, ...) or is the build host's proxy
///   (HTTP_PROXY, HTTPS_PROXY, FTP_PROXY, ALL_PROXY, NO_PROXY) is refused whatever its value. Names
///   match case-insensitively, since Windows images treat them so. Container-local runtime settings
///   (SCCACHE_DIR, SCCACHE_CACHE_SIZE, CCACHE_DIR, ...) are fine.
/// - leak-address: a private (RFC 1918: 10/8, 172.16/12, 192.168/16), shared (RFC 6598:
///   100.64/10), link-local (169.254/16, fe80::/10) or unique-local (fc00::/7) address in a host
///   position: after `scheme://`, after `@`, after
///   a UNC `\\`, as a whole value or whole list item (split on `,` `;` whitespace), or at the
///   start of an item and followed by `:port` or `/`. A dotted quad inside a path or inside
///   text (`pkg-10.2.0.1`) is not a host, nor is a whole value under a name containing VERSION.
///
/// - leak-secret: a secret, by name (BuildKit's SecretsUsedInArgOrEnv words as whole parts of
///   the name, with its allow-words and kiln's) or by the shape of its value (vendor token
///   prefixes, AWS key ids, a PEM private key, a password in a URL); a message shows a secret as
///   its first 4 characters and its length, never whole.
///
/// Out of scope, deliberately not refused: public addresses (8.8.8.8), loopback (127.0.0.1,
/// ::1), and every hostname, including ones
/// that resolve to a private address (`cache.lan`, `10.0.0.5.nip.io`): the gate reads text and
/// resolves nothing. Addresses are strict dotted decimal; `010.0.0.5` is not read as one.

struct EnvFinding {
  std::string name;
  std::string value;
  std::string offending; // the matched address, or the variable's name
  std::string rule;      // "leak-env-name", "leak-address" or "leak-secret"
  std::string message;   // names the variable and the offending part, and how to fix it
};

/// The build-host name pattern `name` matches (built-in or from `extra_names`, each exact or
/// `PREFIX*`), as written in the pattern list; nullopt when the name is fine.
std::optional<std::string> build_host_name(std::string_view name,
                                           const std::vector<std::string>& extra_names);

/// The private or link-local addresses in host positions of `value`, in order of appearance,
/// each once, without brackets (an IPv6 zone such as `%eth0` is kept); empty when none.
/// `name` matters only for the VERSION exemption.
std::vector<std::string> host_addresses(std::string_view name, std::string_view value);

/// The secret word `name` holds as a whole part (split on anything but letters and digits,
/// compared ignoring case): BuildKit's SecretsUsedInArgOrEnv words (apikey, auth, credential,
/// credentials, key, password, pword, passwd, secret, token), lower-cased; nullopt when it holds
/// none, or when a part is one of BuildKit's allow-words (public, file, version) or kiln's
/// (path, dir, url, uri, endpoint, name, type, id, ids, fingerprint, gpg, pgp, size, length).
std::optional<std::string> secret_word(std::string_view name);

/// The finding's message for a variable `name` whose name matched `pattern`: what it does to a
/// consumer (the builder's cache, credentials or proxy) and the fix.
std::string build_host_name_message(std::string_view name, std::string_view pattern);

/// A secret found by the shape of its value: what it is ("a GitHub token") and how it may be
/// shown (redacted).
struct SecretMatch {
  std::string what;
  std::string shown;
};

/// The secrets in `text` by their shape (vendor token prefixes, AWS key ids, a PEM private key,
/// a password in a URL), the first of each shape.
std::vector<SecretMatch> secrets_in(std::string_view text);

/// A secret as kiln shows it: its length, and its first 4 characters when they are at most a
/// third of it and plain ASCII.
std::string redacted(std::string_view secret);

/// Every finding for an environment, in its order. A variable with a build-host name yields
/// that finding only: the fix drops the whole value, so its addresses add nothing.
std::vector<EnvFinding> grade_env(const std::vector<std::pair<std::string, std::string>>& env,
                                  const std::vector<std::string>& extra_names);

/// `NAME=value` entries as an image config's Env holds them, split at the first `=`. An entry
/// without `=` is a name with an empty value; an empty entry names nothing and is skipped.
std::vector<std::pair<std::string, std::string>>
parse_env_list(const std::vector<std::string>& entries);

/// Strict dotted decimal: four parts of 1-3 digits, each at most 255, no leading zeros (which
/// some resolvers read as octal, so the text would not name the address it seems to).
std::optional<std::array<std::uint8_t, 4>> parse_ipv4(std::string_view text);

/// RFC 4291 text form: up to eight hex groups, at most one `::`, an optional dotted-quad tail.
/// No brackets and no zone.
std::optional<std::array<std::uint16_t, 8>> parse_ipv6(std::string_view text);

/// "private (RFC 1918)", "shared (RFC 6598, ...)", "link-local" or "unique-local (fc00::/7)" when
/// `address` (IPv4, IPv6, IPv4-mapped IPv6, an IPv6
/// zone allowed) is one the gate refuses; nullopt for anything else, including non-addresses.
std::optional<std::string_view> refused_address_kind(std::string_view address);

} // namespace kiln
