#include "util/pattern.h"

#include <stdexcept>

#include <re2/re2.h>

namespace kiln {

tl::expected<Pattern, PatternError> Pattern::compile(std::string_view pattern,
                                                     PatternOptions options) {
  RE2::Options re_options;
  re_options.set_log_errors(false);
  re_options.set_case_sensitive(!options.case_insensitive);
  auto re =
      std::make_shared<const RE2>(re2::StringPiece(pattern.data(), pattern.size()), re_options);
  if (!re->ok()) {
    PatternError error;
    const std::string& part = re->error_arg();
    // RE2 says "missing ): (unclosed"; the part it names is reported as an offset instead.
    error.message = re->error();
    if (!part.empty() && error.message.ends_with(": " + part)) {
      error.message.resize(error.message.size() - part.size() - 2);
    }
    size_t at = part.empty() ? std::string_view::npos : pattern.find(part);
    error.offset = at == std::string_view::npos ? 0 : at;
    return tl::unexpected(std::move(error));
  }
  Pattern compiled;
  compiled.m_source = std::string(pattern);
  compiled.m_re = std::move(re);
  return compiled;
}

Pattern Pattern::builtin(std::string_view pattern, PatternOptions options) {
  auto compiled = compile(pattern, options);
  if (!compiled) {
    throw std::logic_error("kiln's own pattern '" + std::string(pattern) +
                           "' does not compile: " + compiled.error().message);
  }
  return std::move(*compiled);
}

bool Pattern::search(std::string_view text) const {
  return RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *m_re);
}

std::optional<std::string_view> Pattern::find(std::string_view text) const {
  re2::StringPiece match;
  if (!m_re->Match(re2::StringPiece(text.data(), text.size()), 0, text.size(), RE2::UNANCHORED,
                   &match, 1)) {
    return std::nullopt;
  }
  return std::string_view(match.data(), match.size());
}

std::string Pattern::replace_all(std::string_view text, std::string_view rewrite) const {
  std::string out(text);
  RE2::GlobalReplace(&out, *m_re, re2::StringPiece(rewrite.data(), rewrite.size()));
  return out;
}

} // namespace kiln
