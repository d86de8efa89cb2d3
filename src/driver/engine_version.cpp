#include "driver/engine_version.h"

#include "util/fs.h"

namespace kiln {

namespace {

// Two lines: the key, the version text.
std::filesystem::path remembered_path(const std::filesystem::path& records) {
  return records / "engine-version";
}

constexpr uint64_t k_read_limit = 64 * 1024;

} // namespace

tl::expected<EngineVersion, std::string> engine_version(const Engine& engine,
                                                        const std::filesystem::path& records) {
  EngineVersion version;
  version.key = engine.version_key();
  if (!version.key.empty()) {
    if (auto text = read_file(remembered_path(records), k_read_limit)) {
      std::string_view lines = *text;
      size_t end_of_key = lines.find('\n');
      if (end_of_key != std::string_view::npos && lines.substr(0, end_of_key) == version.key &&
          lines.ends_with('\n') && lines.size() > end_of_key + 2) {
        version.text = lines.substr(end_of_key + 1, lines.size() - end_of_key - 2);
        version.remembered = version.text.find('\n') == std::string::npos;
        if (version.remembered) {
          return version;
        }
      }
    }
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
