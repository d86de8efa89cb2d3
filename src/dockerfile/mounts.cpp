#include "dockerfile/mounts.h"

#include <algorithm>
#include <cctype>

#include "util/strings.h"

namespace kiln {
namespace {

std::optional<std::string_view> one_mount_option(std::string_view value, std::string_view key) {
  std::optional<std::string_view> found;
  std::size_t pos = 0;
  while (pos <= value.size()) {
    auto comma = value.find(',', pos);
    auto item = value.substr(pos, comma == std::string_view::npos ? value.npos : comma - pos);
    auto eq = item.find('=');
    auto item_key = item.substr(0, eq);
    if (item_key.size() == key.size() &&
        std::equal(item_key.begin(), item_key.end(), key.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == static_cast<unsigned char>(b);
        })) {
      found = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    }
    if (comma == std::string_view::npos) {
      break;
    }
    pos = comma + 1;
  }
  return found;
}

} // namespace

std::optional<std::string_view> mount_option(std::string_view value,
                                             std::initializer_list<std::string_view> keys) {
  for (auto key : keys) {
    if (auto found = one_mount_option(value, key)) {
      return found;
    }
  }
  return std::nullopt;
}

bool run_mounts_secret(const Instruction& ins, std::string_view id) {
  if (!keyword_is(ins, "run")) {
    return false;
  }
  for (const auto& flag : ins.flags) {
    if (flag.name != "mount" ||
        lower(mount_option(flag.value, {"type"}).value_or("")) != "secret") {
      continue;
    }
    std::string_view named = mount_option(flag.value, {"id"}).value_or("");
    if (named.empty()) {
      std::string_view target =
          mount_option(flag.value, {"target", "dst", "destination"}).value_or("");
      named = target.substr(target.find_last_of('/') + 1);
    }
    if (named == id) {
      return true;
    }
  }
  return false;
}

bool mounts_secret(const Dockerfile& df, std::string_view id) {
  return std::any_of(df.instructions.begin(), df.instructions.end(),
                     [&](const Instruction& ins) { return run_mounts_secret(ins, id); });
}

} // namespace kiln
