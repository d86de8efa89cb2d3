#include "driver/shown_command.h"

#include "compilecache/endpoint_probe.h"
#include "gates/image_env.h"
#include "util/strings.h"

namespace kiln {

bool is_secret_build_arg(std::string_view name, std::string_view value) {
  return !value.empty() && (secret_word(name) || !secrets_in(value).empty());
}

std::string shown_secret(std::string_view value) {
  std::string url = cc::redact_url(value);
  return url != value ? url : "<redacted: " + redacted(value) + ">";
}

std::string shown_command(const std::vector<std::string>& argv, const KeyValues& build_args) {
  std::vector<std::string> shown = argv;
  for (const auto& [name, value] : build_args) {
    if (!is_secret_build_arg(name, value)) {
      continue;
    }
    // buildah's `--build-arg K=V`, BuildKit's `--opt build-arg:K=V`: the whole word ends so.
    const std::string assignment = name + "=" + value;
    for (auto& word : shown) {
      if (word == assignment || word.ends_with(":" + assignment)) {
        word.replace(word.size() - value.size(), value.size(), shown_secret(value));
      }
    }
  }
  return quoted_command(shown);
}

} // namespace kiln
