#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "chain/chain.h"

namespace kiln {

/// Where a run of this checkout keeps its engine's temporary files: `kiln-<key>-<run-id>` in
/// `$TMPDIR`, or in /var/tmp where buildah keeps them by default.
std::filesystem::path run_temp_dir(const Chain& chain, const std::string& run_id);

/// What an engine left of runs of this checkout that ended without cleaning up (a SIGKILL, a
/// second Ctrl-C): buildah's working containers, which hold a mount and keep `buildah rmi` and a
/// reclaim from their images, and the runs' temporary folders.
struct Leftovers {
  struct Container {
    std::string id;
    std::string name;
    std::string image; // the image it was made from: one of this checkout's work names
  };
  std::vector<Container> containers;
  std::vector<std::filesystem::path> temp_dirs;
  std::string error; // why buildah's containers could not be listed; "" when they were

  bool empty() const { return containers.empty() && temp_dirs.empty(); }
};

/// This checkout's leftovers, but the temporary folder of run `except_run` (the one running);
/// buildah's containers only when `engine` is buildah (empty: the folders alone). Only builder
/// containers made from this checkout's work names count: another checkout's, or a container
/// someone made by hand, is never touched.
Leftovers find_leftovers(const Chain& chain, std::string_view engine,
                         const std::string& except_run = "");

/// Whether the run that ended in `records/latest` may have left engine leftovers the next run
/// must look for: it says `crashed` (a run that reaches its end looks for its own). A run that
/// was killed is found by mark_abandoned_runs instead.
bool latest_run_crashed(const std::filesystem::path& records);

/// One line per leftover, for `kiln disk status`.
std::vector<std::string> describe_leftovers(const Leftovers& leftovers);

/// Remove the containers (`buildah rm`, which unmounts them) and the folders; one line for
/// driver.log per removal, and per failure with its reason. Call with the records lock held,
/// so no run of this checkout is building.
std::vector<std::string> remove_leftovers(const Leftovers& leftovers);

} // namespace kiln
