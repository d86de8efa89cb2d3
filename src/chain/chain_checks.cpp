// Checks of the stages against each other once every table is read: needs name stages and
// form no cycle, Dockerfiles parse and name only the stages they need, cache tiers are
// exported by the chain, the final stage and the smoke stages fit, and what is published is
// tested and has one image per platform.
#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "chain/loader.h"
#include "chain/plan.h"
#include "dockerfile/declared_args.h"
#include "dockerfile/external_refs.h"
#include "dockerfile/source.h"
#include "util/strings.h"

namespace kiln::chain_loading {

void Loader::check_needs() {
  const std::vector<std::string> names = m_chain.stage_names();
  for (const auto& stage : m_chain.stages) {
    for (size_t i = 0; i < stage.needs.size(); ++i) {
      if (!m_stage_index.count(stage.needs[i])) {
        error(stage.needs_pos[i], fmt::format("unknown stage '{}' in needs", stage.needs[i]),
              did_you_mean(stage.needs[i], names, "stages"));
      }
    }
  }
}

void Loader::check_cycles() {
  std::vector<VisitState> state(m_chain.stages.size(), VisitState::unvisited);
  std::vector<size_t> path;
  for (size_t i = 0; i < m_chain.stages.size(); ++i) {
    if (state[i] == VisitState::unvisited) {
      visit(i, state, path);
    }
  }
}

// Depth-first search over needs; an edge back onto the current path closes a cycle.
void Loader::visit(size_t index, std::vector<VisitState>& state, std::vector<size_t>& path) {
  state[index] = VisitState::on_path;
  path.push_back(index);
  const Stage& stage = m_chain.stages[index];
  for (size_t i = 0; i < stage.needs.size(); ++i) {
    auto need = m_stage_index.find(stage.needs[i]);
    if (need == m_stage_index.end()) {
      continue;
    }
    if (state[need->second] == VisitState::unvisited) {
      visit(need->second, state, path);
    } else if (state[need->second] == VisitState::on_path) {
      std::vector<std::string> cycle;
      for (auto it = std::find(path.begin(), path.end(), need->second); it != path.end(); ++it) {
        cycle.push_back(m_chain.stages[*it].name);
      }
      cycle.push_back(need->first);
      error(stage.needs_pos[i], fmt::format("dependency cycle: {}", join(cycle, " -> ")),
            "remove one of these needs: a stage cannot depend on itself, directly or through "
            "others");
    }
  }
  path.pop_back();
  state[index] = VisitState::done;
}

void Loader::load_dockerfiles() {
  // Each file is read and parsed once, however many stages build from it.
  std::map<fs::path, std::shared_ptr<const DockerfileSource>> loaded;
  for (size_t i = 0; i < m_chain.stages.size(); ++i) {
    Stage& stage = m_chain.stages[i];
    const StageSource& source = m_sources[i];
    if (!source.dockerfile_found) {
      continue;
    }
    auto known = loaded.find(stage.dockerfile);
    if (known == loaded.end()) {
      auto dockerfile = load_dockerfile(stage.dockerfile);
      if (!dockerfile && dockerfile.error().pos.line == 0) {
        error(source.dockerfile_pos, dockerfile.error().message);
      } else if (!dockerfile) {
        Diagnostic parse_error = std::move(dockerfile.error());
        parse_error.message = "the Dockerfile does not parse: " + parse_error.message;
        parse_error.hint = fmt::format("fix this line: stage '{}' builds from this file ({}:{})",
                                       stage.name, m_name, source.dockerfile_pos.line);
        m_diagnostics.push_back(std::move(parse_error));
      }
      known = loaded.emplace(stage.dockerfile, dockerfile ? *dockerfile : nullptr).first;
    }
    if (!known->second) {
      continue;
    }
    stage.dockerfile_source = known->second;
    stage.declared_args = declared_args(known->second->parsed);
    for (size_t j = 0; j < stage.build_args.size(); ++j) {
      const std::string& name = stage.build_args[j].first;
      if (std::find(stage.declared_args.begin(), stage.declared_args.end(), name) ==
          stage.declared_args.end()) {
        error(stage.build_args_pos[j],
              fmt::format("build arg '{}' is not declared with ARG in {}, so the build would "
                          "ignore it",
                          name, source.dockerfile),
              fmt::format("declare 'ARG {}' in {} or remove it", name, source.dockerfile));
      }
    }
  }
}

// A stage builds on every chain stage its Dockerfile names (FROM, COPY --from, RUN --mount
// from=): each becomes a need, after the needs written, in chain-file order, so a plan does not
// change when a Dockerfile's lines move. Without it the stage would get no build context: the
// engine would pull an image of that name from a registry, and the run would not wait for the
// stage that builds it. A need is placed where the Dockerfile names it, so an error about it
// (a cycle, a smoke stage as parent) points at that line.
void Loader::infer_needs() {
  const std::vector<std::string> names = m_chain.stage_names();
  for (size_t i = 0; i < m_chain.stages.size(); ++i) {
    Stage& stage = m_chain.stages[i];
    if (!stage.dockerfile_source) {
      continue;
    }
    KeyValues args = stage_build_args(m_chain, stage, {});
    std::map<size_t, SourcePos> named; // by chain order
    for (const auto& ref :
         external_refs(stage.dockerfile_source->parsed, stage.target, {args.begin(), args.end()})) {
      std::string name = lower(ref.ref);
      SourcePos at{stage.dockerfile_source->path.string(), ref.pos.line, ref.pos.column};
      auto index = m_stage_index.find(name);
      if (index == m_stage_index.end()) {
        report_near_miss(ref.ref, ref.written, at, names);
        continue;
      }
      if (index->second == i) {
        error(at,
              fmt::format("{} names stage '{}' itself: a stage cannot build on its own image",
                          ref.written, name),
              "name another stage of the chain, or an image from a registry by its full path");
        continue;
      }
      named.emplace(index->second, at);
    }
    for (const auto& [index, at] : named) {
      const std::string& name = m_chain.stages[index].name;
      if (std::find(stage.needs.begin(), stage.needs.end(), name) == stage.needs.end()) {
        stage.needs.push_back(name);
        stage.needs_pos.push_back(at);
      }
    }
  }
}

// `FROM toolchian` is no chain stage, so the engine would go to a registry for it and fail with
// "pull access denied" long after the run started. A bare name (no registry, tag or digest) one
// typo away from a stage is that mistake: an image from a registry is written in full.
void Loader::report_near_miss(std::string_view ref, std::string_view written, SourcePos at,
                              const std::vector<std::string>& names) {
  if (ref.find_first_of("/:@$") != std::string_view::npos) {
    return;
  }
  std::string match = closest_match(lower(ref), names);
  if (!match.empty()) {
    error(at, fmt::format("{} names '{}', which is no stage of the chain", written, ref),
          fmt::format("did you mean '{}'? An image from a registry is named in full, e.g. "
                      "docker.io/library/{}:<tag>",
                      match, ref));
  }
}

void Loader::check_gates() {
  GateSettings& gates = m_chain.gates;
  for (const auto& stage : m_chain.stages) {
    if (stage.kind == StageKind::smoke && stage.needs.empty()) {
      error(stage.pos,
            fmt::format("smoke stage '{}' needs no stage, so it tests nothing", stage.name),
            "add needs = [\"<the image it tests>\"]");
    }
    for (size_t i = 0; i < stage.needs.size(); ++i) {
      const Stage* need = m_chain.find_stage(stage.needs[i]);
      if (need && need->kind == StageKind::smoke) {
        error(stage.needs_pos[i],
              fmt::format("stage '{}' needs smoke stage '{}', whose image is a test run, not a "
                          "parent",
                          stage.name, need->name),
              "need the stage the smoke stage tests instead");
      }
    }
  }
  if (gates.final_stage.empty()) {
    for (const auto& stage : m_chain.stages) {
      if (stage.kind == StageKind::build) {
        gates.final_stage = stage.name;
      }
    }
    return;
  }
  const Stage* final_stage = m_chain.find_stage(gates.final_stage);
  if (!final_stage) {
    error(gates.final_pos,
          fmt::format("final stage '{}' is not a stage of this chain", gates.final_stage),
          did_you_mean(gates.final_stage, m_chain.stage_names(), "stages"));
  } else if (final_stage->kind == StageKind::smoke) {
    error(gates.final_pos,
          fmt::format("final stage '{}' is a smoke stage; the final stage is the published image",
                      gates.final_stage),
          "name the stage whose image is published");
  }
}

void Loader::check_cache_tiers() {
  if (m_chain.engine != "buildkit") {
    // buildah has no cache import or export; a tier it silently ignored would look insured.
    std::string hint = m_options.engine.empty()
                           ? "set engine = \"buildkit\" in [chain], or run with --engine buildkit"
                           : "run with --engine buildkit, or drop the cache settings";
    if (m_registry_pos) {
      error(*m_registry_pos,
            "'registry' hands stages over by push, which only the buildkit "
            "engine does",
            hint);
    }
    for (const auto& stage : m_chain.stages) {
      for (const auto* specs : {&stage.cache_from, &stage.cache_to}) {
        for (const auto& spec : *specs) {
          error(spec.pos,
                fmt::format("stage '{}' names cache tier '{}', which only the buildkit engine "
                            "has",
                            stage.name, spec.text),
                hint);
        }
      }
      if (stage.snapshot_to) {
        error(stage.snapshot_to->pos,
              fmt::format("stage '{}' names a snapshot cache, which only the buildkit engine "
                          "has",
                          stage.name),
              hint);
      }
    }
    return;
  }
  // Every registry cache a stage imports must be written by something in this chain: an import
  // whose export is switched off misses on every build, so every stage rebuilds from scratch.
  std::vector<std::string> exported;
  for (const auto& stage : m_chain.stages) {
    for (const auto& spec : stage.cache_to) {
      if (spec.attr("type") == "registry") {
        exported.push_back(spec.attr("ref"));
      } else if (m_chain.registry.empty()) {
        error(spec.pos,
              fmt::format("stage '{}' exports an inline cache, which travels inside a pushed "
                          "image, but the chain pushes nothing",
                          stage.name),
              "name a registry in [chain] registry, or remove type=inline");
      } else {
        exported.push_back(m_chain.pushed_ref(stage));
      }
    }
    if (stage.snapshot_to) {
      exported.push_back(stage.snapshot_to->attr("ref"));
    }
  }
  for (const auto& stage : m_chain.stages) {
    for (const auto& spec : stage.cache_from) {
      std::string ref = spec.attr("ref");
      if (std::find(exported.begin(), exported.end(), ref) == exported.end()) {
        error(spec.pos,
              fmt::format("stage '{}' imports cache '{}', which no stage of this chain exports: "
                          "the import would miss on every build and the stage rebuild from "
                          "scratch",
                          stage.name, ref),
              fmt::format("add cache_to = [\"type=registry,ref={},mode=max\"] (or "
                          "snapshot_cache_to) to the stage that builds it, or remove this "
                          "cache_from",
                          ref));
      }
    }
  }
}

void Loader::check_publish() {
  check_publish_guarded();
  if (m_chain.publish.index.empty()) {
    return;
  }
  if (m_chain.lanes.empty()) {
    error(m_chain.publish.pos,
          "an index is assembled from the lanes' final images, and the chain has no [[lane]] "
          "tables",
          "add a [[lane]] table with a platform for each platform of the image, or leave "
          "[publish] index out");
    return;
  }
  const Stage* final_stage = m_chain.find_stage(m_chain.gates.final_stage);
  if (final_stage == nullptr) {
    return; // check_gates said why
  }
  std::map<std::string, std::string> lane_of_platform;
  for (const auto& lane : m_chain.lanes) {
    if (!runs_in(*final_stage, lane.name)) {
      continue;
    }
    if (lane.platform.empty()) {
      error(lane.pos,
            fmt::format("lane '{}' has no platform, and its '{}' image is an entry of the index",
                        lane.name, final_stage->name),
            "add platform = \"os/arch\" to the lane");
    } else if (auto [seen, fresh] = lane_of_platform.emplace(lane.platform, lane.name); !fresh) {
      error(lane.pos,
            fmt::format("lanes '{}' and '{}' both build platform {}, and an index has one image "
                        "per platform",
                        seen->second, lane.name, lane.platform),
            fmt::format("give one of them another platform, or limit the lanes of '{}'",
                        final_stage->name));
    }
  }
}

void Loader::check_publish_guarded() {
  const bool registry = !m_chain.registry.empty() && m_chain.engine == "buildkit";
  if ((m_chain.publish.index.empty() && !registry) || !m_chain.publish.require_smoke) {
    return;
  }
  const Stage* final_stage = m_chain.find_stage(m_chain.gates.final_stage);
  if (final_stage == nullptr) {
    return; // check_gates said why
  }
  // The smoke stages that build on the final image, directly or through other stages.
  auto needs_final = [&](const Stage& stage) {
    std::vector<const Stage*> todo = {&stage};
    std::set<std::string> seen;
    while (!todo.empty()) {
      const Stage* at = todo.back();
      todo.pop_back();
      for (const auto& need : at->needs) {
        if (need == final_stage->name) {
          return true;
        }
        if (const Stage* next = m_chain.find_stage(need); next && seen.insert(need).second) {
          todo.push_back(next);
        }
      }
    }
    return false;
  };
  std::vector<std::string> unguarded;
  std::vector<std::string> lanes;
  for (const auto& lane : m_chain.lanes) {
    lanes.push_back(lane.name);
  }
  if (lanes.empty()) {
    lanes.emplace_back();
  }
  for (const auto& lane : lanes) {
    if (!lane.empty() && !runs_in(*final_stage, lane)) {
      continue;
    }
    bool guarded = std::any_of(m_chain.stages.begin(), m_chain.stages.end(), [&](const Stage& s) {
      return s.kind == StageKind::smoke && (lane.empty() || runs_in(s, lane)) && needs_final(s);
    });
    if (!guarded) {
      unguarded.push_back(lane.empty() ? final_stage->name : lane + "/" + final_stage->name);
    }
  }
  if (!unguarded.empty()) {
    error(!m_chain.publish.index.empty() ? m_chain.publish.pos : *m_registry_pos,
          fmt::format("the chain publishes {} ({}), and no smoke stage needs it: an image would "
                      "leave the host untested",
                      join(unguarded, ", "),
                      !m_chain.publish.index.empty() ? "[publish] index" : "[chain] registry"),
          fmt::format("add a [[stage]] with kind = \"smoke\" and needs = [\"{}\"] that runs its "
                      "tests, or say the chain publishes without one: [publish] require_smoke = "
                      "false",
                      final_stage->name));
  }
}

} // namespace kiln::chain_loading
