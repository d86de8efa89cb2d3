#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// A `.dockerignore` as BuildKit reads it (moby/patternmatcher and its ignorefile): comment
/// lines dropped, each pattern trimmed, cleaned like a path and made relative, `!` marking an
/// exclusion.
class DockerIgnore {
public:
  /// nullopt when a pattern is malformed (an unclosed `[`): BuildKit refuses the whole file.
  static std::optional<DockerIgnore> parse(std::string_view text);

  /// Whether any pattern is an exclusion (`!keep`). BuildKit's CopyIgnoredFile does not judge
  /// such a file at all: a directory can be excluded while a file in it is kept.
  bool has_exclusions() const { return m_exclusions; }
  /// patternmatcher's MatchesOrParentMatches: whether the last pattern that matches `path`
  /// (cleaned, `/`-separated, relative to the context) or one of its parents ignores it.
  bool excludes(std::string_view path) const;
  /// Whether a pattern (`*`, `**`, `**/*`) excludes every entry at the context's root, the
  /// only way `COPY . .` copies nothing.
  bool excludes_root() const;

  struct Token {
    enum Kind { literal, one, star, any, dirs, set } kind = literal;
    char c = 0;
    std::string members; // for `set`: the characters and `a-z` ranges, as written
    bool negated = false;
  };
  struct Pattern {
    std::string text; // cleaned
    enum Kind { exact, prefix, suffix, glob } kind = exact;
    std::vector<Token> tokens; // for glob
    bool exclusion = false;    // written `!pattern`: keeps what an earlier one ignored
  };

private:
  std::vector<Pattern> m_patterns;
  bool m_exclusions = false;
};

/// Go's filepath.Clean for `/`-separated paths: `.` and empty parts dropped, `..` folded.
std::string clean_path(std::string_view path);

/// The `.dockerignore` BuildKit applies to `dockerfile`'s build: `<Dockerfile>.dockerignore`
/// beside it, else `.dockerignore` in `context` (empty: the Dockerfile's folder); nullopt
/// when neither is there or readable.
std::optional<std::string> read_dockerignore(const std::filesystem::path& dockerfile,
                                             const std::filesystem::path& context);

} // namespace kiln
