// Lanes: reading [[lane]] tables, checking which lanes each stage runs in, and expanding the
// stages into one copy per lane.
#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "chain/loader.h"

namespace kiln::chain_loading {

namespace {

/// `localhost/hello-base:latest` in lane amd64 is `localhost/hello-base-amd64:latest`.
std::string lane_tag(const std::string& tag, const std::string& lane) {
  size_t slash = tag.rfind('/');
  size_t colon = tag.rfind(':');
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash)) {
    return tag + "-" + lane;
  }
  return tag.substr(0, colon) + "-" + lane + tag.substr(colon);
}

} // namespace

void Loader::read_lane(const toml::table& table) {
  const std::string_view where = "in [[lane]]";
  check_keys(table, where, k_lane_keys);
  Lane lane;
  lane.pos = pos(table);
  if (const auto* name = get<std::string>(table, where, "name", true)) {
    lane.name = name->get();
    if (!is_lower_name(lane.name, false)) {
      error(pos(*name), fmt::format("lane name '{}' is not valid", lane.name),
            "use lower-case letters, digits, '_', '.' and '-', starting with a letter: it names "
            "the lane's images and folders");
    } else if (m_chain.find_lane(lane.name) != nullptr) {
      error(pos(*name), fmt::format("duplicate lane name '{}'", lane.name), "rename one of them");
    }
  }
  if (const auto* platform = get<std::string>(table, where, "platform")) {
    auto normal = normalize_platform(platform->get());
    if (normal) {
      lane.platform = *normal;
    } else {
      lane.platform = platform->get();
      error(pos(*platform), fmt::format("platform '{}' {}", lane.platform, normal.error()),
            "write os/arch[/variant], e.g. \"linux/arm64\" or \"linux/amd64/v3\"");
    }
  }
  if (const auto* host = get<std::string>(table, where, "host")) {
    lane.host = host->get();
    if (std::string wrong = host_address_problem(lane.host); !wrong.empty()) {
      error(pos(*host), fmt::format("lane host '{}' {}", lane.host, wrong),
            "write unix:///path/to/buildkitd.sock or tcp://host:port");
    }
  }
  for (auto [key, file] :
       {std::pair{"ca", &lane.ca}, std::pair{"cert", &lane.cert}, std::pair{"key", &lane.key}}) {
    if (const auto* path = get<std::string>(table, where, key)) {
      if (auto found = existing_path(*path, fmt::format("lane {} file", key), PathKind::file)) {
        *file = *found;
      }
    }
  }
  if (const auto* build_args = get<toml::table>(table, where, "build_args")) {
    read_build_args(*build_args, lane.build_args, nullptr);
  }
  read_names(table, "workers", "a worker name",
             "write workers = [\"bk1\", ...] with names of [[worker]] tables", lane.workers,
             lane.workers_pos, "[[lane]]");
  m_chain.lanes.push_back(std::move(lane));
}

bool runs_in(const Stage& stage, const std::string& lane) {
  return stage.lanes.empty() ||
         std::find(stage.lanes.begin(), stage.lanes.end(), lane) != stage.lanes.end();
}

void Loader::check_lanes() {
  std::vector<std::string> names;
  for (const auto& lane : m_chain.lanes) {
    names.push_back(lane.name);
  }
  for (const auto& stage : m_chain.stages) {
    if (!m_chain.lanes.empty() && !stage.lane.empty()) {
      error(stage.pos,
            fmt::format("stage '{}' sets 'lane' while the chain has [[lane]] tables", stage.name),
            "leave 'lane' out: each copy of the stage takes its lane's name; use 'lanes' to "
            "choose the lanes it runs in");
    }
    for (size_t i = 0; i < stage.lanes.size(); ++i) {
      if (m_chain.find_lane(stage.lanes[i]) == nullptr) {
        error(stage.lanes_pos[i],
              m_chain.lanes.empty()
                  ? fmt::format("stage '{}' names lane '{}', but the chain has no [[lane]] tables",
                                stage.name, stage.lanes[i])
                  : fmt::format("unknown lane '{}' in lanes", stage.lanes[i]),
              m_chain.lanes.empty() ? "add a [[lane]] table with that name, or leave 'lanes' out"
                                    : did_you_mean(stage.lanes[i], names, "lanes"));
      }
    }
  }
  // A stage runs only in lanes where every stage it needs runs too.
  for (const auto& stage : m_chain.stages) {
    for (size_t i = 0; i < stage.needs.size(); ++i) {
      const Stage* need = m_chain.find_stage(stage.needs[i]);
      if (need == nullptr) {
        continue;
      }
      for (const auto& lane : m_chain.lanes) {
        if (runs_in(stage, lane.name) && !runs_in(*need, lane.name)) {
          error(stage.needs_pos[i],
                fmt::format("stage '{}' runs in lane '{}', but '{}', which it needs, does not",
                            stage.name, lane.name, need->name),
                fmt::format("add \"{}\" to the lanes of '{}', or limit the lanes of '{}'",
                            lane.name, need->name, stage.name));
          break;
        }
      }
    }
  }
}

void Loader::expand_lanes() {
  if (m_chain.lanes.empty()) {
    return;
  }
  std::vector<Stage> copies;
  for (const auto& lane : m_chain.lanes) {
    for (const auto& stage : m_chain.stages) {
      if (!runs_in(stage, lane.name)) {
        continue;
      }
      Stage copy = stage;
      copy.name = lane.name + "/" + stage.name;
      copy.lane = lane.name;
      copy.lanes = {lane.name};
      copy.tag = lane_tag(stage.tag, lane.name);
      for (auto& need : copy.needs) {
        need = lane.name + "/" + need;
      }
      copies.push_back(std::move(copy));
    }
  }
  m_chain.stages = std::move(copies);
}

} // namespace kiln::chain_loading
