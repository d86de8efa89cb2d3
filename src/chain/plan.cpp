#include "chain/plan.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "util/strings.h"

namespace kiln {

namespace {

std::string unknown_stage(const Chain& chain, const std::string& name, std::string_view option) {
  const std::vector<std::string> names = chain.stage_names();
  std::string message = fmt::format("unknown stage '{}' in {}", name, option);
  std::string suggestion = closest_match(name, names);
  if (!suggestion.empty()) {
    return fmt::format("{} (did you mean '{}'?)", message, suggestion);
  }
  return fmt::format("{} (stages: {})", message, join(names, ", "));
}

void set_value(KeyValues& values, const std::string& key, const std::string& value) {
  auto it =
      std::find_if(values.begin(), values.end(), [&](const auto& kv) { return kv.first == key; });
  if (it != values.end()) {
    it->second = value;
  } else {
    values.emplace_back(key, value);
  }
}

} // namespace

std::vector<const Stage*> run_order(const Chain& chain) {
  std::vector<const Stage*> order;
  std::set<std::string> placed;
  while (order.size() < chain.stages.size()) {
    auto ready = std::find_if(chain.stages.begin(), chain.stages.end(), [&](const Stage& stage) {
      return !placed.count(stage.name) &&
             std::all_of(stage.needs.begin(), stage.needs.end(),
                         [&](const std::string& need) { return placed.count(need) > 0; });
    });
    // Only a cycle leaves nothing ready, and a validated chain has none.
    if (ready == chain.stages.end()) {
      break;
    }
    placed.insert(ready->name);
    order.push_back(&*ready);
  }
  return order;
}

std::vector<const Stage*> one_stage_per_dockerfile(const std::vector<const Stage*>& stages) {
  std::vector<const Stage*> firsts;
  for (const Stage* stage : stages) {
    const DockerfileSource* source = stage->dockerfile_source.get();
    if (source != nullptr && std::none_of(firsts.begin(), firsts.end(), [&](const Stage* first) {
          return first->dockerfile_source.get() == source;
        })) {
      firsts.push_back(stage);
    }
  }
  return firsts;
}

tl::expected<std::vector<const Stage*>, std::string> select_stages(const Chain& chain,
                                                                   const Selection& selection) {
  if (!selection.only.empty() && !selection.from.empty()) {
    return tl::unexpected(std::string("use --only or --from, not both"));
  }
  // With lanes, a stage is named with its lane (amd64/libs) or without it, for every lane.
  auto named = [](const Stage* stage, const std::string& name) {
    return stage->name == name || stage->known_as() == name;
  };
  std::vector<const Stage*> order = run_order(chain);
  for (const auto& lane : selection.lanes) {
    if (chain.find_lane(lane) == nullptr) {
      std::vector<std::string> names;
      for (const auto& each : chain.lanes) {
        names.push_back(each.name);
      }
      if (chain.lanes.empty()) {
        return tl::unexpected(fmt::format("--lane {}: the chain has no [[lane]] tables", lane));
      }
      std::string suggestion = closest_match(lane, names);
      return tl::unexpected(fmt::format("unknown lane '{}' in --lane ({})", lane,
                                        suggestion.empty() ? "lanes: " + join(names, ", ")
                                                           : "did you mean '" + suggestion + "'?"));
    }
  }
  if (!selection.lanes.empty()) {
    std::erase_if(order, [&](const Stage* stage) {
      return std::find(selection.lanes.begin(), selection.lanes.end(), stage->lane) ==
             selection.lanes.end();
    });
  }
  auto unknown = [&](const std::string& name) {
    return std::none_of(order.begin(), order.end(),
                        [&](const Stage* stage) { return named(stage, name); });
  };
  if (!selection.only.empty()) {
    for (const auto& name : selection.only) {
      if (unknown(name)) {
        return tl::unexpected(unknown_stage(chain, name, "--only"));
      }
    }
    std::erase_if(order, [&](const Stage* stage) {
      return std::none_of(selection.only.begin(), selection.only.end(),
                          [&](const std::string& name) { return named(stage, name); });
    });
    return order;
  }
  if (!selection.from.empty()) {
    if (unknown(selection.from)) {
      return tl::unexpected(unknown_stage(chain, selection.from, "--from"));
    }
    // From that stage on, in each lane it is in.
    std::set<std::string> started;
    std::erase_if(order, [&](const Stage* stage) {
      if (named(stage, selection.from)) {
        started.insert(stage->lane);
      }
      return started.count(stage->lane) == 0;
    });
  }
  return order;
}

KeyValues stage_build_args(const Chain& chain, const Stage& stage, const KeyValues& overrides) {
  KeyValues args;
  static const KeyValues none;
  const Lane* lane = chain.find_lane(stage.lane);
  for (const KeyValues* layer : {&chain.versions, &stage.build_args,
                                 lane != nullptr ? &lane->build_args : &none, &overrides}) {
    for (const auto& [key, value] : *layer) {
      set_value(args, key, value);
    }
  }
  std::erase_if(args, [&](const auto& kv) {
    return std::find(stage.declared_args.begin(), stage.declared_args.end(), kv.first) ==
           stage.declared_args.end();
  });
  return args;
}

std::string build_arg_source(const Chain& chain, const Stage& stage, const KeyValues& overrides,
                             const std::string& name) {
  auto sets = [&](const KeyValues& layer) {
    return std::any_of(layer.begin(), layer.end(),
                       [&](const auto& kv) { return kv.first == name; });
  };
  const Lane* lane = chain.find_lane(stage.lane);
  if (sets(overrides)) {
    return "--build-arg";
  }
  if (lane != nullptr && sets(lane->build_args)) {
    return "lane " + lane->name;
  }
  if (sets(stage.build_args)) {
    return "chain file";
  }
  return chain.versions_file.empty() ? std::string("versions")
                                     : chain.versions_file.filename().string();
}

} // namespace kiln
