#include "driver/engine_version.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

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
