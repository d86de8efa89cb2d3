#include "util/image_ref.h"

#include <cctype>

namespace kiln {

std::string short_image_id(std::string_view id) {
  if (id.starts_with("sha256:")) {
    id.remove_prefix(7);
  }
  return std::string(id.substr(0, 12));
}

namespace {

bool is_lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool is_alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

/// `[a-z0-9]+` separated by `.`, `_`, `__` or a run of `-`.
bool is_path_component(std::string_view part) {
  if (part.empty() || !is_lower_alnum(part.front()) || !is_lower_alnum(part.back())) {
    return false;
  }
  for (size_t i = 0; i < part.size();) {
    if (is_lower_alnum(part[i])) {
      ++i;
      continue;
    }
    size_t run = i;
    while (run < part.size() && !is_lower_alnum(part[run])) {
      ++run;
    }
    std::string_view separator = part.substr(i, run - i);
    bool dashes = separator.find_first_not_of('-') == std::string_view::npos;
    if (separator != "." && separator != "_" && separator != "__" && !dashes) {
      return false;
    }
    i = run;
  }
  return true;
}

/// `host[:port]`, each host label alphanumeric with inner `-`.
bool is_domain(std::string_view domain) {
  std::string_view host = domain;
  if (size_t colon = domain.find(':'); colon != std::string_view::npos) {
    std::string_view port = domain.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string_view::npos) {
      return false;
    }
    host = domain.substr(0, colon);
  }
  if (host.empty()) {
    return false;
  }
  for (size_t start = 0; start <= host.size();) {
    size_t dot = host.find('.', start);
    std::string_view label =
        host.substr(start, dot == std::string_view::npos ? host.npos : dot - start);
    if (label.empty() || !is_alnum(label.front()) || !is_alnum(label.back())) {
      return false;
    }
    for (char c : label) {
      if (!is_alnum(c) && c != '-') {
        return false;
      }
    }
    if (dot == std::string_view::npos) {
      break;
    }
    start = dot + 1;
  }
  return true;
}

bool is_tag(std::string_view tag) {
  if (tag.empty() || tag.size() > 128 || !(is_alnum(tag.front()) || tag.front() == '_')) {
    return false;
  }
  for (char c : tag) {
    if (!is_alnum(c) && c != '_' && c != '.' && c != '-') {
      return false;
    }
  }
  return true;
}

bool is_digest(std::string_view digest) {
  size_t colon = digest.find(':');
  if (colon == std::string_view::npos || colon == 0) {
    return false;
  }
  std::string_view algorithm = digest.substr(0, colon);
  std::string_view hex = digest.substr(colon + 1);
  if (!std::isalpha(static_cast<unsigned char>(algorithm.front()))) {
    return false;
  }
  for (char c : algorithm) {
    if (!is_alnum(c) && c != '-' && c != '_' && c != '+' && c != '.') {
      return false;
    }
  }
  return hex.size() >= 32 && hex.find_first_not_of("0123456789abcdefABCDEF") == hex.npos;
}

} // namespace

std::string ImageRef::repository() const {
  return domain.empty() ? path : domain + "/" + path;
}

std::string ImageRef::str() const {
  std::string text = repository();
  if (!tag.empty()) {
    text += ":" + tag;
  }
  if (!digest.empty()) {
    text += "@" + digest;
  }
  return text;
}

tl::expected<ImageRef, std::string> parse_image_ref(std::string_view text) {
  if (text.empty()) {
    return tl::unexpected(std::string("it is empty"));
  }
  if (text.front() == '-') {
    return tl::unexpected(
        std::string("it starts with '-', which a command would read as an option"));
  }
  ImageRef ref;
  std::string_view rest = text;
  if (size_t at = rest.find('@'); at != std::string_view::npos) {
    ref.digest = std::string(rest.substr(at + 1));
    if (!is_digest(ref.digest)) {
      return tl::unexpected("'" + ref.digest + "' is not a digest (algorithm:hex)");
    }
    rest = rest.substr(0, at);
  }
  // A colon after the last slash starts the tag; one before it is the domain's port.
  size_t slash = rest.rfind('/');
  size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    ref.tag = std::string(rest.substr(colon + 1));
    if (!is_tag(ref.tag)) {
      return tl::unexpected("'" + ref.tag +
                            "' is not a tag (letters, digits, '_', '.' and '-', at most 128, "
                            "not starting with '.' or '-')");
    }
    rest = rest.substr(0, colon);
  }
  if (rest.size() > 255) {
    return tl::unexpected(std::string("its name is longer than 255 characters"));
  }
  if (size_t first = rest.find('/'); first != std::string_view::npos) {
    std::string_view head = rest.substr(0, first);
    if (head.find_first_of(".:") != std::string_view::npos || head == "localhost" ||
        head.find_first_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") != std::string_view::npos) {
      if (!is_domain(head)) {
        return tl::unexpected("'" + std::string(head) + "' is not a registry host[:port]");
      }
      ref.domain = std::string(head);
      rest = rest.substr(first + 1);
    }
  }
  if (rest.empty()) {
    return tl::unexpected(std::string("it names no repository"));
  }
  for (size_t start = 0;;) {
    size_t next = rest.find('/', start);
    std::string_view part =
        rest.substr(start, next == std::string_view::npos ? rest.npos : next - start);
    if (!is_path_component(part)) {
      return tl::unexpected("'" + std::string(part) +
                            "' is not a repository path component (lower-case letters and "
                            "digits, joined by '.', '_', '__' or '-')");
    }
    if (next == std::string_view::npos) {
      break;
    }
    start = next + 1;
  }
  ref.path = std::string(rest);
  return ref;
}

} // namespace kiln
