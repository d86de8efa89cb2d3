#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

std::vector<std::string> split(std::string_view text, char separator);

/// Blank-separated (space or tab) words of `s`, as a shell-form COPY's sources are.
std::vector<std::string> split_blank(std::string_view s);

/// The first `at_most` of `names`, comma-separated, and how many more there are: a line that
/// names what it is about without growing with it.
std::string first_names(const std::vector<std::string>& names, size_t at_most);
std::string_view trim(std::string_view text);
/// trim() of every ASCII space Go's strings.TrimSpace drops, \v and \f too: for text BuildKit
/// reads with it (a `# check=` directive, a .dockerignore line).
std::string_view trim_space(std::string_view text);
std::string join(const std::vector<std::string>& parts, std::string_view separator);

/// ASCII lower case: Dockerfile keywords and stage names compare case-insensitively.
std::string lower(std::string_view text);

/// True for names a shell and a Dockerfile ARG both accept: [A-Za-z_][A-Za-z0-9_]*.
bool is_identifier(std::string_view name);

/// Quote a word for a POSIX shell only when it needs it, so dry-run output pastes as is.
std::string shell_quote(std::string_view word);
/// A command as a shell line, each word quoted when it needs it.
std::string quoted_command(const std::vector<std::string>& argv);

/// Line `number` (from 1) of `text`, without its newline (or a CR before it); "" past the end.
std::string_view line_at(std::string_view text, int number);

/// Bytes in the UTF-8 sequence that starts `text`; 0 when it is not valid UTF-8 (overlong forms,
/// surrogates and code points past U+10FFFF included) or `text` is empty.
size_t utf8_length(std::string_view text);

/// Where to cut `text` to at most `limit` bytes without splitting a UTF-8 sequence: `limit`, or
/// less when a continuation byte sits there; text.size() when it fits whole.
size_t utf8_cut(std::string_view text, size_t limit);

/// Where the first byte that is not valid UTF-8 is in `text`; npos when there is none.
size_t first_invalid_utf8(std::string_view text);

/// Standard base64 (RFC 4648, with padding) of `bytes`.
std::string base64_encode(std::string_view bytes);

/// Standard base64 (RFC 4648, with padding) decoded; nullopt when `text` is not base64.
std::optional<std::string> base64_decode(std::string_view text);

/// Edit distance, for did-you-mean suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word`, or "" when none is close enough to be a plausible typo.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

} // namespace kiln
