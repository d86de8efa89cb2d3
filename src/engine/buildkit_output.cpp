#include "engine/buildkit_output.h"

#include <algorithm>
#include <set>

namespace kiln {

std::string without_quoted_command(std::string_view message) {
  constexpr std::string_view k_open = "process \"";
  constexpr std::string_view k_close = "\" did not complete successfully";
  size_t open = message.find(k_open);
  size_t close = message.rfind(k_close);
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::string(message);
  }
  return std::string(message.substr(0, open)) + "process" + std::string(message.substr(close + 1));
}

bool BuildkitOutput::feed(std::string_view line) {
  LineKind kind = m_plain.feed(line);
  if (kind == LineKind::other || kind == LineKind::client_log) {
    m_other.emplace_back(line);
    if (m_other.size() > k_failure_tail_lines) {
      m_other.pop_front();
    }
  }
  if (kind == LineKind::log) {
    return false; // a step's output changes no step and no count: the most common line, cheap
  }
  BuildProgress before = m_progress;
  if (const Vertex* vertex = m_plain.current(); vertex && vertex->kind == VertexKind::step) {
    m_progress.build_stage_name = vertex->stage;
    m_progress.step = vertex->step;
    m_progress.steps = vertex->steps;
    m_progress.instruction = vertex->instruction;
  }
  m_progress.steps_run = m_plain.steps();
  m_progress.steps_cached = m_plain.steps_cached();
  const auto& vertices = m_plain.vertices();
  m_progress.vertices = static_cast<int>(vertices.size());
  m_progress.vertices_cached =
      static_cast<int>(std::count_if(vertices.begin(), vertices.end(), [](const Vertex& v) {
        return v.state == VertexState::cached;
      }));
  return m_progress.step != before.step || m_progress.steps != before.steps ||
         m_progress.build_stage_name != before.build_stage_name ||
         m_progress.steps_run != before.steps_run ||
         m_progress.steps_cached != before.steps_cached || m_progress.vertices != before.vertices ||
         m_progress.vertices_cached != before.vertices_cached;
}

Tail BuildkitOutput::evidence() const {
  return failure_lines(false);
}

Tail BuildkitOutput::engine_evidence() const {
  return failure_lines(true);
}

Tail BuildkitOutput::failure_lines(bool engine_only) const {
  Tail evidence;
  const auto& vertices = m_plain.vertices();
  // The last vertex that failed: an earlier one (a registry cache import that could not
  // connect) may have failed without failing the build.
  auto failed = std::find_if(vertices.rbegin(), vertices.rend(),
                             [](const Vertex& v) { return v.state == VertexState::error; });
  if (failed != vertices.rend()) {
    const bool run_step =
        failed->kind == VertexKind::step &&
        (failed->instruction.starts_with("RUN ") || failed->instruction.starts_with("run "));
    size_t first = engine_only && run_step ? failed->logs.size()
                   : failed->logs.size() > k_failure_tail_lines
                       ? failed->logs.size() - k_failure_tail_lines
                       : 0;
    evidence.assign(failed->logs.begin() + static_cast<std::ptrdiff_t>(first), failed->logs.end());
    evidence.push_back("ERROR: " + without_quoted_command(failed->error));
  }
  evidence.insert(evidence.end(), m_other.begin(), m_other.end());
  if (!m_plain.solve_error().empty()) {
    evidence.push_back("error: " + without_quoted_command(m_plain.solve_error()));
  }
  if (evidence.size() > k_failure_tail_lines) {
    evidence.erase(evidence.begin(),
                   evidence.end() - static_cast<std::ptrdiff_t>(k_failure_tail_lines));
  }
  return evidence;
}

std::vector<std::string> BuildkitOutput::finished_build_stages() const {
  struct Seen {
    int steps = 0;          // how many steps the stage has
    bool agreed = true;     // every step of it said the same
    std::set<int> finished; // step numbers, 1..steps
  };
  std::vector<std::pair<std::string, Seen>> stages;
  for (const Vertex& v : m_plain.vertices()) {
    if (v.kind != VertexKind::step || v.stage.empty() || v.step < 1 || v.step > v.steps) {
      continue;
    }
    auto it = std::find_if(stages.begin(), stages.end(),
                           [&](const auto& s) { return s.first == v.stage; });
    if (it == stages.end()) {
      stages.push_back({v.stage, {v.steps, true, {}}});
      it = stages.end() - 1;
    }
    // Output that numbers one stage's steps two ways says nothing certain about it.
    it->second.agreed = it->second.agreed && it->second.steps == v.steps;
    if (v.state == VertexState::done || v.state == VertexState::cached) {
      it->second.finished.insert(v.step);
    }
  }
  std::vector<std::string> finished;
  for (const auto& [name, seen] : stages) {
    if (seen.agreed && static_cast<int>(seen.finished.size()) == seen.steps) {
      finished.push_back(name);
    }
  }
  return finished;
}

std::string BuildkitOutput::failed_build_stage() const {
  const auto& vertices = m_plain.vertices();
  auto failed = std::find_if(vertices.rbegin(), vertices.rend(), [](const Vertex& v) {
    return v.state == VertexState::error && v.kind == VertexKind::step;
  });
  return failed == vertices.rend() ? std::string() : failed->stage;
}

std::vector<StepSeen> BuildkitOutput::steps() const {
  std::vector<StepSeen> seen;
  for (const Vertex& vertex : m_plain.vertices()) {
    if (vertex.kind == VertexKind::step && !vertex.instruction.starts_with("FROM ")) {
      seen.push_back({vertex.instruction, vertex.state == VertexState::cached});
    }
  }
  return seen;
}

} // namespace kiln
