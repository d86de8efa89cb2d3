#include "chain/chain.h"

#include "util/fs.h"
#include "util/strings.h"

namespace kiln {

tl::expected<std::string, std::string> read_chain_input(const std::filesystem::path& file) {
  auto text = read_file(file, k_chain_file_limit);
  if (!text) {
    std::string prefix = "cannot read " + file.string() + ": ";
    std::string& error = text.error();
    return tl::unexpected(error.starts_with(prefix) ? error.substr(prefix.size()) : error);
  }
  return text;
}

std::string CacheSpec::attr(std::string_view key) const {
  for (const auto& field : split(text, ',')) {
    std::string_view item = trim(field);
    if (item.size() > key.size() && item.starts_with(key) && item[key.size()] == '=') {
      return std::string(item.substr(key.size() + 1));
    }
  }
  return {};
}

const Stage* Chain::find_stage(const std::string& name) const {
  for (const auto& stage : stages) {
    if (stage.name == name) {
      return &stage;
    }
  }
  return nullptr;
}

std::vector<std::string> Chain::stage_names() const {
  std::vector<std::string> names;
  for (const auto& stage : stages) {
    names.push_back(stage.name);
  }
  return names;
}

const Worker* Chain::find_worker(const std::string& name) const {
  for (const auto& worker : workers) {
    if (worker.name == name) {
      return &worker;
    }
  }
  return nullptr;
}

const Lane* Chain::find_lane(const std::string& name) const {
  for (const auto& lane : lanes) {
    if (lane.name == name) {
      return &lane;
    }
  }
  return nullptr;
}

std::string Chain::pushed_ref(const Stage& stage) const {
  // The first path component names a registry when it looks like a host (docker's rule).
  std::string_view name = stage.tag;
  if (size_t slash = name.find('/'); slash != std::string_view::npos) {
    std::string_view first = name.substr(0, slash);
    if (first == "localhost" || first.find_first_of(".:") != std::string_view::npos) {
      name.remove_prefix(slash + 1);
    }
  }
  return registry + "/" + std::string(name);
}

std::filesystem::path Chain::cache_slug(const Stage& stage) const {
  std::string slug = name + "-" + stage.known_as();
  if (!stage.lane.empty()) {
    slug += "-" + stage.lane;
  }
  return cache.root / slug;
}

} // namespace kiln
