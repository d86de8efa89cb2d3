#include "disk/image_steps_cache.h"

#include <algorithm>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "util/fs.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

bool is_image_id(const std::string& text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::optional<std::vector<std::string>> strings_of(const nlohmann::json& doc, const char* key) {
  auto found = doc.find(key);
  if (found == doc.end() || !found->is_array()) {
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& entry : *found) {
    if (!entry.is_string()) {
      return std::nullopt;
    }
    out.push_back(entry.get<std::string>());
  }
  return out;
}

} // namespace

fs::path ImageStepsCache::default_folder() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg == '/') {
    return fs::path(xdg) / "kiln" / "buildah-image-steps";
  }
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home == '/') {
    return fs::path(home) / ".cache" / "kiln" / "buildah-image-steps";
  }
  return {};
}

fs::path ImageStepsCache::file(const std::string& id) const {
  if (m_folder.empty() || !is_image_id(id)) {
    return {};
  }
  return m_folder / (id + ".json");
}

std::optional<BuildahImageSteps> ImageStepsCache::find(const std::string& id) const {
  fs::path path = file(id);
  if (path.empty()) {
    return std::nullopt;
  }
  auto text = read_file(path, 16 << 20);
  if (!text) {
    return std::nullopt;
  }
  auto doc = nlohmann::json::parse(*text, nullptr, false);
  if (!doc.is_object()) {
    return std::nullopt;
  }
  auto history = strings_of(doc, "history");
  auto diff_ids = strings_of(doc, "diff_ids");
  if (!history || !diff_ids) {
    return std::nullopt;
  }
  return BuildahImageSteps{std::move(*history), std::move(*diff_ids)};
}

void ImageStepsCache::keep(const std::string& id, const BuildahImageSteps& steps) const {
  fs::path path = file(id);
  if (path.empty()) {
    return;
  }
  std::error_code error;
  fs::create_directories(m_folder, error);
  nlohmann::json doc = {{"history", steps.history}, {"diff_ids", steps.diff_ids}};
  (void)write_file_atomic(path, doc.dump(), Durability::rename_only);
}

void ImageStepsCache::forget_older_than(std::chrono::hours age) const {
  if (m_folder.empty()) {
    return;
  }
  auto cutoff = fs::file_time_type::clock::now() - age;
  std::error_code error;
  for (fs::directory_iterator it(m_folder, error); !error && it != fs::directory_iterator();
       it.increment(error)) {
    std::error_code entry_error;
    // Any file: a temporary a killed kiln left behind goes the same way.
    if (it->is_regular_file(entry_error) && it->last_write_time(entry_error) < cutoff &&
        !entry_error) {
      fs::remove(it->path(), entry_error);
    }
  }
}

} // namespace kiln
