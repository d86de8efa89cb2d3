#include "driver/build_request.h"

#include <algorithm>

#include "chain/plan.h"
#include "dockerfile/mounts.h"
#include "dockerfile/source.h"

namespace kiln {

std::filesystem::path stage_layout(const Chain& chain, const std::string& stage) {
  return chain.records / "oci" / stage;
}

std::filesystem::path stage_metadata(const Chain& chain, const std::string& stage) {
  return chain.records / "oci" / (stage + ".metadata.json");
}

std::filesystem::path budget_file(const Chain& chain, const std::string& stage) {
  return chain.records / "budget" / (stage + ".env");
}

NamedContext stage_context(const Chain& chain, const Stage& stage) {
  return {stage.known_as(), stage.tag, stage_layout(chain, stage.name),
          stage_metadata(chain, stage.name),
          chain.registry.empty() ? std::string() : chain.pushed_ref(stage)};
}

bool leaves_host(const Chain& chain, const Stage& stage) {
  return stage.known_as() == chain.gates.final_stage &&
         (!chain.registry.empty() || !chain.publish.index.empty());
}

KeyValues provenance_labels(const Chain& chain, const Stage& stage, const KeyValues& build_args) {
  KeyValues labels = {{"dev.kiln.chain", chain.name}, {"dev.kiln.stage", stage.known_as()}};
  if (!stage.lane.empty()) {
    labels.emplace_back("dev.kiln.lane", stage.lane);
  }
  std::string pins;
  for (const auto& [name, value] : build_args) {
    bool pinned = std::any_of(chain.versions.begin(), chain.versions.end(),
                              [&](const auto& pin) { return pin.first == name; });
    if (pinned) {
      pins += (pins.empty() ? "" : ",") + name + "=" + value;
    }
  }
  if (!pins.empty()) {
    labels.emplace_back("dev.kiln.pins", pins);
  }
  return labels;
}

void stamp_run(BuildRequest& request, const std::string& run_id) {
  request.labels.emplace_back(k_run_id_label, run_id);
}

BuildRequest build_request(const Chain& chain, const Stage& stage, const KeyValues& overrides,
                           const std::filesystem::path& tools) {
  BuildRequest request;
  request.stage = stage.name;
  if (const Lane* lane = chain.find_lane(stage.lane)) {
    request.platform = lane->platform;
    request.host = lane->host;
    request.tls_ca = lane->ca;
    request.tls_cert = lane->cert;
    request.tls_key = lane->key;
  }
  request.tools = tools;
  request.dockerfile = stage.dockerfile;
  request.context = stage.context;
  request.target = stage.target;
  request.tag = stage.tag;
  request.build_args = stage_build_args(chain, stage, overrides);
  request.labels = provenance_labels(chain, stage, request.build_args);
  for (const auto& need : stage.needs) {
    request.contexts.push_back(stage_context(chain, *chain.find_stage(need)));
  }
  request.secrets = stage.secrets;
  if (stage.dockerfile_source && mounts_secret(stage.dockerfile_source->parsed, k_budget_secret)) {
    request.secrets.push_back({k_budget_secret, {}, budget_file(chain, stage.name), stage.pos});
  }
  request.layout = stage_layout(chain, stage.name);
  request.metadata = stage_metadata(chain, stage.name);
  if (!chain.registry.empty()) {
    request.pushed = chain.pushed_ref(stage);
  }
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
