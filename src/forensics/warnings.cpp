#include "forensics/warnings.h"

#include <algorithm>

#include "util/strings.h"

namespace kiln::forensics {

namespace {

constexpr size_t k_max_classes = 256;
constexpr std::string_view k_other_class = "-W(other)";

} // namespace

const std::vector<std::string>& default_noise_classes() {
  static const std::vector<std::string> classes = {"-Wunused-parameter",
                                                   "-Wdocumentation-unknown-command",
                                                   "-Wdeprecated-copy",
                                                   "-Wdeprecated-copy-with-user-provided-copy",
                                                   "-Wundef",
                                                   "-Wmissing-field-initializers",
                                                   "-Wunused-command-line-argument"};
  return classes;
}

const std::vector<std::string>& default_signal_classes() {
  static const std::vector<std::string> classes = {
      "-Winconsistent-missing-override", "-Wundefined-var-template", "-Winconsistent-dllimport",
      "-Winfinite-recursion"};
  return classes;
}

WarningCounts& WarningCounts::operator+=(const WarningCounts& other) {
  total += other.total;
  noise += other.noise;
  signal += other.signal;
  unclassified += other.unclassified;
  for (const auto& [klass, count] : other.classes) {
    classes[klass] += count;
  }
  return *this;
}

std::optional<WarningLine> parse_warning_line(std::string_view text) {
  size_t at = text.find(": warning:");
  if (at == std::string_view::npos || at == 0) {
    return std::nullopt;
  }
  WarningLine line;
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  if (text.ends_with(']')) {
    size_t open = text.rfind('[');
    if (open != std::string_view::npos && open > at) {
      std::string_view inside = text.substr(open + 1, text.size() - open - 2);
      inside = inside.substr(0, std::min(inside.find(','), inside.size()));
      inside = inside.substr(0, std::min(inside.find('='), inside.size()));
      if (inside.size() > 2 && inside.starts_with("-W") && inside != "-Werror") {
        line.klass = inside;
      }
    }
  }
  return line;
}

std::string normalize_class(std::string_view name) {
  name = trim(name);
  if (name.empty()) {
    return {};
  }
  if (name.starts_with("-W")) {
    return std::string(name);
  }
  if (name.starts_with("W")) {
    return "-" + std::string(name);
  }
  return "-W" + std::string(name);
}

WarningClassifier::WarningClassifier(const std::vector<std::string>& noise,
                                     const std::vector<std::string>& signal) {
  for (const auto& name : noise) {
    if (auto klass = normalize_class(name); !klass.empty()) {
      m_noise.insert(klass);
    }
  }
  for (const auto& name : signal) {
    if (auto klass = normalize_class(name); !klass.empty()) {
      m_signal.insert(klass);
    }
  }
}

WarningClassifier::Kind WarningClassifier::kind_of(std::string_view klass) const {
  for (size_t i = 0; i < m_recent_count; ++i) {
    if (m_recent[i].klass == klass) {
      return m_recent[i].kind;
    }
  }
  Kind kind = m_noise.find(klass) != m_noise.end()     ? Kind::noise
              : m_signal.find(klass) != m_signal.end() ? Kind::signal
                                                       : Kind::other;
  Recent& slot = m_recent[m_recent_next];
  slot.klass.assign(klass);
  slot.kind = kind;
  m_recent_next = (m_recent_next + 1) % k_recent;
  m_recent_count = std::max(m_recent_count, m_recent_next == 0 ? k_recent : m_recent_next);
  return kind;
}

void WarningClassifier::count(std::string_view klass, WarningCounts& counts) const {
  ++counts.total;
  if (klass.empty()) {
    ++counts.unclassified;
    return;
  }
  Kind kind = kind_of(klass);
  if (kind == Kind::noise) {
    ++counts.noise;
  } else if (kind == Kind::signal) {
    ++counts.signal;
  }
  auto found = counts.classes.find(klass);
  if (found != counts.classes.end()) {
    ++found->second;
  } else if (counts.classes.size() < k_max_classes) {
    counts.classes.emplace(std::string(klass), 1);
  } else {
    ++counts.classes[std::string(k_other_class)];
  }
}

} // namespace kiln::forensics
