#pragma once

#include <filesystem>
#include <string>

#include <tl/expected.hpp>

#include "engine/engine.h"

namespace kiln {

/// The engine's version as a run records it, and whether it was asked for or remembered.
struct EngineVersion {
  std::string text;
  std::string key;         // Engine::version_key() when it was read; "" when it has none
  bool remembered = false; // from the last run against the same programs and daemon
};

/// `<records>/engine-version` when it holds the answer for the engine's current version_key,
/// else engine.version() (its error as it says it).
tl::expected<EngineVersion, std::string> engine_version(const Engine& engine,
                                                        const std::filesystem::path& records);

/// Keep an asked-for version for the next run. Only a cache: a failed write costs the next run
/// its probes, nothing else, so it is not reported.
void remember_engine_version(const std::filesystem::path& records, const EngineVersion& version);

} // namespace kiln
