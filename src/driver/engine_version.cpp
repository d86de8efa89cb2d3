#include "driver/engine_version.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "chain/loader.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kiln {

namespace {

// Two lines: the key, the version text.
std::filesystem::path remembered_path(const std::filesystem::path& records) {
  return records / "engine-version";
}

constexpr uint64_t k_read_limit = 64 * 1024;

// The text kept under `key`: the file's second and last line, when its first is `key`.
std::optional<std::string> remembered_text(const std::filesystem::path& records,
                                           const std::string& key) {
  if (key.empty()) {
    return std::nullopt;
  }
  auto file = read_file(remembered_path(records), k_read_limit);
  if (!file || !file->starts_with(key + "\n") || !file->ends_with('\n')) {
    return std::nullopt;
  }
  std::string text = file->substr(key.size() + 1, file->size() - key.size() - 2);
  if (text.empty() || text.find('\n') != std::string::npos) {
    return std::nullopt;
  }
  return text;
}

/// A platform the daemon does not list, one message per platform naming its stages: BuildKit
/// builds such a request anyway, running the host's own binaries where no emulator is, and
/// labels the result with the platform asked for (an amd64 daemon built "linux/s390x" with
/// x86-64 binaries in it). What cannot be read is a warning: the builds will tell.
std::vector<std::string> platform_problems(const Engine& engine, const std::string& host,
                                           const std::vector<BuildRequest>& requests,
                                           std::vector<std::string>& warnings) {
  std::vector<std::pair<std::string, std::vector<std::string>>> wanted; // platform, its stages
  for (const auto& request : requests) {
    if (request.platform.empty()) {
      continue;
    }
    auto known = std::find_if(wanted.begin(), wanted.end(),
                              [&](const auto& entry) { return entry.first == request.platform; });
    if (known == wanted.end()) {
      wanted.push_back({request.platform, {}});
      known = wanted.end() - 1;
    }
    known->second.push_back(request.stage);
  }
  if (wanted.empty()) {
    return {};
  }
  auto listed = engine.platforms();
  if (!listed) {
    warnings.push_back(fmt::format("the platforms the builder offers are not known ({}), so "
                                   "{} cannot be checked against them",
                                   listed.error(), wanted.front().first));
    return {};
  }
  if (listed->empty()) {
    return {};
  }
  std::vector<std::string> offered;
  for (const auto& platform : *listed) {
    offered.push_back(chain_loading::normalize_platform(platform).value_or(platform));
  }
  std::vector<std::string> problems;
  for (const auto& [platform, stages] : wanted) {
    if (std::find(offered.begin(), offered.end(), platform) != offered.end()) {
      continue;
    }
    problems.push_back(fmt::format(
        "stage(s) {} build for {}, which the BuildKit daemon at {} does not offer (it offers {}): "
        "it would build them with its own machine's binaries and label them {}; register an "
        "emulator for {} on that host (binfmt_misc, e.g. Debian's qemu-user-static), or give "
        "the lane a daemon of that platform",
        first_names(stages, 3), platform,
        host.empty() ? "the chain's address ([engine.buildkit] host, else BUILDKIT_HOST, else "
                       "buildctl's default)"
                     : host,
        join(*listed, ", "), platform, platform));
  }
  return problems;
}

} // namespace

tl::expected<EngineVersion, std::string> engine_version(const Engine& engine,
                                                        const std::filesystem::path& records) {
  EngineVersion version;
  version.key = engine.version_key();
  if (auto kept = remembered_text(records, version.key)) {
    version.text = *kept;
    version.remembered = true;
    return version;
  }
  auto asked = engine.version();
  if (!asked) {
    return tl::unexpected(asked.error());
  }
  version.text = *asked;
  return version;
}

tl::expected<EngineVersions, std::string> engine_versions(const Engine& engine,
                                                          const std::vector<BuildRequest>& requests,
                                                          const std::filesystem::path& records) {
  // Each daemon (its address and TLS files) with the requests it builds, in the order the
  // requests first name them; "" is the engine's own. To an engine without hosts (buildah)
  // every request is its own.
  struct Daemon {
    std::string host;
    std::string key;                // the address and the TLS files: what the probe connects with
    std::unique_ptr<Engine> engine; // nullptr: the engine's own
    std::vector<BuildRequest> requests;
  };
  std::vector<Daemon> daemons;
  for (const auto& request : requests) {
    std::unique_ptr<Engine> there = request.host.empty() ? nullptr : engine.on_host(request);
    std::string host = there ? request.host : std::string();
    std::string key = there ? fmt::format("{} {} {} {}", request.host, request.tls_ca.string(),
                                          request.tls_cert.string(), request.tls_key.string())
                            : std::string();
    auto known = std::find_if(daemons.begin(), daemons.end(),
                              [&](const Daemon& daemon) { return daemon.key == key; });
    if (known == daemons.end()) {
      daemons.push_back({host, key, std::move(there), {}});
      known = daemons.end() - 1;
    }
    known->requests.push_back(request);
  }
  if (daemons.empty()) {
    daemons.push_back({"", "", nullptr, {}});
  }
  EngineVersions versions;
  std::vector<std::string> texts;
  for (const auto& daemon : daemons) {
    const Engine& asked = daemon.engine ? *daemon.engine : engine;
    auto version = engine_version(asked, records);
    if (!version) {
      return tl::unexpected(version.error());
    }
    for (auto& problem : asked.unsupported(daemon.requests, version->text)) {
      versions.problems.push_back(std::move(problem));
    }
    for (auto& warning : asked.version_warnings(daemon.requests, version->text)) {
      versions.warnings.push_back(std::move(warning));
    }
    for (auto& problem :
         platform_problems(asked, daemon.host, daemon.requests, versions.warnings)) {
      versions.problems.push_back(std::move(problem));
    }
    texts.push_back(daemon.host.empty() ? version->text : daemon.host + ": " + version->text);
    versions.each.push_back(std::move(*version));
  }
  versions.text = versions.each.size() == 1 ? versions.each.front().text : join(texts, "; ");
  return versions;
}

void remember_engine_version(const std::filesystem::path& records, const EngineVersion& version) {
  if (version.remembered || version.key.empty() || version.text.find('\n') != std::string::npos) {
    return;
  }
  (void)write_file_atomic(remembered_path(records), version.key + "\n" + version.text + "\n",
                          Durability::rename_only);
}

} // namespace kiln
