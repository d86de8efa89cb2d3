// Worker pools: reading [[worker]] tables, checking the pools that name them, and giving each
// stage the workers it may be placed on.
#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "chain/loader.h"
#include "util/strings.h"

namespace kiln::chain_loading {

namespace {

/// The pool a stage is placed from: its lane's workers, else (a lane with no host of its own)
/// the chain's; nullptr when it has none and builds on its lane's host or the chain's.
const std::vector<std::string>* pool_of(const Chain& chain, const Stage& stage) {
  const Lane* lane = chain.find_lane(stage.lane);
  if (lane != nullptr && !lane->workers.empty()) {
    return &lane->workers;
  }
  if ((lane != nullptr && !lane->host.empty()) || chain.buildkit_workers.empty()) {
    return nullptr;
  }
  return &chain.buildkit_workers;
}

/// Whether `worker` can build `stage` in `lane`: it builds the lane's platform (or says
/// nothing of its platforms) and has every label the stage asks for.
bool can_build(const Worker& worker, const Stage& stage, const Lane* lane) {
  const auto& platforms = worker.platforms;
  if (lane != nullptr && !lane->platform.empty() && !platforms.empty() &&
      std::find(platforms.begin(), platforms.end(), lane->platform) == platforms.end()) {
    return false;
  }
  return std::all_of(
      stage.worker_labels.begin(), stage.worker_labels.end(), [&](const std::string& label) {
        return std::find(worker.labels.begin(), worker.labels.end(), label) != worker.labels.end();
      });
}

} // namespace

void Loader::read_worker(const toml::table& table) {
  const std::string_view where = "in [[worker]]";
  check_keys(table, where, k_worker_keys);
  Worker worker;
  worker.pos = pos(table);
  if (const auto* name = get<std::string>(table, where, "name", true)) {
    worker.name = name->get();
    if (!is_lower_name(worker.name, false)) {
      error(pos(*name), fmt::format("worker name '{}' is not valid", worker.name),
            "use lower-case letters, digits, '_', '.' and '-', starting with a letter");
    } else if (m_chain.find_worker(worker.name) != nullptr) {
      error(pos(*name), fmt::format("duplicate worker name '{}'", worker.name),
            "rename one of them");
    }
  }
  if (const auto* host = get<std::string>(table, where, "host", true)) {
    worker.host = host->get();
    if (std::string wrong = host_address_problem(worker.host); !wrong.empty()) {
      error(pos(*host), fmt::format("worker host '{}' {}", worker.host, wrong),
            "write unix:///path/to/buildkitd.sock or tcp://host:port");
    }
  }
  for (auto [key, file] : {std::pair{"ca", &worker.ca}, std::pair{"cert", &worker.cert},
                           std::pair{"key", &worker.key}}) {
    if (const auto* path = get<std::string>(table, where, key)) {
      if (auto found = existing_path(*path, fmt::format("worker {} file", key), PathKind::file)) {
        *file = *found;
      }
    }
  }
  if (const auto* platforms = get<toml::array>(table, where, "platforms")) {
    for (const auto& element : *platforms) {
      const auto* text = element.as_string();
      auto normal = text != nullptr ? normalize_platform(text->get())
                                    : tl::expected<std::string, std::string>(tl::unexpected(
                                          fmt::format("is {}, not a string", type_name(element))));
      if (normal) {
        worker.platforms.push_back(*normal);
      } else {
        error(pos(element),
              fmt::format("worker platform '{}' {}", text != nullptr ? text->get() : "",
                          normal.error()),
              "write os/arch[/variant], e.g. \"linux/arm64\" or \"linux/amd64/v3\"");
      }
    }
  }
  worker.labels = get_strings(table, where, "labels", "a label");
  worker.max_parallel =
      get_count(table, where, "max_parallel", "1 builds one stage at a time on this worker")
          .value_or(1);
  worker.memory_gb = get_gb(table, where, "memory_gb", true);
  worker.cores = get_count(table, where, "cores", "the cores a stage on it may use");
  m_chain.workers.push_back(std::move(worker));
}

void Loader::check_workers() {
  std::vector<std::string> names;
  for (const auto& worker : m_chain.workers) {
    names.push_back(worker.name);
  }
  auto check_pool = [&](const std::vector<std::string>& pool, const std::vector<SourcePos>& at) {
    for (size_t i = 0; i < pool.size(); ++i) {
      if (m_chain.find_worker(pool[i]) == nullptr) {
        error(at[i], fmt::format("unknown worker '{}' in workers", pool[i]),
              m_chain.workers.empty() ? "add a [[worker]] table with that name"
                                      : did_you_mean(pool[i], names, "workers"));
      } else if (m_chain.engine != "buildkit") {
        error(at[i], "workers are BuildKit daemons, and the chain builds with buildah",
              "set engine = \"buildkit\" in [chain], or leave the workers out");
      }
    }
  };
  check_pool(m_chain.buildkit_workers, m_chain.buildkit_workers_pos);
  for (const auto& lane : m_chain.lanes) {
    check_pool(lane.workers, lane.workers_pos);
    if (!lane.workers.empty() && !lane.host.empty()) {
      error(lane.workers_pos.front(),
            fmt::format("lane '{}' names both a host and workers", lane.name),
            "leave one out: a host is the one-worker form of a pool");
    }
  }
  // Every stage in every lane it runs in has a worker of its pool that can build it.
  std::vector<const Lane*> lanes;
  for (const auto& lane : m_chain.lanes) {
    lanes.push_back(&lane);
  }
  if (lanes.empty()) {
    lanes.push_back(nullptr);
  }
  for (const auto& stage : m_chain.stages) {
    for (const Lane* lane : lanes) {
      if (lane != nullptr && !runs_in(stage, lane->name)) {
        continue;
      }
      Stage copy = stage;
      copy.lane = lane != nullptr ? lane->name : stage.lane;
      const std::vector<std::string>* pool = pool_of(m_chain, copy);
      if (pool == nullptr) {
        if (!stage.worker_labels.empty()) {
          error(stage.worker_labels_pos,
                fmt::format("stage '{}' asks for worker labels, but {} no workers", stage.name,
                            lane != nullptr ? fmt::format("lane '{}' has", lane->name)
                                            : std::string("the chain has")),
                "name a pool (workers = [...] in the lane, or in [engine.buildkit]), or leave "
                "worker_labels out");
        }
        continue;
      }
      bool any = std::any_of(pool->begin(), pool->end(), [&](const std::string& name) {
        const Worker* worker = m_chain.find_worker(name);
        return worker == nullptr || can_build(*worker, copy, lane);
      });
      if (!any) {
        std::string what = join(stage.worker_labels, ", ");
        std::string platform = lane != nullptr ? lane->platform : std::string();
        error(stage.worker_labels.empty() ? (lane != nullptr ? lane->pos : stage.pos)
                                          : stage.worker_labels_pos,
              fmt::format("no worker of the pool of {} can build stage '{}': none {}",
                          lane != nullptr ? fmt::format("lane '{}'", lane->name)
                                          : std::string("the chain"),
                          stage.name,
                          !what.empty() && !platform.empty()
                              ? fmt::format("builds {} with the labels {}", platform, what)
                          : !what.empty() ? fmt::format("has the labels {}", what)
                                          : fmt::format("builds {}", platform)),
              "add a worker that does to the pool, or change the worker's platforms or labels");
      }
    }
  }
}

void Loader::place_in_pools() {
  for (auto& stage : m_chain.stages) {
    const std::vector<std::string>* pool = pool_of(m_chain, stage);
    if (pool == nullptr) {
      continue;
    }
    const Lane* lane = m_chain.find_lane(stage.lane);
    for (const auto& name : *pool) {
      const Worker* worker = m_chain.find_worker(name);
      if (worker != nullptr && can_build(*worker, stage, lane) &&
          std::find(stage.workers.begin(), stage.workers.end(), name) == stage.workers.end()) {
        stage.workers.push_back(name);
      }
    }
  }
}

} // namespace kiln::chain_loading
