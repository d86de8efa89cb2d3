#include "driver/engine_version.h"

#include <algorithm>
#include <charconv>
#include <future>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "chain/loader.h"
#include "disk/sizes.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kiln {

namespace {

// The key, the version text and, when it was read, `layer-keep <bytes|none>`: one per line.
std::filesystem::path remembered_path(const std::filesystem::path& records) {
  return records / "engine-version";
}

constexpr uint64_t k_read_limit = 64 * 1024;
constexpr std::string_view k_layer_keep = "layer-keep ";

// What is kept under `key`, when the file's first line is `key`.
std::optional<EngineVersion> remembered(const std::filesystem::path& records,
                                        const std::string& key) {
  if (key.empty()) {
    return std::nullopt;
  }
  auto file = read_file(remembered_path(records), k_read_limit);
  if (!file || !file->ends_with('\n')) {
    return std::nullopt;
  }
  std::vector<std::string> lines = split(file->substr(0, file->size() - 1), '\n');
  if (lines.size() < 2 || lines.size() > 3 || lines[0] != key || lines[1].empty()) {
    return std::nullopt;
  }
  EngineVersion version;
  version.key = key;
  version.text = lines[1];
  version.remembered = true;
  if (lines.size() == 3) {
    std::string_view keep = lines[2];
    if (!keep.starts_with(k_layer_keep)) {
      return std::nullopt;
    }
    keep.remove_prefix(k_layer_keep.size());
    uint64_t bytes = 0;
    auto [end, error] = std::from_chars(keep.data(), keep.data() + keep.size(), bytes);
    if (keep == "none") {
      version.layer_keep_known = true;
    } else if (error == std::errc() && end == keep.data() + keep.size() && !keep.empty()) {
      version.layer_keep = bytes;
      version.layer_keep_known = true;
    } else {
      return std::nullopt;
    }
  }
  return version;
}

/// How a message names the daemon at `host` ("": the chain's own).
std::string daemon_named(const std::string& host) {
  return host.empty() ? "the chain's address ([engine.buildkit] host, else BUILDKIT_HOST, else "
                        "buildctl's default)"
                      : host;
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
        first_names(stages, 3), platform, daemon_named(host), join(*listed, ", "), platform,
        platform));
  }
  return problems;
}

/// What the images of `requests`' stages took in their last run, each blob of their OCI
/// layouts once (compressed: the daemon holds them unpacked, so at least that much).
uint64_t layout_bytes(const std::vector<BuildRequest>& requests, std::vector<std::string>& stages) {
  std::set<std::string> seen;
  uint64_t bytes = 0;
  for (const auto& request : requests) {
    std::error_code error;
    bool counted = false;
    for (const auto& blob :
         std::filesystem::directory_iterator(request.layout / "blobs" / "sha256", error)) {
      std::error_code size_error;
      uint64_t size = blob.file_size(size_error);
      if (!size_error && seen.insert(blob.path().filename().string()).second) {
        bytes += size;
        counted = true;
      }
    }
    if (counted) {
      stages.push_back(request.stage);
    }
  }
  return bytes;
}

/// A daemon whose garbage collector keeps less layer cache than its stages' images take evicts
/// their layers between runs, silently: the next run builds them again (a 37 GB layer was
/// re-solved on every run so). Nothing to say before a first run has built anything.
void gc_warning(const Engine& engine, const EngineVersion& version, const std::string& host,
                const std::vector<BuildRequest>& requests, std::vector<std::string>& warnings) {
  std::vector<std::string> stages;
  uint64_t set = layout_bytes(requests, stages);
  if (set == 0) {
    return;
  }
  tl::expected<std::optional<uint64_t>, std::string> keep = version.layer_keep;
  if (!version.layer_keep_known) {
    keep = engine.layer_cache_keep(); // it could not be read with the version
  }
  if (!keep) {
    warnings.push_back(fmt::format("the GC policy of the BuildKit daemon at {} is not known ({}), "
                                   "so whether it keeps its stages' layers cannot be checked",
                                   daemon_named(host), keep.error()));
    return;
  }
  if (!*keep || **keep >= set) {
    return;
  }
  warnings.push_back(fmt::format(
      "the BuildKit daemon at {} keeps at most {} of layer cache (the smallest Keep Bytes of its "
      "GC rules that prune layers whatever their age, `buildctl debug workers -v`), below the {} "
      "the images of its stages took in their last run ({}): its garbage collector evicts their "
      "layers between runs and the stages build them again; raise keepBytes of those rules in "
      "that daemon's buildkitd.toml above {}",
      daemon_named(host), decimal_size(**keep), decimal_size(set), first_names(stages, 3),
      decimal_size(set)));
}

} // namespace

tl::expected<EngineVersion, std::string> engine_version(const Engine& engine,
                                                        const std::filesystem::path& records) {
  std::string key = engine.version_key();
  if (auto kept = remembered(records, key)) {
    if (!kept->layer_keep_known) { // kept by a kiln that did not ask for it
      if (auto keep = engine.layer_cache_keep()) {
        kept->layer_keep = *keep;
        kept->layer_keep_known = true;
        kept->layer_keep_learned = true;
      }
    }
    return *kept;
  }
  EngineVersion version;
  version.key = key;
  // Asked beside the version's own probes: each waits on the daemon, none on the others.
  auto keep = std::async(std::launch::async, [&engine] { return engine.layer_cache_keep(); });
  auto asked = engine.version();
  auto kept = keep.get();
  if (!asked) {
    return tl::unexpected(asked.error());
  }
  version.text = *asked;
  if (kept) {
    version.layer_keep = *kept;
    version.layer_keep_known = true;
  }
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
    gc_warning(asked, *version, daemon.host, daemon.requests, versions.warnings);
    texts.push_back(daemon.host.empty() ? version->text : daemon.host + ": " + version->text);
    versions.each.push_back(std::move(*version));
  }
  versions.text = versions.each.size() == 1 ? versions.each.front().text : join(texts, "; ");
  return versions;
}

void remember_engine_version(const std::filesystem::path& records, const EngineVersion& version) {
  if ((version.remembered && !version.layer_keep_learned) || version.key.empty() ||
      version.text.find('\n') != std::string::npos) {
    return;
  }
  std::string text = version.key + "\n" + version.text + "\n";
  if (version.layer_keep_known) {
    text += std::string(k_layer_keep) +
            (version.layer_keep ? std::to_string(*version.layer_keep) : std::string("none")) + "\n";
  }
  (void)write_file_atomic(remembered_path(records), text, Durability::rename_only);
}

} // namespace kiln
