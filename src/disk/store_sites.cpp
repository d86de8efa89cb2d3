#include "disk/store_sites.h"

#include <algorithm>

#include "disk/buildah_store.h"
#include "disk/buildkit_store.h"
#include "disk/slugs.h"
#include "engine/buildkit_engine.h"
#include "util/fs.h"

namespace kiln {

namespace {

/// The addresses `stages` build on, each once: the workers of their pools, their lanes' own
/// hosts, then the default daemon if a stage has neither. A daemon no stage of the run uses is
/// none of the run's business.
std::vector<BuildkitAddress> buildkit_daemons(const Chain& chain,
                                              const std::vector<const Stage*>& stages) {
  std::vector<BuildkitAddress> daemons;
  auto add = [&](BuildkitAddress address) {
    bool known = std::any_of(daemons.begin(), daemons.end(), [&](const BuildkitAddress& each) {
      return each.address == address.address;
    });
    if (!known) {
      daemons.push_back(std::move(address));
    }
  };
  auto used = [&](auto&& uses) { return std::any_of(stages.begin(), stages.end(), uses); };
  for (const Worker& worker : chain.workers) {
    if (used([&](const Stage* s) {
          return std::find(s->workers.begin(), s->workers.end(), worker.name) != s->workers.end();
        })) {
      add({worker.host, "[[worker]] " + worker.name, worker.ca, worker.cert, worker.key});
    }
  }
  for (const Lane& lane : chain.lanes) {
    if (!lane.host.empty() &&
        used([&](const Stage* s) { return s->workers.empty() && s->lane == lane.name; })) {
      add({lane.host, "[[lane]] " + lane.name, lane.ca, lane.cert, lane.key});
    }
  }
  bool on_default = used([&](const Stage* s) {
    const Lane* lane = chain.find_lane(s->lane);
    return s->workers.empty() && (lane == nullptr || lane->host.empty());
  });
  if (on_default || daemons.empty()) {
    add(resolve_buildkit_address(chain.buildkit_host));
  }
  return daemons;
}

/// A store this host can reach on its own disks: buildah's, or a daemon on a unix socket.
bool on_this_host(const std::string& address, const std::string& engine) {
  return engine != "buildkit" || address.empty() || address.starts_with("unix://");
}

} // namespace

StoreSites::StoreSites(const Chain& chain, const StoreLevers* seam)
    : StoreSites(chain, all_stages(chain), seam) {}

StoreSites::StoreSites(const Chain& chain, const std::vector<const Stage*>& stages,
                       const StoreLevers* seam) {
  auto add = [&](std::string address, std::shared_ptr<StoreLevers> owned) {
    StoreSite site;
    site.address = std::move(address);
    site.owned = std::move(owned);
    site.levers = seam != nullptr ? seam : site.owned.get();
    if (!on_this_host(site.address, chain.engine)) {
      // [disk] path is a disk of this host: it says nothing of another host's.
      site.disk_unknown = site.address + " is a daemon on another host";
    } else if (!chain.disk.path.empty()) {
      site.disk = chain.disk.path;
    } else if (auto location = site.levers->location()) {
      site.disk = location->path;
    } else {
      site.disk_unknown = location.error();
    }
    m_sites.push_back(std::move(site));
  };
  if (chain.engine != "buildkit") {
    add("", std::make_shared<BuildahStore>());
    return;
  }
  m_default = resolve_buildkit_address(chain.buildkit_host).address;
  for (BuildkitAddress& daemon : buildkit_daemons(chain, stages)) {
    std::string address = daemon.address;
    add(std::move(address), std::make_shared<BuildkitStore>(std::move(daemon)));
  }
}

std::vector<const Stage*> StoreSites::all_stages(const Chain& chain) {
  std::vector<const Stage*> stages;
  for (const Stage& stage : chain.stages) {
    stages.push_back(&stage);
  }
  return stages;
}

const StoreSite& StoreSites::at(const std::string& host) const {
  const std::string& address = host.empty() ? m_default : host;
  auto found = std::find_if(m_sites.begin(), m_sites.end(),
                            [&](const StoreSite& site) { return site.address == address; });
  return found != m_sites.end() ? *found : m_sites.front();
}

std::vector<const StoreSite*> StoreSites::one_per_disk() const {
  std::vector<std::pair<std::string, const StoreSite*>> chosen; // filesystem, its site
  for (const StoreSite& site : m_sites) {
    if (site.disk.empty()) {
      continue;
    }
    std::string filesystem = filesystem_key(site.disk);
    auto known = std::find_if(chosen.begin(), chosen.end(),
                              [&](const auto& entry) { return entry.first == filesystem; });
    if (known == chosen.end()) {
      chosen.emplace_back(filesystem, &site);
      continue;
    }
    // Several stores measured on one disk ([disk] path): the one whose data is on it is the
    // one whose levers free space there.
    auto stored_here = [&](const StoreSite* each) {
      auto location = each->levers->location();
      return location && same_filesystem(location->path, each->disk);
    };
    if (!stored_here(known->second) && stored_here(&site)) {
      known->second = &site;
    }
  }
  std::vector<const StoreSite*> sites;
  for (const auto& [filesystem, site] : chosen) {
    sites.push_back(site);
  }
  return sites;
}

std::vector<MeasuredDisk>
StoreSites::measured_disks(const std::filesystem::path& cache_root) const {
  std::vector<MeasuredDisk> disks;
  for (const StoreSite* site : one_per_disk()) {
    disks.push_back({site->disk, site->levers});
  }
  if (cache_root.empty()) {
    return disks;
  }
  std::string exports = filesystem_key(cache_root);
  bool measured = std::any_of(disks.begin(), disks.end(), [&](const MeasuredDisk& disk) {
    return filesystem_key(disk.path) == exports;
  });
  if (!measured) {
    disks.push_back({cache_root, nullptr});
  }
  return disks;
}

} // namespace kiln
