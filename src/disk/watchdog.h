#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "disk/guard.h"
#include "disk/store.h"

namespace kiln {

/// Samples free space on `policy.path` while a stage builds. Every tick logs
/// `[disk-watch] <N>G free on <path> (<store>)`, unconditionally, so the log alone reconstructs the disk's
/// trajectory (an operator's external prune otherwise leaves no trace). Below `guard_gb` it
/// reclaims without images (a build is running) and with the store prune at most once per
/// episode. It never kills the build it watches and never throws.
class DiskWatchdog {
public:
  DiskWatchdog(DiskPolicy policy, std::function<void(const std::string&)> log,
               const StoreLevers* store);
  DiskWatchdog(const DiskWatchdog&) = delete;
  DiskWatchdog& operator=(const DiskWatchdog&) = delete;
  ~DiskWatchdog();

  /// Open a new episode (one stage): ticks at once and then every `watch_interval`. Stops the
  /// previous episode's thread first; the once-per-episode prune latch resets.
  void start(std::string episode, std::vector<std::string> protected_slugs);

  /// Wakes the thread at once and joins it. Idempotent.
  void stop();

  /// One tick, synchronously, in the current episode (for tests and for a caller that wants a
  /// sample now).
  void tick_now();

private:
  void run();
  void tick();
  void emit(const std::string& line);

  DiskPolicy m_policy;
  std::function<void(const std::string&)> m_log;
  const StoreLevers* m_store;

  std::mutex m_tick_mutex; // one tick at a time; guards the episode state below
  std::string m_episode;
  std::vector<std::string> m_protected;
  bool m_store_pruned = false;

  std::mutex m_mutex; // guards m_stopping
  std::condition_variable m_wake;
  bool m_stopping = false;
  std::thread m_thread;
};

} // namespace kiln
