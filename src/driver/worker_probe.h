#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "chain/chain.h"
#include "driver/records.h"
#include "engine/engine.h"

namespace kiln {

/// The workers a run's placed stages may go to, each asked once before anything builds, as a
/// lane's daemon is: its version, what its version rejects of the requests it may take, and
/// whether it builds their platforms.
struct WorkerProbe {
  std::vector<WorkerRecord> workers; // in the chain's order; left_out says why one is not used
  std::vector<std::string> problems; // what refuses the run
  std::vector<std::string> warnings; // a worker left out, what could not be checked
  std::string versions;              // `<worker>: <version>` joined by "; "
};

/// `requests` are the run's, one per stage of `stages` (same index). A worker that does not
/// answer is left out with a warning: the stages go to the rest of their pool, and a stage
/// whose pool has none left is skipped when it would start.
WorkerProbe probe_workers(const Chain& chain, const std::vector<const Stage*>& stages,
                          const std::vector<BuildRequest>& requests, const Engine& engine,
                          const std::filesystem::path& records);

/// `request` pointed at `worker`: its address and TLS files.
void point_at(BuildRequest& request, const Worker& worker);

} // namespace kiln
