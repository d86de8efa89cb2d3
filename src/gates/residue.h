#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// The rules of the residue gate: files a build leaves in an image that belong to the build
/// host (its credentials, its keys, its LAN endpoints and proxy). A file deleted by a later
/// layer still ships in the layer that added it, so every layer is read, not the final tree.
///
/// A file is a candidate by its path alone, so a scan reads the content of a handful of files
/// and skips the data of every other; a config file is refused only for what it says (a
/// private address, credentials, a remote cache), a credentials file whatever it says.

/// Which rule a path falls under, `""` when none: the cheap test every entry gets.
std::string_view residue_rule(std::string_view path);

/// How much of a candidate's content the rules read: config files are small, and a private
/// key's header is in its first bytes.
constexpr std::size_t k_residue_read_limit = 1 << 20;

/// Why `content` (the first k_residue_read_limit bytes of a file under `rule`) is build-host
/// residue, with any secret redacted; nullopt when it is not.
std::optional<std::string> residue_detail(std::string_view rule, std::string_view content);

/// One build-host file found in an image's layers.
struct ResidueFinding {
  std::string platform;    // `os/arch[/variant]`, "" when the image has one platform
  std::string path;        // absolute in the image: `/root/.npmrc`
  std::string rule;        // residue_rule's answer
  std::string detail;      // residue_detail's answer
  std::size_t layers = 0;  // how many layers the image has
  std::size_t added = 0;   // the layer that added it, 1-based from the bottom
  std::size_t deleted = 0; // the layer that deleted it (a whiteout), 0 when none did
  std::string allowed;     // the allow-list's reason, when an entry matched
};

/// `<platform>: <path>: <rule>: <detail>; added in layer A of N[, deleted in layer D: still
/// published]`, and the fix.
std::string residue_message(const ResidueFinding& finding);

/// A chain's exception: files matching `path` (a glob, `*` crossing `/`) are reported as
/// allowed, with the reason the chain gives, not refused.
struct ResidueAllow {
  std::string path;
  std::string reason;
};

/// The first entry of `allow` whose glob matches `path`.
const ResidueAllow* allowed_residue(const std::vector<ResidueAllow>& allow, std::string_view path);

} // namespace kiln
