#include "gates/residue.h"

#include <algorithm>
#include <cctype>

#include <fnmatch.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gates/image_env.h"
#include "util/diagnostic.h"
#include "util/strings.h"

namespace kiln {

namespace {

std::string_view base_name(std::string_view path) {
  return path.substr(path.rfind('/') + 1);
}

/// A line the config formats kiln reads take as a comment (`#`, `;`, apt's `//`): a setting
/// commented out sets nothing.
bool is_comment(std::string_view line) {
  line = trim(line);
  return line.starts_with('#') || line.starts_with(';') || line.starts_with("//");
}

/// What any config file says about the build host, line by line: a private address in a host
/// position, a secret by its shape.
void generic_findings(std::string_view content, std::vector<std::string>& out) {
  for (const std::string& text_line : split(content, '\n')) {
    std::string_view line = text_line;
    if (is_comment(line)) {
      continue;
    }
    for (const auto& address : host_addresses("", line)) {
      out.push_back(fmt::format("names {}, a {} address of the build network", address,
                                refused_address_kind(address).value_or("private")));
    }
    for (const auto& secret : secrets_in(line)) {
      out.push_back(fmt::format("holds {}, {}", secret.what, secret.shown));
    }
  }
}

/// `key = value` or `key=value` lines (npmrc, ccache.conf, .pypirc), comments skipped.
template <typename Each> void key_values(std::string_view content, Each each) {
  for (const std::string& text_line : split(content, '\n')) {
    std::string_view line = text_line;
    line = trim(line);
    if (line.empty() || line.front() == '#' || line.front() == ';') {
      continue;
    }
    std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      continue;
    }
    each(trim(line.substr(0, eq)), trim(line.substr(eq + 1)));
  }
}

/// A value npm expands from the environment when it reads the file (`${NPM_TOKEN}`): the file
/// names the secret, it does not hold it.
bool environment_reference(std::string_view value) {
  return value.starts_with("${") && value.ends_with("}") && value.find('}') == value.size() - 1;
}

void npm_findings(std::string_view content, std::vector<std::string>& out) {
  key_values(content, [&](std::string_view key, std::string_view value) {
    for (std::string_view secret_key : {"_authToken", "_auth", "_password"}) {
      if (key.ends_with(secret_key) && !value.empty() && !environment_reference(value)) {
        out.push_back(fmt::format("`{}` holds {}", key, redacted(value)));
      }
    }
  });
}

void pypirc_findings(std::string_view content, std::vector<std::string>& out) {
  key_values(content, [&](std::string_view key, std::string_view value) {
    if (lower(key) == "password" && !value.empty()) {
      out.push_back(fmt::format("`password` holds {}", redacted(value)));
    }
  });
}

/// A proxy setting, in either of apt's syntaxes: `Acquire::http::Proxy "http://…";` or
/// `Acquire { http { Proxy "http://…"; }; };`. `DIRECT` and `false` turn a proxy off.
/// A proxy setting, in any of apt's syntaxes: `Acquire::http::Proxy "http://…";`, for one host
/// `Acquire::http::Proxy::deb.example.org "http://…";`, or nested, `Acquire { http { Proxy
/// "http://…"; }; };`. `DIRECT` and `false` turn a proxy off.
void apt_findings(std::string_view content, std::vector<std::string>& out) {
  for (const std::string& text_line : split(content, '\n')) {
    if (is_comment(text_line)) {
      continue;
    }
    std::string text = lower(text_line);
    for (std::size_t at = text.find("proxy"); at != std::string::npos;
         at = text.find("proxy", at + 5)) {
      std::size_t open = at + 5;
      if (text.compare(open, 2, "::") == 0) { // a host's own proxy
        open = text.find_first_of(" \t\"", open + 2);
      }
      while (open < text.size() && (text[open] == ' ' || text[open] == '\t')) {
        ++open;
      }
      if (open >= text.size() || text[open] != '"') {
        continue;
      }
      std::size_t close = text.find('"', open + 1);
      if (close == std::string::npos) {
        continue;
      }
      std::string_view value = std::string_view(text_line).substr(open + 1, close - open - 1);
      if (value.empty() || lower(value) == "direct" || lower(value) == "false") {
        continue;
      }
      auto secrets = secrets_in(value);
      out.push_back(secrets.empty()
                        ? fmt::format("sets the build host's proxy, \"{}\"", printable(value))
                        : fmt::format("sets the build host's proxy, with {}, {}", secrets[0].what,
                                      secrets[0].shown));
    }
  }
}

void sccache_findings(std::string_view content, std::vector<std::string>& out) {
  for (const std::string& text_line : split(content, '\n')) {
    std::string_view line = text_line;
    line = trim(line);
    for (std::string_view backend :
         {"[cache.webdav]", "[cache.redis]", "[cache.s3]", "[cache.gcs]", "[cache.azure]",
          "[cache.memcached]", "[cache.gha]", "[cache.oss]", "[dist]"}) {
      if (line == backend) {
        out.push_back(fmt::format("configures the remote cache {}", backend));
      }
    }
  }
}

void ccache_findings(std::string_view content, std::vector<std::string>& out) {
  key_values(content, [&](std::string_view key, std::string_view value) {
    if ((key == "remote_storage" || key == "secondary_storage") && !value.empty()) {
      out.push_back(fmt::format("`{}` configures a remote cache", key));
    }
  });
}

void docker_findings(std::string_view content, std::vector<std::string>& out) {
  auto doc = nlohmann::json::parse(content, nullptr, false);
  if (!doc.is_object() || !doc.contains("auths") || !doc["auths"].is_object()) {
    return;
  }
  for (const auto& [registry, entry] : doc["auths"].items()) {
    if (!entry.is_object()) {
      continue;
    }
    for (const char* key : {"auth", "identitytoken", "registrytoken", "password"}) {
      if (entry.contains(key) && entry[key].is_string() && !entry[key].get<std::string>().empty()) {
        out.push_back(fmt::format("holds the `{}` of registry {}", key, printable(registry)));
        break;
      }
    }
  }
}

} // namespace

std::string_view residue_rule(std::string_view path) {
  std::string_view base = base_name(path);
  std::string_view dir = path.substr(0, path.size() - base.size());
  // A folder name whole, not a suffix of another (`foo.aws/credentials` is no AWS file).
  auto in = [&](std::string_view folder) {
    return dir == folder || dir.ends_with("/" + std::string(folder));
  };
  if (base == ".git-credentials") {
    return "git-credentials";
  }
  if (in(".ssh/") && base.starts_with("id_") && !base.ends_with(".pub")) {
    return "ssh-private-key";
  }
  if (base == ".netrc" || base == "_netrc") {
    return "netrc";
  }
  if (in(".aws/") && base == "credentials") {
    return "aws-credentials";
  }
  if (in(".docker/") && base == "config.json") {
    return "docker-credentials";
  }
  if (base == ".npmrc" || base == "npmrc") {
    return "npm-config";
  }
  if (base == "pip.conf" || base == "pip.ini" || base == ".pypirc") {
    return "pip-config";
  }
  if (path == "etc/apt/apt.conf" || dir == "etc/apt/apt.conf.d/") {
    return "apt-proxy";
  }
  if ((in("sccache/") && base == "config") ||
      (base.starts_with("sccache") && base.ends_with(".toml"))) {
    return "sccache-config";
  }
  if (base == "ccache.conf") {
    return "ccache-config";
  }
  if (base.ends_with(".pem") || base.ends_with(".key")) {
    return "private-key";
  }
  return {};
}

std::optional<std::string> residue_detail(std::string_view rule, std::string_view content) {
  std::vector<std::string> found;
  if (rule == "git-credentials" || rule == "ssh-private-key" || rule == "netrc" ||
      rule == "aws-credentials") {
    // A credentials file has no harmless content; an empty one holds nothing.
    if (trim(content).empty()) {
      return std::nullopt;
    }
    const char* what = rule == "git-credentials"   ? "Git credentials"
                       : rule == "ssh-private-key" ? "an SSH private key"
                       : rule == "netrc"           ? "netrc credentials"
                                                   : "AWS credentials";
    return fmt::format("{} of the build host ({} bytes)", what, content.size());
  }
  if (rule == "private-key") {
    if (content.find("-----BEGIN") != std::string_view::npos &&
        content.find("PRIVATE KEY-----") != std::string_view::npos) {
      return std::string("holds a PEM private key");
    }
    return std::nullopt;
  }
  if (rule == "npm-config") {
    npm_findings(content, found);
  } else if (rule == "pip-config") {
    pypirc_findings(content, found);
  } else if (rule == "apt-proxy") {
    apt_findings(content, found);
  } else if (rule == "sccache-config") {
    sccache_findings(content, found);
  } else if (rule == "ccache-config") {
    ccache_findings(content, found);
  } else if (rule == "docker-credentials") {
    docker_findings(content, found);
  }
  generic_findings(content, found);
  if (found.empty()) {
    return std::nullopt;
  }
  // One file with a thousand private addresses is one finding, not a thousand lines.
  constexpr std::size_t k_shown = 3;
  std::string detail = join(
      std::vector<std::string>(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(
                                                                  std::min(found.size(), k_shown))),
      "; ");
  if (found.size() > k_shown) {
    detail += fmt::format("; and {} more", found.size() - k_shown);
  }
  return detail;
}

std::string residue_message(const ResidueFinding& f) {
  std::string where = f.platform.empty() ? std::string() : f.platform + ": ";
  std::string layers = fmt::format("added in layer {} of {}", f.added, f.layers);
  if (f.deleted != 0) {
    layers += fmt::format(", deleted in layer {}: still published, every layer ships", f.deleted);
  }
  if (!f.allowed.empty()) {
    return fmt::format("{}{}: {}: {}; {}; allowed: {}", where, printable(f.path), f.rule, f.detail,
                       layers, f.allowed);
  }
  return fmt::format("{}{}: {}: {}; {}; keep it out of every layer (mount it for the RUN that "
                     "needs it: RUN --mount=type=secret,id=...,target={}), or allow it in "
                     "[gates] residue_allow with a reason",
                     where, printable(f.path), f.rule, f.detail, layers, printable(f.path));
}

const ResidueAllow* allowed_residue(const std::vector<ResidueAllow>& allow, std::string_view path) {
  std::string text(path);
  for (const auto& entry : allow) {
    if (fnmatch(entry.path.c_str(), text.c_str(), 0) == 0) {
      return &entry;
    }
  }
  return nullptr;
}

} // namespace kiln
