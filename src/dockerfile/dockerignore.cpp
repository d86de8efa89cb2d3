#include "dockerfile/dockerignore.h"

#include <algorithm>

#include <sys/stat.h>

#include "util/fs.h"
#include "util/strings.h"

namespace kiln {

std::string clean_path(std::string_view path) {
  bool rooted = !path.empty() && path.front() == '/';
  std::vector<std::string_view> parts;
  for (std::size_t pos = 0; pos <= path.size();) {
    auto slash = std::min(path.find('/', pos), path.size());
    auto part = path.substr(pos, slash - pos);
    pos = slash + 1;
    if (part.empty() || part == ".") {
      continue;
    }
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!rooted) {
        parts.push_back(part);
      }
      continue;
    }
    parts.push_back(part);
  }
  std::string out = rooted ? "/" : "";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    out += (i == 0 ? "" : "/");
    out += parts[i];
  }
  return out.empty() ? "." : out;
}

namespace {

using Token = DockerIgnore::Token;
using Pattern = DockerIgnore::Pattern;

Token token(Token::Kind kind, char c = 0) {
  Token t;
  t.kind = kind;
  t.c = c;
  return t;
}

// patternmatcher's compile: which of its four kinds the pattern is, and for a glob the tokens
// its regular expression is built from.
std::optional<Pattern> compile(std::string text) {
  Pattern p;
  p.text = std::move(text);
  const std::string& s = p.text;
  for (std::size_t pos = 0, i = 0; pos < s.size(); ++i) {
    char ch = s[pos++];
    if (ch == '*') {
      if (pos < s.size() && s[pos] == '*') {
        ++pos;
        if (pos < s.size() && s[pos] == '/') {
          ++pos;
        }
        if (pos >= s.size()) {
          if (p.kind == Pattern::exact) {
            p.kind = Pattern::prefix;
          } else {
            p.tokens.push_back(token(Token::any));
            p.kind = Pattern::glob;
          }
        } else {
          p.tokens.push_back(token(Token::dirs));
          p.kind = Pattern::glob;
        }
        if (i == 0) {
          p.kind = Pattern::suffix;
        }
      } else {
        p.tokens.push_back(token(Token::star));
        p.kind = Pattern::glob;
      }
    } else if (ch == '?') {
      p.tokens.push_back(token(Token::one));
      p.kind = Pattern::glob;
    } else if (ch == '\\') {
      if (pos >= s.size()) {
        return std::nullopt; // filepath.Match refuses a trailing escape
      }
      p.tokens.push_back(token(Token::literal, s[pos++]));
      p.kind = Pattern::glob;
    } else if (ch == '[') {
      Token set = token(Token::set);
      if (pos < s.size() && (s[pos] == '^' || s[pos] == '!')) {
        set.negated = true;
        ++pos;
      }
      bool closed = false;
      while (pos < s.size()) {
        char c = s[pos++];
        if (c == ']' && !set.members.empty()) {
          closed = true;
          break;
        }
        if (c == '\\' && pos < s.size()) {
          c = s[pos++];
        }
        set.members += c;
      }
      if (!closed) {
        return std::nullopt;
      }
      p.tokens.push_back(std::move(set));
      p.kind = Pattern::glob;
    } else {
      p.tokens.push_back(token(Token::literal, ch));
    }
  }
  return p;
}

bool in_set(const Token& t, char c) {
  bool found = false;
  for (std::size_t i = 0; i < t.members.size(); ++i) {
    if (i + 2 < t.members.size() && t.members[i + 1] == '-') {
      found = found || (c >= t.members[i] && c <= t.members[i + 2]);
      i += 2;
    } else {
      found = found || c == t.members[i];
    }
  }
  return found != t.negated;
}

// Whether tokens[t..] match path[i..] whole; `memo` holds 0 unknown, 1 no, 2 yes for each
// (t, i), so a pattern of stars costs tokens x path steps, never an exponential backtrack.
bool glob_match(const std::vector<Token>& tokens, std::string_view path, std::size_t t,
                std::size_t i, std::vector<char>& memo) {
  char& seen = memo[t * (path.size() + 1) + i];
  if (seen != 0) {
    return seen == 2;
  }
  bool result = false;
  if (t == tokens.size()) {
    result = i == path.size();
  } else {
    const Token& tok = tokens[t];
    switch (tok.kind) {
    case Token::literal:
      result = i < path.size() && path[i] == tok.c && glob_match(tokens, path, t + 1, i + 1, memo);
      break;
    case Token::one:
      result = i < path.size() && path[i] != '/' && glob_match(tokens, path, t + 1, i + 1, memo);
      break;
    case Token::set:
      result =
          i < path.size() && in_set(tok, path[i]) && glob_match(tokens, path, t + 1, i + 1, memo);
      break;
    case Token::star: // [^/]*
      for (std::size_t j = i;; ++j) {
        if (glob_match(tokens, path, t + 1, j, memo)) {
          result = true;
          break;
        }
        if (j >= path.size() || path[j] == '/') {
          break;
        }
      }
      break;
    case Token::any: // .*
      for (std::size_t j = i; j <= path.size() && !result; ++j) {
        result = glob_match(tokens, path, t + 1, j, memo);
      }
      break;
    case Token::dirs: // (.*/)?
      result = glob_match(tokens, path, t + 1, i, memo);
      for (std::size_t j = i; j < path.size() && !result; ++j) {
        result = path[j] == '/' && glob_match(tokens, path, t + 1, j + 1, memo);
      }
      break;
    }
  }
  seen = result ? 2 : 1;
  return result;
}

bool matches(const Pattern& p, std::string_view path) {
  switch (p.kind) {
  case Pattern::exact:
    return path == p.text;
  case Pattern::prefix:
    return path.starts_with(std::string_view(p.text).substr(0, p.text.size() - 2));
  case Pattern::suffix: {
    auto suffix = std::string_view(p.text).substr(2);
    return path.ends_with(suffix) ||
           (!suffix.empty() && suffix.front() == '/' && path == suffix.substr(1));
  }
  case Pattern::glob: {
    std::vector<char> memo((p.tokens.size() + 1) * (path.size() + 1), 0);
    return glob_match(p.tokens, path, 0, 0, memo);
  }
  }
  return false;
}

} // namespace

std::optional<DockerIgnore> DockerIgnore::parse(std::string_view text) {
  DockerIgnore ignore;
  if (text.starts_with("\xEF\xBB\xBF")) {
    text.remove_prefix(3);
  }
  for (std::size_t pos = 0; pos < text.size();) {
    auto nl = std::min(text.find('\n', pos), text.size());
    auto line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.starts_with("#")) {
      continue; // a comment only where the line starts with `#`, before any trimming
    }
    line = trim_space(line);
    if (line.empty()) {
      continue;
    }
    bool exclusion = line.front() == '!';
    if (exclusion) {
      line = trim_space(line.substr(1));
      if (line.empty()) {
        return std::nullopt; // `!` alone: "illegal exclusion pattern"
      }
    }
    std::string cleaned = clean_path(line);
    if (cleaned.size() > 1 && cleaned.front() == '/') {
      cleaned.erase(0, 1);
    }
    auto pattern = compile(std::move(cleaned));
    if (!pattern) {
      return std::nullopt;
    }
    pattern->exclusion = exclusion;
    ignore.m_exclusions = ignore.m_exclusions || exclusion;
    ignore.m_patterns.push_back(std::move(*pattern));
  }
  return ignore;
}

bool DockerIgnore::excludes(std::string_view path) const {
  std::string_view parent;
  if (auto slash = path.rfind('/'); slash != std::string_view::npos) {
    parent = path.substr(0, slash == 0 ? 1 : slash);
  }
  auto matches_or_parent = [&](const Pattern& p) {
    if (matches(p, path)) {
      return true;
    }
    // Each parent directory, shortest first: an ignored directory takes its files with it.
    for (std::size_t pos = 0; !parent.empty() && pos <= parent.size();) {
      auto slash = std::min(parent.find('/', pos), parent.size());
      if (matches(p, parent.substr(0, slash))) {
        return true;
      }
      pos = slash + 1;
    }
    return false;
  };
  // The last pattern that matches decides; one that could not change the verdict is skipped.
  bool excluded = false;
  for (const auto& p : m_patterns) {
    if (p.exclusion == excluded && matches_or_parent(p)) {
      excluded = !p.exclusion;
    }
  }
  return excluded;
}

bool DockerIgnore::excludes_root() const {
  return std::any_of(m_patterns.begin(), m_patterns.end(), [](const Pattern& p) {
    return !p.exclusion && (p.text == "*" || p.text == "**" || p.text == "**/*");
  });
}

namespace {

// A stat first: most builds have no such file, and read_file's failure spells out its reason.
std::optional<std::string> read_if_file(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return std::nullopt;
  }
  if (auto text = read_file(path)) {
    return std::move(*text);
  }
  return std::nullopt;
}

} // namespace

std::optional<std::string> read_dockerignore(const std::filesystem::path& dockerfile,
                                             const std::filesystem::path& context) {
  auto beside = dockerfile;
  beside += ".dockerignore";
  if (auto text = read_if_file(beside)) {
    return text;
  }
  return read_if_file((context.empty() ? dockerfile.parent_path() : context) / ".dockerignore");
}

} // namespace kiln
