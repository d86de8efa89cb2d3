#include "util/strings.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace kiln {

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end - start));
    if (end == std::string_view::npos) {
      return parts;
    }
    start = end + 1;
  }
}

std::string_view trim(std::string_view text) {
  const char* space = " \t\r\n";
  size_t begin = text.find_first_not_of(space);
  if (begin == std::string_view::npos) {
    return {};
  }
  size_t end = text.find_last_not_of(space);
  return text.substr(begin, end - begin + 1);
}

std::string_view trim_space(std::string_view text) {
  const char* space = " \t\r\n\v\f";
  size_t begin = text.find_first_not_of(space);
  if (begin == std::string_view::npos) {
    return {};
  }
  return text.substr(begin, text.find_last_not_of(space) - begin + 1);
}

std::vector<std::string> split_blank(std::string_view s) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) {
      ++i;
    }
    std::size_t begin = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') {
      ++i;
    }
    if (i > begin) {
      words.emplace_back(s.substr(begin, i - begin));
    }
  }
  return words;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) {
      out += separator;
    }
    out += parts[i];
  }
  return out;
}

std::string lower(std::string_view text) {
  // By hand, not std::tolower: that consults the locale for every character, and the parser
  // lowers the keyword of every instruction it reads.
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

bool is_identifier(std::string_view name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string shell_quote(std::string_view word) {
  bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("-_./=:,@%+").find(c) != std::string_view::npos;
  });
  if (plain) {
    return std::string(word);
  }
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string quoted_command(const std::vector<std::string>& argv) {
  std::vector<std::string> words;
  for (const auto& word : argv) {
    words.push_back(shell_quote(word));
  }
  return join(words, " ");
}

size_t utf8_length(std::string_view text) {
  if (text.empty()) {
    return 0;
  }
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  auto continuation = [&](size_t i) { return i < text.size() && (byte(i) & 0xC0) == 0x80; };
  unsigned char lead = byte(0);
  if (lead < 0x80) {
    return 1;
  }
  if (lead >= 0xC2 && lead <= 0xDF) {
    return continuation(1) ? 2 : 0;
  }
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (!continuation(1) || !continuation(2)) {
      return 0;
    }
    if ((lead == 0xE0 && byte(1) < 0xA0) || (lead == 0xED && byte(1) > 0x9F)) {
      return 0;
    }
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) {
      return 0;
    }
    if ((lead == 0xF0 && byte(1) < 0x90) || (lead == 0xF4 && byte(1) > 0x8F)) {
      return 0;
    }
    return 4;
  }
  return 0;
}

std::string_view line_at(std::string_view text, int number) {
  for (int line = 1; line < number; ++line) {
    size_t newline = text.find('\n');
    if (newline == std::string_view::npos) {
      return {};
    }
    text.remove_prefix(newline + 1);
  }
  text = text.substr(0, text.find('\n'));
  if (!text.empty() && text.back() == '\r') {
    text.remove_suffix(1);
  }
  return text;
}

size_t utf8_cut(std::string_view text, size_t limit) {
  if (text.size() <= limit) {
    return text.size();
  }
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  return cut;
}

size_t first_invalid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    size_t length = utf8_length(text.substr(i));
    if (length == 0) {
      return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) {
    row[j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& candidate : candidates) {
    size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

std::string base64_encode(std::string_view bytes) {
  static const char* k_alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t group = static_cast<std::uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) {
      group |= static_cast<std::uint8_t>(bytes[i + 1]) << 8;
    }
    if (i + 2 < bytes.size()) {
      group |= static_cast<std::uint8_t>(bytes[i + 2]);
    }
    size_t n = std::min<size_t>(3, bytes.size() - i);
    for (size_t j = 0; j < 4; ++j) {
      out += j <= n ? k_alphabet[(group >> (18 - 6 * j)) & 63] : '=';
    }
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return std::nullopt;
  }
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') {
      return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
      return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
      return c - '0' + 52;
    }
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    int padding = 0;
    std::uint32_t group = 0;
    for (size_t j = 0; j < 4; ++j) {
      char c = text[i + j];
      // Padding only at the very end, and at most two of it.
      if (c == '=' && i + 4 == text.size() && j >= 2 && (j == 3 || text[i + 3] == '=')) {
        ++padding;
        group <<= 6;
        continue;
      }
      int v = value(c);
      if (v < 0 || padding > 0) {
        return std::nullopt;
      }
      group = (group << 6) | static_cast<std::uint32_t>(v);
    }
    out += static_cast<char>(group >> 16);
    if (padding < 2) {
      out += static_cast<char>((group >> 8) & 0xff);
    }
    if (padding < 1) {
      out += static_cast<char>(group & 0xff);
    }
  }
  return out;
}

std::string first_names(const std::vector<std::string>& names, size_t at_most) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < at_most; ++i) {
    text += (i == 0 ? "" : ", ") + names[i];
  }
  if (names.size() > at_most) {
    text += " and " + std::to_string(names.size() - at_most) + " more";
  }
  return text;
}

} // namespace kiln
