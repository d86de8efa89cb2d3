#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace kiln {

struct GateArgs {
  std::string image;              // a buildah image, or an OCI layout folder
  std::vector<std::string> names; // more build-host names (NAME or PREFIX*)
  std::string chain_file;         // residue: the chain whose [gates] residue_allow applies
  std::vector<std::string> allow; // residue: more allowances, `GLOB=REASON`
  bool arch = false;              // residue: the arch gate in the same pass
  std::string sbom;               // residue: write the SPDX SBOM of the same pass here
};

/// `kiln gate image-env IMAGE` and `kiln gate residue IMAGE`: sets the subcommands.
void add_gate_command(CLI::App& app, GateArgs& args, CLI::App*& image_env, CLI::App*& residue);

int image_env_gate_command(const GateArgs& args);
int residue_gate_command(const GateArgs& args);

} // namespace kiln
