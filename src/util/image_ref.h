#pragma once

#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace kiln {

/// An image id or digest as a person reads it: its first 12 hex digits, as `docker images`
/// shows ids, a digest without its `sha256:`.
std::string short_image_id(std::string_view id);

/// An image reference as the distribution reference grammar defines it
/// (`[domain[:port]/]path[:tag][@digest]`): what a tag, a registry push and an index name. Every
/// part becomes an argv word of an engine, so a reference that does not parse never reaches one
/// (`--all` as a tag would be read as a flag).
struct ImageRef {
  std::string domain; // `registry.example:5000`, `localhost`; "" when the reference has none
  std::string path;   // `team/app`
  std::string tag;    // "" when none
  std::string digest; // `sha256:<hex>`; "" when none

  /// `domain/path`: the repository, without tag or digest.
  std::string repository() const;
  /// The repository with `:tag` and `@digest` as set.
  std::string str() const;
};

/// The reference `text` spells, or why it is none, in words for a diagnostic. The grammar is
/// distribution's: lower-case path components joined by `/`, each `[a-z0-9]+` with `.`, `_`,
/// `__` or runs of `-` between; a first component holding `.` or `:`, or `localhost`, is the
/// domain; a tag `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`; a digest `algorithm:hex`; at most 255
/// characters before the tag.
tl::expected<ImageRef, std::string> parse_image_ref(std::string_view text);

} // namespace kiln
