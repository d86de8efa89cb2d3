#include "disk/buildkit_daemon.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "util/fs.h"
#include "util/strings.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view k_default_address = "unix:///run/buildkit/buildkitd.sock";
// A buildkitd.toml is a few KB; a cap keeps a wrong path from being read whole.
constexpr uint64_t k_config_limit = 1 << 20;

/// The value of flag `name` (`--name V`, `--name=V`, or Go's single-dash forms), the last one
/// when it is given twice, as Go's flag parsing keeps it.
std::optional<std::string> flag_value(const std::vector<std::string>& argv, std::string_view name) {
  std::optional<std::string> value;
  for (size_t i = 1; i < argv.size(); ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      break;
    }
    if (arg.starts_with("--")) {
      arg.remove_prefix(2);
    } else if (arg.starts_with("-")) {
      arg.remove_prefix(1);
    } else {
      continue;
    }
    if (arg == name && i + 1 < argv.size()) {
      value = argv[++i];
    } else if (arg.starts_with(name) && arg.size() > name.size() && arg[name.size()] == '=') {
      value = std::string(arg.substr(name.size() + 1));
    }
  }
  return value;
}

std::string env_or(const std::map<std::string, std::string>& env, const std::string& name,
                   const std::string& fallback) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? fallback : it->second;
}

std::vector<std::string> split_nul(std::string_view text) {
  std::vector<std::string> parts;
  while (!text.empty()) {
    size_t end = text.find('\0');
    parts.emplace_back(text.substr(0, end));
    if (end == std::string_view::npos) {
      break;
    }
    text.remove_prefix(end + 1);
  }
  return parts;
}

/// The pid of the process listening on the unix socket `path` (its credentials when it
/// listened), or why it cannot be had.
tl::expected<pid_t, std::string> socket_peer(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return tl::unexpected(fmt::format("the socket path {} is too long", path));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  // Non-blocking: a daemon that stopped accepting (a full backlog) fails the connect at once
  // instead of holding whoever asks where its store is.
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return tl::unexpected(fmt::format("cannot open a socket: {}", std::strerror(errno)));
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    int error = errno;
    ::close(fd);
    return tl::unexpected(fmt::format("cannot connect to {}: {}", path, std::strerror(error)));
  }
  ucred cred{};
  socklen_t size = sizeof(cred);
  int got = ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size);
  int error = errno;
  ::close(fd);
  if (got != 0) {
    return tl::unexpected(
        fmt::format("cannot ask {} who listens on it: {}", path, std::strerror(error)));
  }
  if (cred.pid <= 0) {
    return tl::unexpected(fmt::format("the daemon at {} runs in a pid namespace kiln cannot see "
                                      "into",
                                      path));
  }
  return cred.pid;
}

} // namespace

tl::expected<fs::path, std::string>
buildkitd_root(const BuildkitdProcess& daemon,
               const std::function<tl::expected<std::string, std::string>(const fs::path&)>& read,
               std::string* how) {
  auto said = [&](std::string text) {
    if (how != nullptr) {
      *how = std::move(text);
    }
  };
  if (auto root = flag_value(daemon.argv, "root"); root && !root->empty()) {
    said("its --root");
    return fs::path(*root);
  }
  std::string home = env_or(daemon.env, "HOME", "");
  // buildkitd's own rule: in a user namespace the config is the user's; the rootless defaults
  // apply only when it also runs as a user other than root.
  bool rootless = daemon.in_user_namespace && env_or(daemon.env, "USER", "root") != "root";
  auto flag_config = flag_value(daemon.argv, "config");
  fs::path config = flag_config ? fs::path(*flag_config)
                    : daemon.in_user_namespace
                        ? fs::path(env_or(daemon.env, "XDG_CONFIG_HOME", home + "/.config")) /
                              "buildkit" / "buildkitd.toml"
                        : fs::path("/etc/buildkit/buildkitd.toml");
  auto text = read(config);
  if (!text && flag_config) {
    return tl::unexpected(fmt::format("cannot read its config file: {}", text.error()));
  }
  if (text) {
    toml::table table;
    try {
      table = toml::parse(*text, config.string());
    } catch (const toml::parse_error& error) {
      return tl::unexpected(
          fmt::format("cannot read its config file {}: {}", config.string(), error.what()));
    }
    if (auto root = table["root"].value<std::string>(); root && !root->empty()) {
      said(fmt::format("root in {}", config.string()));
      return fs::path(*root);
    }
  }
  said("BuildKit's default");
  if (rootless) {
    if (home.empty() && env_or(daemon.env, "XDG_DATA_HOME", "").empty()) {
      return tl::unexpected(std::string("it runs rootless and its environment names no home"));
    }
    return fs::path(env_or(daemon.env, "XDG_DATA_HOME", home + "/.local/share")) / "buildkit";
  }
  return fs::path("/var/lib/buildkit");
}

tl::expected<StoreLocation, std::string> locate_buildkitd(const BuildkitAddress& address) {
  std::string value = address.address.empty() ? std::string(k_default_address) : address.address;
  if (!value.starts_with("unix://")) {
    return tl::unexpected(fmt::format("{} is not a local unix socket, and BuildKit does not say "
                                      "where its store is",
                                      address.shown()));
  }
  auto pid = socket_peer(value.substr(7));
  if (!pid) {
    return tl::unexpected(pid.error());
  }
  fs::path proc = fs::path("/proc") / std::to_string(*pid);
  auto cmdline = read_proc_file(proc / "cmdline");
  if (!cmdline) {
    return tl::unexpected(cmdline.error());
  }
  BuildkitdProcess daemon;
  daemon.argv = split_nul(*cmdline);
  // Another listener (systemd's socket activation, a proxy) says nothing of the daemon's flags.
  if (daemon.argv.empty() ||
      fs::path(daemon.argv[0]).filename().string().find("buildkitd") == std::string::npos) {
    return tl::unexpected(fmt::format("the process listening on {} (pid {}, {}) is not buildkitd",
                                      value.substr(7), *pid,
                                      daemon.argv.empty() ? "?" : daemon.argv[0]));
  }
  // The environment and namespaces of another user's process are not readable: then the
  // defaults of a rootful daemon apply, which is what such a daemon uses unless it is rootless.
  if (auto environ = read_proc_file(proc / "environ")) {
    for (const std::string& entry : split_nul(*environ)) {
      size_t eq = entry.find('=');
      if (eq != std::string::npos) {
        daemon.env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
      }
    }
  }
  if (auto map = read_proc_file(proc / "uid_map")) {
    // The initial user namespace maps every uid to itself in one line.
    std::vector<std::string> fields;
    for (const std::string& field : split(trim(*map), ' ')) {
      if (!field.empty()) {
        fields.push_back(field);
      }
    }
    daemon.in_user_namespace = fields != std::vector<std::string>{"0", "0", "4294967295"};
  }

  // Every path the daemon names is its own: seen through its root (or, relative, its cwd).
  fs::path seen_root = proc / "root";
  struct stat info {};
  if (::stat(seen_root.c_str(), &info) != 0) {
    return tl::unexpected(fmt::format("cannot look into the filesystem of buildkitd (pid {}): {}",
                                      *pid, std::strerror(errno)));
  }
  auto through = [&](const fs::path& path) {
    return path.is_absolute() ? seen_root / path.relative_path() : proc / "cwd" / path;
  };
  std::string how;
  auto root = buildkitd_root(
      daemon, [&](const fs::path& path) { return read_file(through(path), k_config_limit); }, &how);
  if (!root) {
    return tl::unexpected(fmt::format("buildkitd (pid {}): {}", *pid, root.error()));
  }
  return StoreLocation{through(*root), fmt::format("the buildkit store {} (buildkitd pid {}, {})",
                                                   root->string(), *pid, how)};
}

} // namespace kiln
