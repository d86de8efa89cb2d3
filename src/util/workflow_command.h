#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

// GitHub Actions workflow commands: lines such as `::error file=F,line=L::message` that the
// runner reads from a step's output and turns into annotations on files and lines.

/// A command's message with GitHub's escaping: `%`, CR and LF as `%25`, `%0D`, `%0A`, so a
/// message of several lines stays one command.
std::string workflow_escape_data(std::string_view message);

/// A property's value: the message's escaping, and `:` and `,` (which delimit properties) as
/// `%3A` and `%2C`.
std::string workflow_escape_property(std::string_view value);

/// `::<command> name=value,...::<message>` and a newline, every part escaped; without
/// properties, `::<command>::<message>`.
std::string workflow_command(std::string_view command,
                             const std::vector<std::pair<std::string, std::string>>& properties,
                             std::string_view message);

} // namespace kiln
