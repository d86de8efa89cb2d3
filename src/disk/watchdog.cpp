#include "disk/watchdog.h"

#include <exception>

#include <fmt/format.h>

#include "disk/slugs.h"
#include "util/fs.h"

namespace kiln {

DiskWatchdog::DiskWatchdog(DiskPolicy policy, std::function<void(const std::string&)> log,
                           const StoreLevers* store)
    : m_policy(std::move(policy)), m_log(std::move(log)), m_store(store) {
  for (const std::string& line : normalize_policy(m_policy)) {
    emit(line);
  }
}

DiskWatchdog::~DiskWatchdog() {
  stop();
}

void DiskWatchdog::start(std::string episode, std::vector<std::string> protected_slugs) {
  stop();
  {
    std::lock_guard<std::mutex> tick_lock(m_tick_mutex);
    m_episode = std::move(episode);
    m_protected = std::move(protected_slugs);
    m_store_pruned = false;
  }
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_stopping = false;
  }
  try {
    m_thread = std::thread([this]() { run(); });
  } catch (const std::exception& error) {
    emit(fmt::format("WARN [disk-watch] cannot start watching {}: {}", m_policy.path.string(),
                     error.what()));
  }
}

void DiskWatchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_stopping = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable()) {
    m_thread.join();
  }
}

void DiskWatchdog::tick_now() {
  tick();
}

void DiskWatchdog::run() {
  std::unique_lock<std::mutex> lock(m_mutex);
  while (!m_stopping) {
    lock.unlock();
    tick();
    lock.lock();
    m_wake.wait_for(lock, m_policy.watch_interval, [this]() { return m_stopping; });
  }
}

void DiskWatchdog::tick() {
  // Whatever goes wrong in a tick is logged and the build goes on: a guard that takes the
  // build down costs more than the disk it guards.
  try {
    std::lock_guard<std::mutex> tick_lock(m_tick_mutex);
    auto free = free_bytes(m_policy.path);
    if (!free) {
      emit(fmt::format("[disk-watch] {}", free.error()));
      return;
    }
    emit(fmt::format("[disk-watch] {}G free on {}{}", gib_text(*free), m_policy.path.string(),
                     m_store == nullptr ? std::string() : " (" + m_store->label() + ")"));
    if (m_policy.guard_gb <= 0) {
      return;
    }
    uint64_t guard = static_cast<uint64_t>(m_policy.guard_gb * static_cast<double>(k_gib));
    if (*free >= guard) {
      return;
    }
    std::string where =
        m_episode.empty() ? std::string("watchdog") : fmt::format("watchdog during {}", m_episode);
    ReclaimOutcome outcome =
        reclaim(m_policy, where, guard, m_protected, m_store, m_store_pruned, false, {});
    m_store_pruned = m_store_pruned || outcome.store_prune_ran;
    for (const std::string& line : outcome.lines) {
      emit(line);
    }
    emit(outcome.record);
  } catch (const std::exception& error) {
    emit(fmt::format("WARN [disk-watch] tick failed: {}", error.what()));
  } catch (...) {
    emit("WARN [disk-watch] tick failed");
  }
}

void DiskWatchdog::emit(const std::string& line) {
  if (!m_log) {
    return;
  }
  try {
    m_log(line);
  } catch (...) {
    // A log sink that throws must not take the watchdog thread (and with it the run) down.
  }
}

} // namespace kiln
