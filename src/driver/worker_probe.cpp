#include "driver/worker_probe.h"

#include <algorithm>

#include <fmt/format.h>

#include "driver/engine_version.h"
#include "util/strings.h"

namespace kiln {

void point_at(BuildRequest& request, const Worker& worker) {
  request.host = worker.host;
  request.host_from = "[[worker]] " + worker.name;
  request.tls_ca = worker.ca;
  request.tls_cert = worker.cert;
  request.tls_key = worker.key;
}

WorkerProbe probe_workers(const Chain& chain, const std::vector<const Stage*>& stages,
                          const std::vector<BuildRequest>& requests, const Engine& engine,
                          const std::filesystem::path& records) {
  WorkerProbe probe;
  std::vector<std::string> versions;
  for (const Worker& worker : chain.workers) {
    std::vector<BuildRequest> on_it;
    for (size_t i = 0; i < stages.size(); ++i) {
      const auto& names = stages[i]->workers;
      if (std::find(names.begin(), names.end(), worker.name) != names.end()) {
        on_it.push_back(requests[i]);
        point_at(on_it.back(), worker);
      }
    }
    if (on_it.empty()) {
      continue; // no stage of this run may go to it
    }
    WorkerRecord record{worker.name, worker.host, "", ""};
    auto version = engine_versions(engine, on_it, records);
    if (!version) {
      record.left_out = version.error();
      probe.warnings.push_back(fmt::format("worker {} ({}) is left out of this run: {}",
                                           worker.name, worker.host, version.error()));
    } else {
      record.version = version->text;
      versions.push_back(worker.name + ": " + version->text);
      for (const auto& problem : version->problems) {
        probe.problems.push_back(fmt::format("worker {}: {}", worker.name, problem));
      }
      for (const auto& warning : version->warnings) {
        probe.warnings.push_back(fmt::format("worker {}: {}", worker.name, warning));
      }
    }
    probe.workers.push_back(std::move(record));
  }
  probe.versions = join(versions, "; ");
  return probe;
}

} // namespace kiln
