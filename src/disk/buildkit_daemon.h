#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "disk/store.h"
#include "engine/buildkit_engine.h"

namespace kiln {

/// What kiln can see of a running buildkitd: its command line and environment, and whether it
/// runs in a user namespace (rootless BuildKit does).
struct BuildkitdProcess {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  bool in_user_namespace = false;
};

/// Where that buildkitd keeps its store, as buildkitd itself decides: `--root`, else `root` in
/// its config file (`--config`, else /etc/buildkit/buildkitd.toml, or
/// ~/.config/buildkit/buildkitd.toml in a user namespace), else /var/lib/buildkit (rootless:
/// ~/.local/share/buildkit). `read` reads a file as the daemon sees it. The path is the
/// daemon's; `how` receives which rule gave it.
tl::expected<std::filesystem::path, std::string> buildkitd_root(
    const BuildkitdProcess& daemon,
    const std::function<tl::expected<std::string, std::string>(const std::filesystem::path&)>& read,
    std::string* how = nullptr);

/// Where the buildkitd answering at `address` keeps its store, or why that cannot be known.
/// BuildKit's API names no root (`debug info` gives the version, `debug workers` labels and GC
/// policy), so only a daemon on a local unix socket is located: the socket's peer credentials
/// give its pid, /proc its command line, and the path is resolved through /proc/<pid>/root so
/// a daemon in a container with its socket mounted out is measured on its own disk. A tcp://
/// or other remote address cannot be located, and its store is never pruned for a local floor.
tl::expected<StoreLocation, std::string> locate_buildkitd(const BuildkitAddress& address);

} // namespace kiln
