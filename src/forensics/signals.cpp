#include "forensics/signals.h"

#include <charconv>

namespace kiln::forensics {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::optional<long> leading_number(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && is_digit(text[digits])) {
    ++digits;
  }
  if (digits == 0 || digits > 15) {
    return std::nullopt;
  }
  long value = 0;
  std::from_chars(text.data(), text.data() + digits, value);
  return value;
}

std::string_view skip_blanks(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  return text;
}

// `error:` as a word: at the start, or after a blank or a colon (`foo.c:3:1: error:`,
// `collect2: error:`, `fatal error:`).
bool has_error_word(std::string_view text) {
  size_t at = 0;
  while ((at = text.find("error:", at)) != std::string_view::npos) {
    if (at == 0 || text[at - 1] == ' ' || text[at - 1] == ':') {
      return true;
    }
    at += 6;
  }
  return false;
}

bool is_make_failure(std::string_view text) {
  // make: *** [Makefile:12: all] Error 2   make[2]: *** ...   gmake[1]: *** ...
  size_t start = text.starts_with("gmake") ? 5 : text.starts_with("make") ? 4 : 0;
  if (start == 0) {
    return false;
  }
  std::string_view rest = text.substr(start);
  if (rest.starts_with('[')) {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) {
      return false;
    }
    rest.remove_prefix(close + 1);
  }
  return rest.starts_with(": *** ");
}

/// What the linker says when a link fails, before collect2's one line: `/usr/bin/ld: cannot find
/// -lz`, a relocation that needs -fPIC, a multiple definition. Its first word is the linker
/// (`ld`, `/usr/bin/ld`, `x86_64-linux-gnu-ld`, `ld.gold`, `ld.bfd`); its warnings are not errors.
bool is_linker_line(std::string_view text) {
  size_t colon = text.find(": ");
  if (colon == std::string_view::npos || text.substr(colon + 2).starts_with("warning:")) {
    return false;
  }
  std::string_view word = text.substr(0, colon);
  for (std::string_view flavour : {".bfd", ".gold", ".lld"}) {
    if (word.ends_with(flavour)) {
      word.remove_suffix(flavour.size());
      break;
    }
  }
  return word == "ld" || word.ends_with("/ld") || word.ends_with("-ld");
}

} // namespace

bool starts_error_line(std::string_view text) {
  return text.starts_with("ninja: build stopped") || text.starts_with("FAILED: ") ||
         is_make_failure(text) || is_linker_line(text);
}

bool is_error_line(std::string_view text) {
  if (starts_error_line(text)) {
    return true;
  }
  if (text.find(": undefined reference to") != std::string_view::npos ||
      text.find(": multiple definition of") != std::string_view::npos) {
    return true;
  }
  return has_error_word(text);
}

bool is_cmake_error(std::string_view text) {
  return text.starts_with("CMake Error at ") || text.starts_with("CMake Error:");
}

bool is_traceback_start(std::string_view text) {
  while (!text.empty() && text.back() == '\r') {
    text.remove_suffix(1);
  }
  return text == "Traceback (most recent call last):";
}

namespace {

// cc, gcc, g++, c++, clang, clang++; with a cross prefix (x86_64-linux-gnu-gcc) or a version
// suffix (gcc-12, clang++-14).
bool is_compiler_name(std::string_view word) {
  static constexpr std::string_view k_names[] = {"clang++", "clang", "g++", "gcc", "c++", "cc"};
  // A version suffix: -12, -14.0.6
  size_t dash = word.rfind('-');
  if (dash != std::string_view::npos && dash + 1 < word.size() &&
      word.find_first_not_of("0123456789.", dash + 1) == std::string_view::npos &&
      is_digit(word[dash + 1])) {
    word = word.substr(0, dash);
  }
  for (std::string_view name : k_names) {
    if (word.ends_with(name)) {
      size_t before = word.size() - name.size();
      if (before == 0 || word[before - 1] == '-') {
        // A cross prefix is made of [A-Za-z0-9_.-]
        for (size_t i = 0; i < before; ++i) {
          char c = word[i];
          if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_' ||
                c == '.' || c == '-')) {
            return false;
          }
        }
        return true;
      }
    }
  }
  return false;
}

} // namespace

bool is_compiler_invocation(std::string_view text) {
  // The words before the first option: `/usr/bin/c++ -O2 ... -c a.cpp`, `ccache g++ -c`,
  // `cd /b && clang++ -c`. Only lines that already carry a `-c` word come here.
  while (!text.empty()) {
    text = skip_blanks(text);
    size_t end = text.find_first_of(" \t");
    std::string_view word = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end);
    if (word.empty()) {
      continue;
    }
    if (word.front() == '-') {
      return false;
    }
    while (!word.empty() && (word.front() == '\'' || word.front() == '"' || word.front() == '(')) {
      word.remove_prefix(1);
    }
    size_t slash = word.rfind('/');
    if (slash != std::string_view::npos) {
      word.remove_prefix(slash + 1);
    }
    if (is_compiler_name(word)) {
      return true;
    }
  }
  return false;
}

bool is_build_progress_compile(std::string_view text) {
  if (!text.starts_with('[')) {
    return false;
  }
  size_t close = text.find(']');
  if (close == std::string_view::npos || close > 24) {
    return false;
  }
  std::string_view rest = text.substr(close + 1);
  return rest.starts_with(" Building C object ") || rest.starts_with(" Building CXX object ");
}

std::optional<long> jobs_option(std::string_view text) {
  std::string_view rest;
  if (text.starts_with("-j")) {
    rest = text.substr(2);
  } else if (text.starts_with("--parallel")) {
    rest = text.substr(10);
    if (rest.empty() || (rest.front() != ' ' && rest.front() != '=')) {
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  if (!rest.empty() && (rest.front() == ' ' || rest.front() == '=')) {
    rest.remove_prefix(1);
  }
  auto value = leading_number(rest);
  if (!value || *value <= 0) {
    return std::nullopt;
  }
  size_t digits = 0;
  while (digits < rest.size() && is_digit(rest[digits])) {
    ++digits;
  }
  // `-j8x` is no job count; `-j8'` (a quote closing) and `-j8;` are.
  if (digits < rest.size()) {
    char after = rest[digits];
    if ((after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z') || after == '.' ||
        after == '_') {
      return std::nullopt;
    }
  }
  return value;
}

namespace {

enum class Fetcher { none, wget, curl };

// The command word a token names: quotes and parentheses around it dropped, then its base name.
Fetcher fetcher_of(std::string_view token) {
  while (!token.empty() && (token.front() == '\'' || token.front() == '"' || token.front() == '(' ||
                            token.front() == '`')) {
    token.remove_prefix(1);
  }
  size_t slash = token.rfind('/');
  if (slash != std::string_view::npos) {
    token.remove_prefix(slash + 1);
  }
  if (token == "wget") {
    return Fetcher::wget;
  }
  if (token == "curl") {
    return Fetcher::curl;
  }
  return Fetcher::none;
}

bool ends_command(std::string_view token) {
  return token == "&&" || token == "||" || token == ";" || token == "|" || token.ends_with(';') ||
         token.ends_with("&&") || token.ends_with('\'') || token.ends_with('"') ||
         token.ends_with(')');
}

bool quiets(Fetcher fetcher, std::string_view option) {
  while (!option.empty() && (option.back() == '\'' || option.back() == '"' ||
                             option.back() == ';' || option.back() == ')')) {
    option.remove_suffix(1);
  }
  if (fetcher == Fetcher::wget) {
    if (option.starts_with("--progress") || option == "--quiet" || option == "-nv" ||
        option == "--no-verbose") {
      return true;
    }
    if (option.size() < 2 || option[0] != '-' || option[1] == '-') {
      return false;
    }
    for (size_t i = 1; i < option.size(); ++i) {
      char c = option[i];
      if (c == 'q') {
        return true;
      }
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) ||
          std::string_view("OoaPUTtie").find(c) != std::string_view::npos) {
        return false; // the rest of the word is that option's value
      }
    }
    return false;
  }
  if (option == "--silent" || option == "--no-progress-meter") {
    return true;
  }
  // A cluster of short options: -s, -sS, -fsSL. An option that takes a value (-o file) ends a
  // cluster, so only letters before the first such one count; `s` is no value-taking option.
  if (option.size() < 2 || option[0] != '-' || option[1] == '-') {
    return false;
  }
  for (size_t i = 1; i < option.size(); ++i) {
    char c = option[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
      return false;
    }
    if (c == 's') {
      return true;
    }
    if (c == 'o' || c == 'O' || c == 'H' || c == 'd' || c == 'u' || c == 'x' || c == 'A' ||
        c == 'e' || c == 'r' || c == 'T' || c == 'X' || c == 'w') {
      return false; // the rest of the word is that option's value
    }
  }
  return false;
}

} // namespace

int fetches_without_progress(std::string_view command) {
  int count = 0;
  Fetcher open = Fetcher::none;
  bool quiet = false;
  auto close = [&] {
    if (open != Fetcher::none && !quiet) {
      ++count;
    }
    open = Fetcher::none;
    quiet = false;
  };
  while (!command.empty()) {
    command = skip_blanks(command);
    size_t end = command.find_first_of(" \t");
    std::string_view token = command.substr(0, end);
    command.remove_prefix(end == std::string_view::npos ? command.size() : end);
    if (token.empty()) {
      continue;
    }
    if (open == Fetcher::none) {
      open = fetcher_of(token);
      quiet = false;
      if (open != Fetcher::none && ends_command(token)) {
        close();
      }
      continue;
    }
    if (quiets(open, token)) {
      quiet = true;
    }
    if (ends_command(token)) {
      close();
      // `;curl` or `&&wget` glued to the separator starts the next fetch at once
    }
  }
  close();
  return count;
}

std::optional<long> sccache_text_count(std::string_view text, std::string_view label) {
  if (!text.starts_with(label) || text.size() == label.size() || text[label.size()] != ' ') {
    return std::nullopt;
  }
  std::string_view rest = skip_blanks(text.substr(label.size()));
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\r')) {
    rest.remove_suffix(1);
  }
  auto value = leading_number(rest);
  if (!value || std::to_string(*value).size() != rest.size()) {
    return std::nullopt;
  }
  return value;
}

std::optional<long> ccache_summary_count(std::string_view text, std::string_view label) {
  text = skip_blanks(text);
  if (!text.starts_with(label) || text.size() == label.size() || text[label.size()] != ':') {
    return std::nullopt;
  }
  return leading_number(skip_blanks(text.substr(label.size() + 1)));
}

std::optional<long> ccache_print_stats_count(std::string_view text, std::string_view key) {
  if (!text.starts_with(key) || text.size() <= key.size() || text[key.size()] != '\t') {
    return std::nullopt;
  }
  std::string_view rest = text.substr(key.size() + 1);
  while (!rest.empty() && rest.back() == '\r') {
    rest.remove_suffix(1);
  }
  auto value = leading_number(rest);
  if (!value || std::to_string(*value).size() != rest.size()) {
    return std::nullopt;
  }
  return value;
}

std::string one_line(std::string_view text, size_t limit) {
  std::string out;
  out.reserve(std::min(text.size(), limit));
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t length = 1;
    if (c >= 0xC0) {
      length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    }
    if (out.size() + length > limit) {
      break;
    }
    if (c < 0x20 && c != '\t') {
      out += ' ';
    } else if (c == 0x7F) {
      out += ' ';
    } else {
      out.append(text.substr(i, length));
    }
    i += length;
  }
  return out;
}

} // namespace kiln::forensics
