#include "util/workflow_command.h"

namespace kiln {

namespace {

std::string escape(std::string_view text, bool property) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
    case '%':
      out += "%25";
      break;
    case '\r':
      out += "%0D";
      break;
    case '\n':
      out += "%0A";
      break;
    case ':':
      out += property ? "%3A" : ":";
      break;
    case ',':
      out += property ? "%2C" : ",";
      break;
    default:
      out += c;
    }
  }
  return out;
}

} // namespace

std::string workflow_escape_data(std::string_view message) {
  return escape(message, false);
}

std::string workflow_escape_property(std::string_view value) {
  return escape(value, true);
}

std::string workflow_command(std::string_view command,
                             const std::vector<std::pair<std::string, std::string>>& properties,
                             std::string_view message) {
  std::string line = "::";
  line += command;
  for (size_t i = 0; i < properties.size(); ++i) {
    line += i == 0 ? " " : ",";
    line += properties[i].first + "=" + workflow_escape_property(properties[i].second);
  }
  line += "::" + workflow_escape_data(message) + "\n";
  return line;
}

} // namespace kiln
