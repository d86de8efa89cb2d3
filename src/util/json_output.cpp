#include "util/json_output.h"

namespace kiln {

nlohmann::json parse_json_output(std::string_view text) {
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    std::string_view line = text.substr(at, end == std::string_view::npos ? end : end - at);
    if (line.starts_with('{') || line.starts_with('[')) {
      auto doc = nlohmann::json::parse(text.substr(at), nullptr, false);
      if (!doc.is_discarded()) {
        return doc;
      }
    }
    if (end == std::string_view::npos) {
      break;
    }
    at = end + 1;
  }
  return nlohmann::json::value_t::discarded;
}

} // namespace kiln
