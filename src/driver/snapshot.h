#pragma once

#include <cstdio>
#include <string>

#include "chain/chain.h"
#include "driver/console.h"
#include "engine/engine.h"

namespace kiln {

/// What a cache snapshot uploaded, measured from its own output: the blobs the export wrote,
/// sized from the local stage export that holds the same content.
struct PushedBytes {
  uint64_t bytes = 0;
  int blobs = 0;
  int unsized = 0; // blobs the local export does not hold, so their size is unknown here
};

/// Blobs written by `export_output` (a build's plain progress output) as the registry cache
/// export, sized from the slug's blobs.
PushedBytes pushed_bytes(const std::string& export_output, const std::filesystem::path& slug);

/// `kiln cache snapshot <stage>`: re-drive a stage that built green with its registry mode=max
/// export (snapshot_cache_to). Every vertex hits, so nothing compiles and the upload runs when
/// the user chose; it writes no run record and never touches the stage's image, so it cannot
/// fail a build that already succeeded. Returns the exit code.
int snapshot_stage(const Chain& chain, const Engine& engine, const std::string& stage_name,
                   const KeyValues& overrides, Console& console, std::FILE* errors);

} // namespace kiln
