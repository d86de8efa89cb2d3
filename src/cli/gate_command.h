#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace kiln {

struct GateArgs {
  std::string image;              // a buildah image, or an OCI layout folder
  std::vector<std::string> names; // more build-host names (NAME or PREFIX*)
};

/// `kiln gate image-env IMAGE`: returns the subcommand.
CLI::App* add_gate_command(CLI::App& app, GateArgs& args);

int image_env_gate_command(const GateArgs& args);

} // namespace kiln
