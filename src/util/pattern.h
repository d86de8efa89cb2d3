#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace re2 {
class RE2;
}

namespace kiln {

/// Why a pattern does not compile, and where in it (0-based byte offset; the whole pattern
/// when RE2 names no part).
struct PatternError {
  std::string message;
  size_t offset = 0;
};

/// A regular expression in RE2's syntax, compiled once. Matching takes time linear in the text
/// and bounded stack whatever the pattern: std::regex recursed once per character and a
/// 128 KB line of engine output overflowed kiln's stack.
struct PatternOptions {
  bool case_insensitive = false;
};

class Pattern {
public:
  static tl::expected<Pattern, PatternError> compile(std::string_view pattern,
                                                     PatternOptions options = {});
  /// compile() for a pattern kiln itself writes: a mistake in it is a bug, so it throws.
  static Pattern builtin(std::string_view pattern, PatternOptions options = {});

  /// Whether the pattern matches anywhere in `text`.
  bool search(std::string_view text) const;
  /// The first match in `text`, a view into it; nullopt when there is none.
  std::optional<std::string_view> find(std::string_view text) const;
  /// `text` with every match replaced by `rewrite` (`\1` names a group).
  std::string replace_all(std::string_view text, std::string_view rewrite) const;
  const std::string& source() const { return m_source; }

private:
  std::string m_source;
  std::shared_ptr<const re2::RE2> m_re; // immutable and thread-safe, so copies share it
};

} // namespace kiln
