#include "driver/scheduler.h"

#include <algorithm>
#include <unordered_map>

#include "driver/build_request.h"
#include "driver/placement.h"

namespace kiln {

std::vector<PlanStage> plan_stages(const std::vector<const Stage*>& stages, const Chain* chain) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < stages.size(); ++i) {
    index.emplace(stages[i]->name, i);
  }
  std::unordered_map<std::string, size_t> lanes;
  std::vector<PlanStage> plan;
  plan.reserve(stages.size());
  for (const Stage* stage : stages) {
    PlanStage& node = plan.emplace_back();
    node.name = stage->name;
    node.weight = stage->weight;
    node.reads_budget = reads_budget(*stage);
    node.lane = lanes.emplace(stage->lane, lanes.size()).first->second;
    for (const auto& need : stage->needs) {
      if (auto found = index.find(need); found != index.end()) {
        node.needs.push_back(found->second);
      }
    }
    if (chain != nullptr) {
      for (size_t at : rank_workers(chain->name, stage->name, stage->workers)) {
        const Worker* worker = chain->find_worker(stage->workers[at]);
        node.workers.push_back(static_cast<int>(worker - chain->workers.data()));
      }
    }
  }
  return plan;
}

Scheduler::Scheduler(std::vector<PlanStage> stages, SchedulerLimits limits)
    : m_stages(std::move(stages)), m_limits(limits) {
  m_limits.max_parallel = std::max(1, m_limits.max_parallel);
  m_limits.slots = std::max(1, m_limits.slots);
  m_free_slots = m_limits.slots;
  size_t count = m_stages.size();
  m_dependants.resize(count);
  m_unmet.resize(count);
  m_state.assign(count, StageState::waiting);
  m_because.resize(count);
  m_cause.resize(count);
  m_slots.assign(count, 0);
  size_t lanes = 0;
  for (const auto& stage : m_stages) {
    lanes = std::max(lanes, stage.lane + 1);
  }
  m_running_in_lane.assign(lanes, 0);
  m_on_worker.assign(m_limits.worker_slots.size(), 0);
  m_down.assign(m_limits.worker_slots.size(), false);
  m_worker_of.assign(count, -1);
  for (size_t i = 0; i < count; ++i) {
    m_stages[i].weight = std::max(1, m_stages[i].weight);
    m_unmet[i] = m_stages[i].needs.size();
    for (size_t need : m_stages[i].needs) {
      m_dependants[need].push_back(i);
    }
    if (m_unmet[i] == 0) {
      m_ready.insert(i);
    }
  }
}

std::vector<StageStart> Scheduler::start_ready() {
  std::vector<StageStart> starts;
  // Shares are taken against every stage that can build now: those running and the ready ones
  // max_parallel lets start. One that must wait for a slot still keeps the others from taking
  // its part; one that max_parallel holds back does not.
  long wanting = m_weight_running;
  long plain = m_plain_running;
  size_t room = static_cast<size_t>(m_limits.max_parallel) -
                std::min(m_running.size(), static_cast<size_t>(m_limits.max_parallel));
  for (auto it = m_ready.begin(); it != m_ready.end() && room > 0; ++it, --room) {
    if (!m_stages[*it].workers.empty()) {
      continue; // its budget is its worker's
    }
    if (m_stages[*it].reads_budget) {
      wanting += m_stages[*it].weight;
    } else {
      ++plain;
    }
  }
  const long shared = std::max(1L, m_limits.slots - plain);
  for (auto it = m_ready.begin(); it != m_ready.end();) {
    if (m_running.size() >= static_cast<size_t>(m_limits.max_parallel)) {
      break;
    }
    size_t stage = *it;
    const bool pooled = !m_stages[stage].workers.empty();
    if (!pooled && m_free_slots < 1) {
      ++it; // a placed stage after it may still start: its slots are its worker's
      continue;
    }
    StageStart placed{stage, 1, -1, -1, {}};
    if (pooled) {
      bool any_up = false;
      const std::vector<int>& ranked = m_stages[stage].workers;
      for (size_t r = 0; r < ranked.size(); ++r) {
        int w = ranked[r];
        if (m_down[static_cast<size_t>(w)]) {
          continue;
        }
        any_up = true;
        if (m_on_worker[static_cast<size_t>(w)] < m_limits.worker_slots[static_cast<size_t>(w)]) {
          placed.worker = w;
          placed.rank = static_cast<int>(r);
          break;
        }
        placed.busy.push_back(w);
      }
      if (!any_up) {
        ++it;
        skip(stage, "no-worker", SkipCause::no_worker);
        skip_dependants(stage);
        continue;
      }
      if (placed.worker < 0) {
        ++it; // every worker it may go to is full: it waits for one
        continue;
      }
    }
    size_t lane = m_stages[stage].lane;
    if (m_limits.max_lanes > 0 && m_running_in_lane[lane] == 0 &&
        m_busy_lanes >= m_limits.max_lanes) {
      ++it; // its lane waits for another lane to pause; a later stage may be in a busy one
      continue;
    }
    if (m_running_in_lane[lane]++ == 0) {
      ++m_busy_lanes;
    }
    const PlanStage& node = m_stages[stage];
    m_state[stage] = StageState::running;
    m_running.insert(stage);
    if (pooled) {
      ++m_on_worker[static_cast<size_t>(placed.worker)];
      m_worker_of[stage] = placed.worker;
      starts.push_back(std::move(placed));
      it = m_ready.erase(it);
      continue;
    }
    // A stage past the ones counted (its lane's turn came) still divides by its own weight.
    long share =
        node.reads_budget ? shared * node.weight / std::max(wanting, long{node.weight}) : 1;
    int slots = static_cast<int>(std::clamp<long>(share, 1, m_free_slots));
    m_free_slots -= slots;
    m_slots[stage] = slots;
    if (node.reads_budget) {
      m_weight_running += node.weight;
    } else {
      ++m_plain_running;
    }
    placed.slots = slots;
    starts.push_back(std::move(placed));
    it = m_ready.erase(it);
  }
  return starts;
}

void Scheduler::finish(size_t stage, bool succeeded) {
  if (m_running.erase(stage) == 0) {
    return;
  }
  if (--m_running_in_lane[m_stages[stage].lane] == 0) {
    --m_busy_lanes;
  }
  if (int w = m_worker_of[stage]; w >= 0) {
    --m_on_worker[static_cast<size_t>(w)];
    m_worker_of[stage] = -1;
  } else {
    m_free_slots += m_slots[stage];
    m_slots[stage] = 0;
    if (m_stages[stage].reads_budget) {
      m_weight_running -= m_stages[stage].weight;
    } else {
      --m_plain_running;
    }
  }
  if (succeeded) {
    m_state[stage] = StageState::succeeded;
    for (size_t dependant : m_dependants[stage]) {
      if (--m_unmet[dependant] == 0 && m_state[dependant] == StageState::waiting) {
        m_ready.insert(dependant);
      }
    }
    return;
  }
  m_state[stage] = StageState::failed;
  if (m_limits.fail_fast) {
    skip_waiting(m_stages[stage].name, SkipCause::fail_fast);
    return;
  }
  skip_dependants(stage);
}

void Scheduler::skip_dependants(size_t stage) {
  // Every stage downstream, named after the stage that did not succeed itself: the reader
  // looks for the cause, not for the stage in between.
  std::vector<size_t> todo = m_dependants[stage];
  while (!todo.empty()) {
    size_t next = todo.back();
    todo.pop_back();
    if (m_state[next] == StageState::waiting) {
      skip(next, m_stages[stage].name, SkipCause::need_failed);
      todo.insert(todo.end(), m_dependants[next].begin(), m_dependants[next].end());
    }
  }
}

void Scheduler::worker_down(int worker) {
  m_down[static_cast<size_t>(worker)] = true;
}

std::optional<StageStart> Scheduler::move(size_t stage) {
  int from = m_worker_of[stage];
  if (from < 0) {
    return std::nullopt;
  }
  const std::vector<int>& ranked = m_stages[stage].workers;
  std::optional<StageStart> best;
  std::optional<StageStart> fallback;
  std::vector<int> busy;
  for (size_t r = 0; r < ranked.size(); ++r) {
    int w = ranked[r];
    if (w == from || m_down[static_cast<size_t>(w)]) {
      continue;
    }
    if (m_on_worker[static_cast<size_t>(w)] < m_limits.worker_slots[static_cast<size_t>(w)]) {
      best = StageStart{stage, 1, w, static_cast<int>(r), busy};
      break;
    }
    busy.push_back(w);
    if (!fallback) {
      fallback = StageStart{stage, 1, w, static_cast<int>(r), {}};
    }
  }
  std::optional<StageStart> to = best ? best : fallback;
  if (to) {
    --m_on_worker[static_cast<size_t>(from)];
    ++m_on_worker[static_cast<size_t>(to->worker)];
    m_worker_of[stage] = to->worker;
  }
  return to;
}

void Scheduler::stop(const std::string& because) {
  skip_waiting(because, SkipCause::stopped);
}

void Scheduler::skip_waiting(const std::string& because, SkipCause cause) {
  for (size_t i = 0; i < m_stages.size(); ++i) {
    if (m_state[i] == StageState::waiting) {
      skip(i, because, cause);
    }
  }
}

void Scheduler::skip(size_t stage, const std::string& because, SkipCause cause) {
  m_state[stage] = StageState::skipped;
  m_because[stage] = because;
  m_cause[stage] = cause;
  m_skipped.push_back(stage);
  m_ready.erase(stage);
}

std::vector<size_t> Scheduler::take_skipped() {
  std::vector<size_t> skipped;
  skipped.swap(m_skipped);
  std::sort(skipped.begin(), skipped.end());
  return skipped;
}

} // namespace kiln
