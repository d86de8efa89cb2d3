#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kiln {

struct AttestArgs {
  std::string ref;        // `host/repository:tag` or `...@sha256:...`
  bool tls_verify = true; // false for a plain-HTTP registry
};

/// `kiln attest verify REF`: register the subcommand and its options, filling `args`.
CLI::App* add_attest_command(CLI::App& app, AttestArgs& args);

/// Read the index REF names from its registry and check each platform image's attestations:
/// exit 0 when every one has its provenance and SBOM about it, 1 when one lacks either, 2 when
/// the index cannot be read.
int attest_verify_command(const AttestArgs& args);

} // namespace kiln
