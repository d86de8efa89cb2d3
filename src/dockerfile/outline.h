#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "dockerfile/parser.h"

namespace kiln {

/// What two Dockerfile parsers can be compared on, as JSON:
///
///     {"escape": "\\", "error": null | {"line": N, "message": "..."},
///      "instructions": [{"keyword": "run", "start": 2, "end": 5, "flags": ["mount=..."],
///                        "form": "words" | "json" | "pairs", "args": [...],
///                        "heredocs": ["EOF"]}]}
///
/// Lines are 1-based; `end` includes heredoc bodies. Flags are `name=value`, quotes removed.
/// ENV, LABEL and ARG are "pairs": key, value, key, value... with values raw (quotes and
/// escapes kept, continuations joined) and null for an ARG name written without `=`. JSON form
/// is the decoded array. Anything else is "words": the argument text after the flags, split on
/// blanks, quotes and escapes kept. A file that does not parse has no instructions.
nlohmann::json outline_json(const tl::expected<Dockerfile, ParseError>& parsed);

/// outline_json(parse_dockerfile(text)).
nlohmann::json outline_dockerfile(std::string_view text);

} // namespace kiln
