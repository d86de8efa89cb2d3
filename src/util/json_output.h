#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln {

/// The JSON document a tool printed, read from its combined output: buildah prints warnings on
/// stderr, which reaches kiln through the same pipe as the JSON on stdout, so the document
/// starts on the first line that opens one. A discarded value when no line does.
nlohmann::json parse_json_output(std::string_view text);

} // namespace kiln
