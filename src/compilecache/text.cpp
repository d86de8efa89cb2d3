#include "compilecache/text.h"

#include <cctype>

#include <sys/stat.h>
#include <unistd.h>

namespace kiln::cc {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

std::string find_on_path(std::string_view name, std::string_view path) {
  while (true) {
    size_t colon = path.find(':');
    std::string_view dir = path.substr(0, colon);
    std::string candidate(dir.empty() ? "." : dir);
    candidate.push_back('/');
    candidate.append(name);
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) {
      return {};
    }
    path.remove_prefix(colon + 1);
  }
}

} // namespace kiln::cc
