#include "chain/toml_string.h"

#include <fmt/format.h>

namespace kiln {

std::string toml_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\r':
      out += "\\r";
      break;
    default:
      if (byte < 0x20 || byte == 0x7f) {
        out += fmt::format("\\u{:04X}", byte);
      } else {
        out += c;
      }
    }
  }
  return out + "\"";
}

} // namespace kiln
