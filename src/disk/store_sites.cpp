#include "disk/store_sites.h"

#include <algorithm>

#include "disk/buildah_store.h"
#include "disk/buildkit_store.h"
#include "engine/buildkit_engine.h"
#include "util/fs.h"

namespace kiln {

namespace {

/// The addresses a chain's BuildKit stages build on, each once: its workers', its lanes' own
/// hosts, then the default daemon if a stage has neither.
std::vector<BuildkitAddress> buildkit_daemons(const Chain& chain) {
  std::vector<BuildkitAddress> daemons;
  auto add = [&](BuildkitAddress address) {
    bool known = std::any_of(daemons.begin(), daemons.end(), [&](const BuildkitAddress& each) {
      return each.address == address.address;
    });
    if (!known) {
      daemons.push_back(std::move(address));
    }
  };
  for (const Worker& worker : chain.workers) {
    add({worker.host, "[[worker]] " + worker.name, worker.ca, worker.cert, worker.key});
  }
  for (const Lane& lane : chain.lanes) {
    if (!lane.host.empty()) {
      add({lane.host, "[[lane]] " + lane.name, lane.ca, lane.cert, lane.key});
    }
  }
  bool on_default = std::any_of(chain.stages.begin(), chain.stages.end(), [&](const Stage& s) {
    const Lane* lane = chain.find_lane(s.lane);
    return s.workers.empty() && (lane == nullptr || lane->host.empty());
  });
  if (on_default || daemons.empty()) {
    add(resolve_buildkit_address(chain.buildkit_host));
  }
  return daemons;
}

} // namespace

StoreSites::StoreSites(const Chain& chain, const StoreLevers* seam) {
  auto add = [&](std::string address, std::shared_ptr<StoreLevers> owned) {
    StoreSite site;
    site.address = std::move(address);
    site.owned = std::move(owned);
    site.levers = seam != nullptr ? seam : site.owned.get();
    if (!chain.disk.path.empty()) {
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
  for (BuildkitAddress& daemon : buildkit_daemons(chain)) {
    std::string address = daemon.address;
    add(std::move(address), std::make_shared<BuildkitStore>(std::move(daemon)));
  }
}

const StoreSite& StoreSites::at(const std::string& host) const {
  const std::string& address = host.empty() ? m_default : host;
  auto found = std::find_if(m_sites.begin(), m_sites.end(),
                            [&](const StoreSite& site) { return site.address == address; });
  return found != m_sites.end() ? *found : m_sites.front();
}

std::vector<const StoreSite*> StoreSites::one_per_disk() const {
  std::vector<const StoreSite*> sites;
  std::vector<std::string> seen;
  for (const StoreSite& site : m_sites) {
    if (site.disk.empty()) {
      continue;
    }
    auto device = filesystem_device(site.disk);
    std::string filesystem = device ? std::to_string(*device) : site.disk.string();
    if (std::find(seen.begin(), seen.end(), filesystem) == seen.end()) {
      seen.push_back(filesystem);
      sites.push_back(&site);
    }
  }
  return sites;
}

} // namespace kiln
