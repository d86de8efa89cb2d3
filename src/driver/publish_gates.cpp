#include "driver/publish_gates.h"

#include <fmt/format.h>

#include "util/strings.h"

namespace kiln {

namespace {

std::string label(const ImageConfig& config, const std::string& key) {
  auto it = config.labels.find(key);
  return it == config.labels.end() ? std::string() : it->second;
}

IndexLaneRecord classify(const PublishImage& image) {
  IndexLaneRecord lane;
  lane.lane = image.lane;
  lane.stage = image.stage;
  lane.platform = image.platform;
  lane.identity = image.identity;
  if (!image.identity.empty() && image.config) {
    lane.image = "built-this-run";
    return lane;
  }
  lane.image = "missing";
  lane.detail = image.outcome.empty()     ? "this run did not build " + image.stage
                : !image.identity.empty() ? image.config.error()
                                          : fmt::format("{} ended {}", image.stage, image.outcome);
  return lane;
}

GateRecord gate(const std::string& name, const std::string& ref,
                std::vector<std::string> findings) {
  GateRecord record;
  record.gate = name;
  record.subject = ref;
  record.verdict = findings.empty() ? "pass" : "refused";
  record.findings = std::move(findings);
  return record;
}

std::string lane_name(const PublishImage& image) {
  return image.lane.empty() ? image.stage : "lane " + image.lane;
}

std::vector<std::string> completeness(const std::vector<PublishImage>& images,
                                      const std::vector<IndexLaneRecord>& lanes) {
  std::vector<std::string> findings;
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (lanes[i].image == "missing") {
      findings.push_back(fmt::format("{}: no image of {} from this run: {}", lane_name(images[i]),
                                     lanes[i].stage, lanes[i].detail));
    }
    for (const auto& unfinished : images[i].unfinished) {
      findings.push_back(fmt::format("{}: {}", lane_name(images[i]), unfinished));
    }
  }
  return findings;
}

std::vector<std::string> smoke(const std::vector<PublishImage>& images) {
  std::vector<std::string> findings;
  for (const auto& image : images) {
    for (const auto& untested : image.untested) {
      findings.push_back(fmt::format("{}: smoke stage {} did not run in this run, so {} is "
                                     "untested; run it with the image (or the whole chain)",
                                     lane_name(image), untested, image.stage));
    }
  }
  return findings;
}

std::vector<std::string> coherence(const std::vector<PublishImage>& images) {
  std::vector<std::string> findings;
  const PublishImage* first = nullptr;
  for (const auto& image : images) {
    const ImageConfig& config = *image.config; // completeness passed: every image is there
    if (!image.platform.empty() && !same_platform(config.platform(), image.platform)) {
      findings.push_back(fmt::format("{}: its image is for {}, and the lane builds {}",
                                     lane_name(image), config.platform(), image.platform));
    }
    if (first == nullptr) {
      first = &image;
      continue;
    }
    for (const char* key : {"dev.kiln.chain", "dev.kiln.pins"}) {
      if (label(config, key) != label(*first->config, key)) {
        findings.push_back(fmt::format("{}: {} is '{}', {}'s is '{}'", lane_name(image), key,
                                       label(config, key), lane_name(*first),
                                       label(*first->config, key)));
      }
    }
  }
  return findings;
}

} // namespace

const std::vector<std::string>& publish_steps() {
  static const std::vector<std::string> k_steps = {"push", "read-back", "sign", "tag"};
  return k_steps;
}

PublishVerdict judge_publish(const std::string& ref, const std::vector<PublishImage>& images) {
  PublishVerdict verdict;
  for (const auto& image : images) {
    verdict.lanes.push_back(classify(image));
  }
  const std::vector<std::string> order = {"completeness", "smoke", "coherence"};
  for (size_t i = 0; i < order.size(); ++i) {
    std::vector<std::string> findings = i == 0   ? completeness(images, verdict.lanes)
                                        : i == 1 ? smoke(images)
                                                 : coherence(images);
    verdict.gates.push_back(gate(order[i], ref, std::move(findings)));
    if (verdict.gates.back().verdict != "pass") {
      verdict.held = order[i] == "smoke";
      verdict.gates_not_run.assign(order.begin() + static_cast<long>(i) + 1, order.end());
      verdict.gates_not_run.insert(verdict.gates_not_run.end(), publish_steps().begin(),
                                   publish_steps().end());
      break;
    }
  }
  return verdict;
}

} // namespace kiln
