#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "engine/engine.h"

namespace kiln {

/// The engine's version as a run records it, and whether it was asked for or remembered.
struct EngineVersion {
  std::string text;
  std::string key;         // Engine::version_key() when it was read; "" when it has none
  bool remembered = false; // from the last run against the same programs and daemon
  /// Engine::layer_cache_keep(), asked with the version and kept with it: a daemon reads its
  /// GC policy when it starts, and a restarted daemon has another key.
  std::optional<uint64_t> layer_keep;
  bool layer_keep_known = false;
  bool layer_keep_learned = false; // asked now for a remembered version that lacked it
};

/// `<records>/engine-version` when it holds the answer for the engine's current version_key,
/// else engine.version() (its error as it says it).
tl::expected<EngineVersion, std::string> engine_version(const Engine& engine,
                                                        const std::filesystem::path& records);

/// The versions of every daemon a run's `requests` build on: the engine's own for those that name
/// no host, each lane's host for its own. Every daemon is asked (or remembered) and its requests
/// checked against its answer.
struct EngineVersions {
  /// What the record says: the one version, or `<host>: <version>` per daemon joined by "; ".
  std::string text;
  std::vector<EngineVersion> each;   // one per daemon, in the order the requests name them
  std::vector<std::string> problems; // what a daemon's version rejects (Engine::unsupported)
  std::vector<std::string> warnings; // what could not be checked (Engine::version_warnings)
};
tl::expected<EngineVersions, std::string> engine_versions(const Engine& engine,
                                                          const std::vector<BuildRequest>& requests,
                                                          const std::filesystem::path& records);

/// Keep an asked-for version for the next run. Only a cache: a failed write costs the next run
/// its probes, nothing else, so it is not reported.
void remember_engine_version(const std::filesystem::path& records, const EngineVersion& version);

} // namespace kiln
