#include "driver/leftovers.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "driver/build_request.h"
#include "driver/records.h"
#include "util/process.h"

namespace kiln {

namespace {

std::string temp_prefix(const Chain& chain) {
  return "kiln-" + checkout_key(chain) + "-";
}

std::filesystem::path temp_base() {
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir != nullptr && *tmpdir != '\0' ? std::filesystem::path(tmpdir)
                                              : std::filesystem::path("/var/tmp");
}

} // namespace

std::filesystem::path run_temp_dir(const Chain& chain, const std::string& run_id) {
  return temp_base() / (temp_prefix(chain) + run_id);
}

Leftovers find_leftovers(const Chain& chain, std::string_view engine,
                         const std::string& except_run) {
  Leftovers found;
  const std::string prefix = temp_prefix(chain);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(temp_base(), ec)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with(prefix) && name != prefix + except_run && entry.is_directory(ec)) {
      found.temp_dirs.push_back(entry.path());
    }
  }
  std::sort(found.temp_dirs.begin(), found.temp_dirs.end());
  if (engine != "buildah") {
    return found;
  }
  CapturedRun listed = run_captured({"buildah", "containers", "--json"});
  if (!listed.exit.ok()) {
    found.error = "buildah containers --json: " + listed.failure();
    return found;
  }
  nlohmann::json containers = nlohmann::json::parse(listed.output, nullptr, false);
  if (!containers.is_array()) {
    // buildah prints `null` when it has none.
    return found;
  }
  const std::string mark = "-kiln-" + checkout_key(chain);
  for (const auto& c : containers) {
    if (!c.is_object() || !c.value("builder", false)) {
      continue;
    }
    std::string image = c.value("imagename", "");
    if (image.find(mark) != std::string::npos) {
      found.containers.push_back({c.value("id", ""), c.value("containername", ""), image});
    }
  }
  return found;
}

bool latest_run_crashed(const std::filesystem::path& records) {
  auto text = read_file(records / "latest" / "manifest.json", k_manifest_read_limit);
  if (!text) {
    return false;
  }
  auto manifest = nlohmann::json::parse(*text, nullptr, false);
  return manifest.is_object() && manifest.value("status", "") == "crashed";
}

std::vector<std::string> describe_leftovers(const Leftovers& leftovers) {
  std::vector<std::string> lines;
  for (const auto& c : leftovers.containers) {
    lines.push_back(fmt::format("buildah working container {} ({}) from {}", c.name,
                                c.id.substr(0, 12), c.image));
  }
  for (const auto& dir : leftovers.temp_dirs) {
    lines.push_back("temporary folder " + dir.string());
  }
  return lines;
}

std::vector<std::string> remove_leftovers(const Leftovers& leftovers) {
  std::vector<std::string> lines;
  if (!leftovers.containers.empty()) {
    std::vector<std::string> argv = {"buildah", "rm", "--"};
    for (const auto& c : leftovers.containers) {
      argv.push_back(c.id);
    }
    CapturedRun removed = run_captured(argv);
    for (const auto& c : leftovers.containers) {
      lines.push_back(removed.exit.ok()
                          ? fmt::format("leftovers: removed buildah working container {} ({}) "
                                        "from {}",
                                        c.name, c.id.substr(0, 12), c.image)
                          : fmt::format("leftovers: buildah working container {} ({}) stays: {}",
                                        c.name, c.id.substr(0, 12), removed.failure()));
    }
  }
  for (const auto& dir : leftovers.temp_dirs) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    lines.push_back(
        ec ? fmt::format("leftovers: temporary folder {} stays: {}", dir.string(), ec.message())
           : fmt::format("leftovers: removed temporary folder {}", dir.string()));
  }
  return lines;
}

} // namespace kiln
