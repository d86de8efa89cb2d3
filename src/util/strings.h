#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

std::vector<std::string> split(std::string_view text, char separator);
std::string_view trim(std::string_view text);
std::string join(const std::vector<std::string>& parts, std::string_view separator);

/// ASCII lower case: Dockerfile keywords and stage names compare case-insensitively.
std::string lower(std::string_view text);

/// True for names a shell and a Dockerfile ARG both accept: [A-Za-z_][A-Za-z0-9_]*.
bool is_identifier(std::string_view name);

/// Quote a word for a POSIX shell only when it needs it, so dry-run output pastes as is.
std::string shell_quote(std::string_view word);

/// Edit distance, for did-you-mean suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word`, or "" when none is close enough to be a plausible typo.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

} // namespace kiln
