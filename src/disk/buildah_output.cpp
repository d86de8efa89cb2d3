#include "disk/buildah_output.h"

#include <nlohmann/json.hpp>

#include "disk/sizes.h"
#include "engine/buildah_layers.h"
#include "util/json_output.h"
#include "util/strings.h"

namespace kiln {

namespace {

BuildahImageSteps steps_of_config(const nlohmann::json& config) {
  BuildahImageSteps steps;
  if (auto history = config.find("history"); history != config.end() && history->is_array()) {
    for (const auto& entry : *history) {
      nlohmann::json compared = nlohmann::json::object();
      if (entry.is_object()) {
        for (const char* field : {"created_by", "comment", "author", "empty_layer"}) {
          if (auto value = entry.find(field); value != entry.end()) {
            compared[field] = *value;
          }
        }
      }
      steps.history.push_back(compared.dump());
    }
  }
  if (auto rootfs = config.find("rootfs"); rootfs != config.end() && rootfs->is_object()) {
    if (auto ids = rootfs->find("diff_ids"); ids != rootfs->end() && ids->is_array()) {
      for (const auto& id : *ids) {
        if (id.is_string()) {
          steps.diff_ids.push_back(id.get<std::string>());
        }
      }
    }
  }
  return steps;
}

} // namespace

tl::expected<std::vector<BuildahImage>, std::string> parse_buildah_images(std::string_view text) {
  auto doc = parse_json_output(text);
  if (doc.is_discarded() || !doc.is_array()) {
    return tl::unexpected(std::string("buildah images --json printed no JSON list"));
  }
  std::vector<BuildahImage> images;
  for (const auto& entry : doc) {
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_string()) {
      return tl::unexpected(std::string("buildah images --json: an entry without an id"));
    }
    BuildahImage image;
    image.id = bare_image_id(entry["id"].get<std::string>());
    if (auto names = entry.find("names"); names != entry.end() && names->is_array()) {
      for (const auto& name : *names) {
        if (name.is_string()) {
          image.names.push_back(name.get<std::string>());
        }
      }
    }
    if (auto size = entry.find("size"); size != entry.end() && size->is_string()) {
      // "2.13 MB": buildah's own formattedSize, %.3g and B KB MB GB TB by 1000s.
      image.bytes = parse_human_size(size->get<std::string>());
    }
    // An integer only: a float (1e300) does not convert to seconds.
    if (auto created = entry.find("created");
        created != entry.end() && created->is_number_integer()) {
      image.created = created->get<int64_t>();
    }
    if (auto read_only = entry.find("readonly");
        read_only != entry.end() && read_only->is_boolean()) {
      image.read_only = read_only->get<bool>();
    }
    images.push_back(std::move(image));
  }
  return images;
}

tl::expected<BuildahImageSteps, std::string> parse_buildah_inspect(std::string_view text) {
  auto doc = parse_json_output(text);
  if (doc.is_discarded() || !doc.is_object()) {
    return tl::unexpected(std::string("buildah inspect printed no JSON object"));
  }
  auto config = doc.find("OCIv1");
  if (config == doc.end() || !config->is_object()) {
    return tl::unexpected(std::string("buildah inspect shows no OCIv1 config"));
  }
  return steps_of_config(*config);
}

tl::expected<BuildahImageSteps, std::string> parse_config_steps(std::string_view text) {
  auto config = nlohmann::json::parse(text, nullptr, false);
  if (!config.is_object()) {
    return tl::unexpected(std::string("an image config is a JSON object"));
  }
  return steps_of_config(config);
}

std::set<std::string> parse_buildah_ids(std::string_view text) {
  std::set<std::string> ids;
  for (const std::string& line : split(text, '\n')) {
    std::string id = bare_image_id(trim(line));
    if (is_image_id(id)) {
      ids.insert(id);
    }
  }
  return ids;
}

void read_buildah_removal(std::string_view output, BuildahRemoval& removal) {
  // buildah prints each removed id on a line of its own, `untagged: <name>` for names, and on
  // failure `Error: <n> errors occurred:` followed by one `\t* <error>` line per image.
  for (const std::string& raw : split(output, '\n')) {
    std::string_view line = trim(raw);
    if (is_image_id(line)) {
      removal.removed.emplace_back(line);
      continue;
    }
    std::string_view error;
    if (line.starts_with("* ")) {
      error = line.substr(2);
    } else if (line.starts_with("Error: ") && !line.ends_with("occurred:")) {
      error = line.substr(7);
    } else {
      continue;
    }
    // Expected, not a fault: a build's working container uses it (storage.ErrImageUsedByContainer).
    if (error.find("in use by a container") != std::string_view::npos) {
      ++removal.in_use;
    } else {
      removal.errors.emplace_back(error);
    }
  }
}

} // namespace kiln
