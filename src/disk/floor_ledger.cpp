#include "disk/floor_ledger.h"

#include "disk/slugs.h"
#include "util/fs.h"

namespace kiln {

FloorLedger::Claim FloorLedger::claim(const std::filesystem::path& disk, const std::string& stage,
                                      double floor_gb) {
  std::string filesystem = filesystem_key(disk);
  std::lock_guard lock(m_mutex);
  Claim claim;
  auto free = free_bytes(disk);
  if (!free) {
    claim.error = free.error();
    return claim;
  }
  claim.free = *free;
  for (const auto& [holder, held] : m_held) {
    if (holder != stage && held.filesystem == filesystem) {
      claim.others_gb += held.gb;
      claim.holders.push_back(holder);
    }
  }
  double need = (floor_gb + claim.others_gb) * static_cast<double>(k_gib);
  claim.fits = static_cast<double>(*free) >= need;
  claim.held = claim.fits || claim.holders.empty();
  if (claim.held) {
    m_held[stage] = {filesystem, floor_gb};
  }
  return claim;
}

void FloorLedger::release(const std::string& stage) {
  {
    std::lock_guard lock(m_mutex);
    if (m_held.erase(stage) == 0) {
      return;
    }
    ++m_releases;
  }
  m_released.notify_all();
}

void FloorLedger::wait_for_release(std::chrono::milliseconds limit) {
  std::unique_lock lock(m_mutex);
  uint64_t seen = m_releases;
  m_released.wait_for(lock, limit, [&] { return m_releases != seen; });
}

} // namespace kiln
