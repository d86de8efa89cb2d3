#include "driver/engine_version.h"

#include <optional>

#include "util/fs.h"

namespace kiln {

namespace {

// Two lines: the key, the version text.
std::filesystem::path remembered_path(const std::filesystem::path& records) {
  return records / "engine-version";
}

constexpr uint64_t k_read_limit = 64 * 1024;

// The text kept under `key`: the file's second and last line, when its first is `key`.
std::optional<std::string> remembered_text(const std::filesystem::path& records,
                                           const std::string& key) {
  if (key.empty()) {
    return std::nullopt;
  }
  auto file = read_file(remembered_path(records), k_read_limit);
  if (!file || !file->starts_with(key + "\n") || !file->ends_with('\n')) {
    return std::nullopt;
  }
  std::string text = file->substr(key.size() + 1, file->size() - key.size() - 2);
  if (text.empty() || text.find('\n') != std::string::npos) {
    return std::nullopt;
  }
  return text;
}

} // namespace

tl::expected<EngineVersion, std::string> engine_version(const Engine& engine,
                                                        const std::filesystem::path& records) {
  EngineVersion version;
  version.key = engine.version_key();
  if (auto kept = remembered_text(records, version.key)) {
    version.text = *kept;
    version.remembered = true;
    return version;
  }
  auto asked = engine.version();
  if (!asked) {
    return tl::unexpected(asked.error());
  }
  version.text = *asked;
  return version;
}

void remember_engine_version(const std::filesystem::path& records, const EngineVersion& version) {
  if (version.remembered || version.key.empty() || version.text.find('\n') != std::string::npos) {
    return;
  }
  (void)write_file_atomic(remembered_path(records), version.key + "\n" + version.text + "\n",
                          Durability::rename_only);
}

} // namespace kiln
