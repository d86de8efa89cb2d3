// The image-env classifier on any environment. The input is a JSON array of {"name", "value"}
// objects, the shape of tests/fixtures/image-env-cases.json, or else `NAME=value` lines as an
// image config's Env holds them; a line `--name PATTERN` adds a chain's own build-host name.
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fuzz_bundle.h"
#include "gates/image_env.h"
#include "util/strings.h"

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

void check_address(std::string_view text) {
  // Strict dotted decimal has one spelling per address, so it prints back as it was read.
  if (auto ipv4 = kiln::parse_ipv4(text)) {
    auto& a = *ipv4;
    if (fmt::format("{}.{}.{}.{}", a[0], a[1], a[2], a[3]) != text) {
      std::abort();
    }
  }
  (void)kiln::parse_ipv6(text);
  (void)kiln::refused_address_kind(text);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string_view text = fuzz::as_text(data, size);
  Env env;
  std::vector<std::string> names;
  auto cases = nlohmann::json::parse(text, nullptr, false);
  if (cases.is_array()) {
    for (const auto& entry : cases) {
      if (entry.is_object() && entry.contains("name") && entry["name"].is_string() &&
          entry.contains("value") && entry["value"].is_string()) {
        env.emplace_back(entry["name"].get<std::string>(), entry["value"].get<std::string>());
      }
    }
  } else {
    std::vector<std::string> entries;
    for (std::string& line : split(text, '\n')) {
      if (line.starts_with("--name ")) {
        names.push_back(line.substr(7));
      } else {
        entries.push_back(std::move(line));
      }
    }
    env = parse_env_list(entries);
  }
  for (const auto& [name, value] : env) {
    (void)build_host_name(name, names);
    for (const std::string& address : host_addresses(name, value)) {
      if (!refused_address_kind(address)) {
        std::abort(); // reported as a host address, yet not one the gate refuses
      }
      check_address(address);
    }
    check_address(value);
  }
  for (const EnvFinding& finding : grade_env(env, names)) {
    if (finding.message.empty() ||
        (finding.rule != "leak-env-name" && finding.rule != "leak-address" &&
         finding.rule != "leak-secret")) {
      std::abort();
    }
  }
  return 0;
}
