#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kiln {

/// The disk floors of the stages building now, per filesystem. A floor is room a stage may fill
/// while it builds, so the stages building at once on one store need their floors together: a
/// stage starts when the free space covers its own floor and every floor held there, and a
/// stage whose floor does not fit beside the others waits for one of them to end.
class FloorLedger {
public:
  struct Claim {
    bool held = false; // the stage holds its floor now (release() gives it back)
    bool fits = false; // the free space covers it and every other floor held there
    uint64_t free = 0;
    double others_gb = 0;             // the floors other stages hold on that filesystem
    std::vector<std::string> holders; // those stages
    std::string error;                // the free space could not be measured: nothing is held
  };

  /// Measure `disk` and hold `floor_gb` there for `stage` when it fits beside every floor held
  /// on the same filesystem, or when no other stage holds one (then `fits` says whether the
  /// free space covers it: the caller reclaims, or releases and refuses). One claim at a time,
  /// so two stages never both take the last room.
  Claim claim(const std::filesystem::path& disk, const std::string& stage, double floor_gb);

  /// `stage` no longer builds: its floor is free for the stages waiting. Idempotent.
  void release(const std::string& stage);

  /// Until a floor is released or `limit` passes.
  void wait_for_release(std::chrono::milliseconds limit);

private:
  struct Held {
    std::string filesystem;
    double gb = 0;
  };
  std::mutex m_mutex;
  std::condition_variable m_released;
  uint64_t m_releases = 0;
  std::map<std::string, Held> m_held; // by stage
};

} // namespace kiln
