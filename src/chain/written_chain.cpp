#include "chain/written_chain.h"

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

std::string as_stage_name(std::string_view text) {
  std::string name;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i, 2) == "${") {
      size_t end = text.find('}', i);
      if (end != std::string_view::npos) {
        name += text.substr(i, end + 1 - i);
        i = end;
        continue;
      }
    }
    char c = text[i];
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
    bool kept =
        (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    name += kept ? c : '-';
  }
  if (name.empty() || !((name[0] >= 'a' && name[0] <= 'z') || name[0] == '$')) {
    name = "t-" + name;
  }
  return name;
}

} // namespace kiln
