#include "cli/gate_command.h"

#include <filesystem>

#include <fmt/format.h>

#include "driver/run_loop.h"
#include "engine/image_config.h"
#include "gates/image_env.h"
#include "util/strings.h"

namespace kiln {

CLI::App* add_gate_command(CLI::App& app, GateArgs& args) {
  CLI::App* gate = app.add_subcommand("gate", "Gates on what is about to be published");
  gate->require_subcommand(1);
  CLI::App* image_env = gate->add_subcommand(
      "image-env", "Refuse an image whose config Env carries a build-host setting: a cache "
                   "backend's name, or a private or link-local address in a host position");
  image_env->add_option("image", args.image, "An image in buildah's store, or an OCI layout folder")
      ->required();
  image_env->add_option("--name", args.names,
                        "Another build-host variable name, NAME or PREFIX* (repeatable)");
  return image_env;
}

int image_env_gate_command(const GateArgs& args) {
  std::error_code ignored;
  bool layout = std::filesystem::exists(std::filesystem::path(args.image) / "index.json", ignored);
  // A layout may hold a multi-platform image: every platform is graded, each named.
  auto configs = layout ? image_configs_from_layout(args.image)
                        : image_config_from_buildah(args.image).map([](ImageConfig config) {
                            return std::vector<ImageConfig>{std::move(config)};
                          });
  if (!configs) {
    fmt::print(stderr, "kiln: error: {}\n", configs.error());
    return k_exit_usage;
  }
  size_t refused = 0;
  size_t entries = 0;
  std::vector<std::string> platforms;
  for (const ImageConfig& config : *configs) {
    platforms.push_back(config.platform());
    entries += config.env.size();
    std::string where = configs->size() > 1 ? config.platform() + ": " : "";
    for (const auto& finding : grade_env(parse_env_list(config.env), args.names)) {
      fmt::print("kiln: refused: {}{}: {}\n", where, finding.rule, finding.message);
      ++refused;
    }
  }
  std::string of = configs->size() > 1
                       ? fmt::format(" ({} platforms: {})", configs->size(), join(platforms, ", "))
                       : std::string();
  if (refused > 0) {
    fmt::print("kiln: image-env gate: {}{} refused; {} build-host setting(s) in its Env\n",
               args.image, of, refused);
    return k_exit_failed;
  }
  fmt::print("kiln: image-env gate: {}{} passes: no build-host setting in its {} Env entr{}\n",
             args.image, of, entries, entries == 1 ? "y" : "ies");
  return k_exit_ok;
}

} // namespace kiln
