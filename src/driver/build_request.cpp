#include "driver/build_request.h"

#include <algorithm>

#include "chain/plan.h"
#include "dockerfile/mounts.h"
#include "dockerfile/source.h"
#include "driver/image_gates.h"
#include "util/image_ref.h"
#include "util/sha256.h"

namespace kiln {

std::filesystem::path stage_layout(const Chain& chain, const std::string& stage) {
  return chain.records / "oci" / stage;
}

std::filesystem::path stage_metadata(const Chain& chain, const std::string& stage) {
  return chain.records / "oci" / (stage + ".metadata.json");
}

bool reads_budget(const Stage& stage) {
  return stage.dockerfile_source && mounts_secret(stage.dockerfile_source->parsed, k_budget_secret);
}

std::filesystem::path budget_file(const Chain& chain, const std::string& stage) {
  return chain.records / "budget" / (stage + ".env");
}

std::string checkout_key(const Chain& chain) {
  return sha256_digest(chain.records.string()).substr(7, 8);
}

std::string work_tag(const Chain& chain, const Stage& stage) {
  auto ref = parse_image_ref(stage.tag); // the loader refused a tag that does not parse
  std::string key = checkout_key(chain);
  if (!ref) {
    return stage.tag + "-kiln-" + key;
  }
  std::string tag = ref->tag.empty() ? "latest" : ref->tag;
  return ref->repository() + ":" + tag.substr(0, 100) + "-kiln-" + key;
}

bool work_name_removable(const Chain& chain, const Stage& stage) {
  return !stage.stable_name && stage.known_as() != chain.gates.final_stage;
}

bool handed_over_by_push(const Chain& chain, const Stage& stage) {
  // A stage nothing needs (a smoke stage, as a rule) is handed to no one: nothing to push.
  bool needed = std::any_of(chain.stages.begin(), chain.stages.end(), [&](const Stage& other) {
    return std::find(other.needs.begin(), other.needs.end(), stage.name) != other.needs.end();
  });
  return !chain.registry.empty() && needed && !layers_read_after_build(chain, stage);
}

NamedContext stage_context(const Chain& chain, const Stage& stage) {
  std::string pushed;
  if (handed_over_by_push(chain, stage)) {
    auto ref = parse_image_ref(chain.pushed_ref(stage));
    pushed = ref ? ref->repository() : chain.pushed_ref(stage);
  }
  return {stage.known_as(), work_tag(chain, stage), stage_layout(chain, stage.name),
          stage_metadata(chain, stage.name), pushed};
}

KeyValues provenance_labels(const Chain& chain, const Stage& stage, const KeyValues& build_args) {
  KeyValues labels = {{"dev.kiln.chain", chain.name},
                      {"dev.kiln.stage", stage.known_as()},
                      {"dev.kiln.lane", stage.lane}};
  std::string pins;
  for (const auto& [name, value] : build_args) {
    bool pinned = std::any_of(chain.versions.begin(), chain.versions.end(),
                              [&](const auto& pin) { return pin.first == name; });
    if (pinned) {
      pins += (pins.empty() ? "" : ",") + name + "=" + value;
    }
  }
  labels.emplace_back("dev.kiln.pins", pins);
  return labels;
}

BuildRequest build_request(const Chain& chain, const Stage& stage, const KeyValues& overrides,
                           const std::filesystem::path& tools) {
  BuildRequest request;
  request.stage = stage.name;
  if (const Lane* lane = chain.find_lane(stage.lane)) {
    request.platform = lane->platform;
    request.host = lane->host;
    request.host_from = "[[lane]] " + lane->name;
    request.tls_ca = lane->ca;
    request.tls_cert = lane->cert;
    request.tls_key = lane->key;
  }
  request.tools = tools;
  request.dockerfile = stage.dockerfile;
  request.context = stage.context;
  request.target = stage.target;
  request.tag = work_tag(chain, stage);
  request.build_args = stage_build_args(chain, stage, overrides);
  request.labels = provenance_labels(chain, stage, request.build_args);
  for (const auto& need : stage.needs) {
    request.contexts.push_back(stage_context(chain, *chain.find_stage(need)));
  }
  request.secrets = stage.secrets;
  if (reads_budget(stage)) {
    request.secrets.push_back({k_budget_secret, {}, budget_file(chain, stage.name), stage.pos});
  }
  request.layout = stage_layout(chain, stage.name);
  request.metadata = stage_metadata(chain, stage.name);
  request.pushed = stage_context(chain, stage).pushed;
  for (const auto& spec : stage.cache_from) {
    request.cache_from.push_back(spec.text);
  }
  for (const auto& spec : stage.cache_to) {
    request.cache_to.push_back(spec.text);
  }
  if (stage.cache_local) {
    request.cache_slug = chain.cache_slug(stage);
  }
  return request;
}

} // namespace kiln
