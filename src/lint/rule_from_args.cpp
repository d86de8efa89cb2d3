#include <algorithm>
#include <array>
#include <map>
#include <string>

#include <fmt/format.h>

#include "lint/rules.h"
#include "util/strings.h"

namespace kiln {
namespace {} // namespace

const std::map<std::string, std::string>& predefined_args() {
  static const std::map<std::string, std::string> args = {{"BUILDPLATFORM", "linux/amd64"},
                                                          {"BUILDOS", "linux"},
                                                          {"BUILDOSVERSION", ""},
                                                          {"BUILDARCH", "amd64"},
                                                          {"BUILDVARIANT", ""},
                                                          {"TARGETPLATFORM", "linux/amd64"},
                                                          {"TARGETOS", "linux"},
                                                          {"TARGETOSVERSION", ""},
                                                          {"TARGETARCH", "amd64"},
                                                          {"TARGETVARIANT", ""},
                                                          {"TARGETSTAGE", "default"}};
  return args;
}

namespace {

bool is_alnum_lower(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// distribution/reference's path component: [a-z0-9]+ joined by `.`, `_`, `__` or runs of `-`.
bool valid_component(std::string_view c) {
  if (c.empty() || !is_alnum_lower(c.front()) || !is_alnum_lower(c.back())) {
    return false;
  }
  for (std::size_t i = 0; i < c.size();) {
    if (is_alnum_lower(c[i])) {
      ++i;
      continue;
    }
    std::size_t run = i;
    while (run < c.size() && !is_alnum_lower(c[run])) {
      ++run;
    }
    auto sep = c.substr(i, run - i);
    bool dashes = std::all_of(sep.begin(), sep.end(), [](char s) { return s == '-'; });
    if (!(sep == "." || sep == "_" || sep == "__" || dashes)) {
      return false;
    }
    i = run;
  }
  return true;
}

bool is_alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

// host[:port], host a dotted name of [a-zA-Z0-9-] labels or a bracketed IPv6 address.
bool valid_domain(std::string_view d) {
  std::string_view host = d;
  if (!d.empty() && d.front() == '[') {
    auto close = d.find(']');
    if (close == std::string_view::npos || close < 2) {
      return false;
    }
    auto inside = d.substr(1, close - 1);
    if (!std::all_of(inside.begin(), inside.end(), [](char c) {
          return std::isxdigit(static_cast<unsigned char>(c)) || c == ':';
        })) {
      return false;
    }
    host = {};
    d = d.substr(close + 1);
  } else {
    auto colon = d.find(':');
    host = d.substr(0, colon);
    d = colon == std::string_view::npos ? std::string_view{} : d.substr(colon);
    for (std::size_t pos = 0; pos <= host.size();) {
      auto dot = std::min(host.find('.', pos), host.size());
      auto label = host.substr(pos, dot - pos);
      if (label.empty() || !is_alnum(label.front()) || !is_alnum(label.back()) ||
          !std::all_of(label.begin(), label.end(),
                       [](char c) { return is_alnum(c) || c == '-'; })) {
        return false;
      }
      pos = dot + 1;
    }
  }
  if (d.empty()) {
    return true;
  }
  auto port = d.substr(1);
  return d.front() == ':' && !port.empty() &&
         std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool valid_tag(std::string_view t) {
  auto word = [](char c) { return is_alnum(c) || c == '_'; };
  return !t.empty() && t.size() <= 128 && word(t.front()) &&
         std::all_of(t.begin(), t.end(), [&](char c) { return word(c) || c == '.' || c == '-'; });
}

bool valid_digest(std::string_view d) {
  auto colon = d.find(':');
  if (colon == std::string_view::npos || colon == 0) {
    return false;
  }
  auto algorithm = d.substr(0, colon);
  auto hex = d.substr(colon + 1);
  return std::isalpha(static_cast<unsigned char>(algorithm.front())) &&
         std::all_of(
             algorithm.begin(), algorithm.end(),
             [](char c) { return is_alnum(c) || c == '-' || c == '_' || c == '+' || c == '.'; }) &&
         hex.size() >= 32 && std::all_of(hex.begin(), hex.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c));
         });
}

// What reference.ParseNormalizedNamed accepts, the check BuildKit makes of a base name.
bool valid_image_reference(std::string_view s) {
  if (s.empty() || (s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
                      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                    }))) {
    return false;
  }
  // A first part with `.` or `:`, `localhost`, or an upper-case letter names a registry.
  std::string_view domain;
  std::string_view remainder = s;
  if (auto slash = s.find('/'); slash != std::string_view::npos) {
    auto first = s.substr(0, slash);
    if (first.find_first_of(".:") != std::string_view::npos || first == "localhost" ||
        !is_lower(first)) {
      domain = first;
      remainder = s.substr(slash + 1);
    }
  }
  if (!is_lower(remainder.substr(0, remainder.find(':')))) {
    return false; // "repository name must be lowercase"
  }
  if (!domain.empty() && !valid_domain(domain)) {
    return false;
  }
  std::string_view name = remainder;
  if (auto at = name.find('@'); at != std::string_view::npos) {
    if (!valid_digest(name.substr(at + 1))) {
      return false;
    }
    name = name.substr(0, at);
  }
  if (auto colon = name.rfind(':'); colon != std::string_view::npos) {
    if (!valid_tag(name.substr(colon + 1))) {
      return false;
    }
    name = name.substr(0, colon);
  }
  if (domain.size() + 1 + name.size() > 255) {
    return false;
  }
  for (std::size_t pos = 0; pos <= name.size();) {
    auto slash = std::min(name.find('/', pos), name.size());
    if (!valid_component(name.substr(pos, slash - pos))) {
      return false;
    }
    pos = slash + 1;
  }
  return true;
}

constexpr std::array k_known_os = {
    "aix",   "android", "darwin", "dragonfly", "freebsd", "hurd",    "illumos", "ios",     "js",
    "linux", "nacl",    "netbsd", "openbsd",   "plan9",   "solaris", "wasip1",  "windows", "zos"};

// containerd's architecture names and the aliases platforms.Normalize folds into them.
std::string normalize_arch(const std::string& arch) {
  if (arch == "i386") {
    return "386";
  }
  if (arch == "x86_64" || arch == "x86-64") {
    return "amd64";
  }
  if (arch == "aarch64") {
    return "arm64";
  }
  if (arch == "armhf" || arch == "armel") {
    return "arm";
  }
  return arch;
}

constexpr std::array k_known_arch = {
    "386",     "amd64",   "amd64p32", "arm",    "armbe",   "arm64",    "arm64be", "ppc64",
    "ppc64le", "loong64", "mips",     "mipsle", "mips64",  "mips64le", "ppc",     "riscv",
    "riscv64", "s390",    "s390x",    "sparc",  "sparc64", "wasm"};

struct Platform {
  std::string os;
  std::string arch;
};

// containerd's platforms.Parse, as far as this rule needs it: `os[/arch[/variant]]`, or one
// word that is a known OS or architecture; nullopt where it fails (the build fails there too,
// with its own error).
std::optional<Platform> parse_platform(std::string_view text) {
  std::vector<std::string> parts;
  for (std::size_t pos = 0; pos <= text.size();) {
    auto slash = std::min(text.find('/', pos), text.size());
    auto part = text.substr(pos, slash - pos);
    if (part.empty() || !std::all_of(part.begin(), part.end(), [](char c) {
          return is_alnum(c) || c == '_' || c == '.' || c == '-';
        })) {
      return std::nullopt;
    }
    parts.push_back(lower(part));
    pos = slash + 1;
  }
  if (parts.empty() || parts.size() > 3) {
    return std::nullopt;
  }
  auto known = [](const auto& list, const std::string& word) {
    return std::find(list.begin(), list.end(), word) != list.end();
  };
  if (parts.size() == 1) {
    std::string os = parts[0] == "macos" ? "darwin" : parts[0];
    if (known(k_known_os, os)) {
      return Platform{os, "amd64"};
    }
    std::string arch = normalize_arch(parts[0]);
    if (known(k_known_arch, arch)) {
      return Platform{"linux", arch};
    }
    return std::nullopt;
  }
  return Platform{parts[0] == "macos" ? "darwin" : parts[0], normalize_arch(parts[1])};
}

} // namespace

// BuildKit expands a FROM's base and --platform with the global ARGs (those before the first
// FROM) and its own platform ARGs only.
//
// undefined-arg-in-from: a name no global ARG declares expands empty, and `FROM
// --platform=$BULIDPLATFORM` silently builds for the default platform.
// invalid-default-arg-in-from: with no --build-arg given, the defaults must still make a
// valid image name, or a plain `docker build` fails.
// redundant-target-platform: `--platform=$TARGETPLATFORM` is what FROM does anyway.
// from-platform-flag-const-disallowed: a constant platform pins a stage to one architecture in a
// multi-platform build, unless the stage's name says it is that platform's on purpose.
void check_from_args(const LintContext& ctx, std::vector<LintFinding>& out) {
  const char escape = ctx.dockerfile.escape;
  // Most files' FROMs name an image outright: then there is nothing to expand, and the global
  // ARGs' values are not worth working out.
  bool expands = std::any_of(ctx.stages.begin(), ctx.stages.end(), [](const auto& stage) {
    const Instruction& from = *stage.front();
    return (!from.args.empty() && from.args[0].find('$') != std::string::npos) ||
           std::any_of(from.flags.begin(), from.flags.end(), [](const Flag& f) {
             return f.name == "platform" && f.value.find('$') != std::string::npos;
           });
  });
  std::map<std::string, std::string> vars;
  std::vector<std::string> declared; // global ARG names, suggestions' candidates
  NameSet declared_set;
  std::vector<std::string_view> candidates;
  if (expands) {
    vars = predefined_args();
    for (const auto& ins : ctx.dockerfile.instructions) {
      if (keyword_is(ins, "from")) {
        break;
      }
      if (!keyword_is(ins, "arg")) {
        continue;
      }
      for (std::size_t i = 0; i + 1 < ins.args.size(); i += 2) {
        declared.push_back(ins.args[i]);
        if (arg_sets_value(ins, i)) {
          vars[ins.args[i]] = expand_words(ins.args[i + 1], vars, escape).value;
        }
      }
    }
    for (const auto& name : declared) {
      declared_set.insert(name);
    }
    candidates.assign(declared.begin(), declared.end());
    for (const auto& [name, value] : predefined_args()) {
      candidates.push_back(name);
    }
  }
  long budget = k_suggest_budget;
  auto undeclared = [&](const Instruction& from, std::string_view word) {
    if (word.find('$') == std::string_view::npos) {
      return;
    }
    for (const auto& name : expand_words(word, vars, escape).unset) {
      if (declared_set.contains(name)) {
        continue; // declared without a default: empty on purpose, as `ARG DEBUG` is
      }
      std::string message = fmt::format("FROM argument '{}' is not declared", name);
      if (auto match = suggest_name(name, candidates, budget); !match.empty()) {
        message += fmt::format(" (did you mean {}?)", match);
      }
      out.push_back(make_finding(ctx, from, 0, "undefined-arg-in-from", std::move(message)));
    }
  };
  for (const auto& stage : ctx.stages) {
    const Instruction& from = *stage.front();
    if (from.args.empty()) {
      continue;
    }
    const std::string& base = from.args[0];
    undeclared(from, base);
    auto platform = std::find_if(from.flags.begin(), from.flags.end(),
                                 [](const Flag& f) { return f.name == "platform"; });
    if (platform != from.flags.end()) {
      const std::string& value = platform->value;
      undeclared(from, value);
      auto used = expand_words(value, {}, escape).unset; // every name it references
      auto expanded = expand_words(value, vars, escape).value;
      if (used.size() == 1 && used[0] == "TARGETPLATFORM" && expanded == vars["TARGETPLATFORM"]) {
        out.push_back(make_finding(ctx, from, 0, "redundant-target-platform",
                                   fmt::format("Setting platform to predefined {} in FROM is "
                                               "redundant as this is the default behavior",
                                               value)));
      } else if (used.empty()) {
        std::string stage_name = from.args.size() == 3 ? lower(from.args[2]) : "";
        if (auto p = parse_platform(expanded); p && stage_name.find(p->os) == std::string::npos &&
                                               stage_name.find(p->arch) == std::string::npos) {
          out.push_back(
              make_finding(ctx, from, 0, "from-platform-flag-const-disallowed",
                           fmt::format("FROM --platform flag should not use constant value {}",
                                       go_quote(expanded))));
        }
      }
    }
    bool valid = base.find('$') == std::string::npos
                     ? valid_image_reference(base)
                     : valid_image_reference(expand_words(base, vars, escape).value);
    if (!valid) {
      out.push_back(make_finding(
          ctx, from, arg_column(from, 0), "invalid-default-arg-in-from",
          fmt::format("Default value for ARG {} results in empty or invalid base image name",
                      base)));
    }
  }
}

} // namespace kiln
