#include "cli/gate_command.h"

#include <filesystem>

#include <fmt/format.h>

#include "driver/run_loop.h"
#include "engine/image_config.h"
#include "gates/image_env.h"

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
  auto env = image_env(layout ? image_config_from_layout(args.image)
                              : image_config_from_buildah(args.image));
  if (!env) {
    fmt::print(stderr, "kiln: error: {}\n", env.error());
    return k_exit_usage;
  }
  std::vector<EnvFinding> findings = grade_env(parse_env_list(*env), args.names);
  for (const auto& finding : findings) {
    fmt::print("kiln: refused: {}: {}\n", finding.rule, finding.message);
  }
  if (!findings.empty()) {
    fmt::print("kiln: image-env gate: {} refused; {} build-host setting(s) in its Env\n",
               args.image, findings.size());
    return k_exit_failed;
  }
  fmt::print("kiln: image-env gate: {} passes: no build-host setting in its {} Env entr{}\n",
             args.image, env->size(), env->size() == 1 ? "y" : "ies");
  return k_exit_ok;
}

} // namespace kiln
