#include "cli/attest_command.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "driver/attestations.h"
#include "driver/run_loop.h"
#include "engine/image_config.h"
#include "engine/registry_client.h"
#include "util/fs.h"
#include "util/image_ref.h"

namespace kiln {

CLI::App* add_attest_command(CLI::App& app, AttestArgs& args) {
  CLI::App* attest = app.add_subcommand("attest", "Attestations of published images");
  attest->require_subcommand(1);
  CLI::App* verify = attest->add_subcommand(
      "verify", "Check that every platform image of an index in a registry carries its SLSA "
                "provenance and SPDX SBOM, each about that image's digest");
  verify->add_option("ref", args.ref, "The index: host[:port]/repository[:tag|@digest]")
      ->required();
  verify->add_option("--tls-verify", args.tls_verify,
                     "false for a plain-HTTP registry (default true)");
  return verify;
}

int attest_verify_command(const AttestArgs& args) {
  auto ref = parse_image_ref(args.ref);
  if (!ref || ref->domain.empty()) {
    fmt::print(stderr,
               "kiln: error: '{}' is not a registry reference{}; write "
               "host[:port]/repository[:tag]\n",
               args.ref, ref ? ": it names no registry host" : ": " + ref.error());
    return k_exit_usage;
  }
  std::string scratch = (std::filesystem::temp_directory_path() / "kiln-attest.XXXXXX").string();
  if (mkdtemp(scratch.data()) == nullptr) {
    fmt::print(stderr, "kiln: error: cannot make a scratch folder {}: {}\n", scratch,
               std::strerror(errno));
    return k_exit_usage;
  }
  struct Remove {
    std::string dir;
    ~Remove() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } remove{scratch};
  RegistryClient client({args.tls_verify, nullptr, {}, {}, scratch});
  auto index = client.manifest(args.ref);
  if (!index) {
    fmt::print(stderr, "kiln: error: cannot read {}: {}\n", args.ref, index.error());
    return k_exit_usage;
  }
  const std::string repository = ref->repository();
  // An attestation manifest is fetched whole (its statements are its layers), once.
  std::map<std::string, std::filesystem::path> fetched;
  auto layout_of =
      [&](const std::string& digest) -> tl::expected<std::filesystem::path, std::string> {
    if (auto found = fetched.find(digest); found != fetched.end()) {
      return found->second;
    }
    std::filesystem::path layout = std::filesystem::path(scratch) / digest.substr(7, 16);
    if (auto copied = client.fetch(repository + "@" + digest, layout, "attestation"); !copied) {
      return tl::unexpected(copied.error());
    }
    return fetched[digest] = layout;
  };
  std::string current;
  DigestReader manifest = [&](const std::string& digest) -> tl::expected<std::string, std::string> {
    if (!is_oci_digest(digest)) {
      return tl::unexpected("'" + digest + "' is not a digest");
    }
    current = digest;
    return client.manifest(repository + "@" + digest);
  };
  DigestReader blob = [&](const std::string& digest) -> tl::expected<std::string, std::string> {
    if (!is_oci_digest(digest)) {
      return tl::unexpected("'" + digest + "' is not a digest");
    }
    auto layout = layout_of(current);
    if (!layout) {
      return tl::unexpected(layout.error());
    }
    return read_file(*layout / "blobs" / "sha256" / digest.substr(7), k_image_json_limit);
  };
  auto checked = check_attestations(*index, manifest, blob);
  if (!checked) {
    fmt::print(stderr, "kiln: error: {}: {}\n", args.ref, checked.error());
    return k_exit_usage;
  }
  size_t failed = 0;
  for (const auto& platform : *checked) {
    if (platform.problems.empty()) {
      fmt::print("kiln: {} {}: provenance (SLSA v1, {} dependencies) and SBOM (SPDX 2.3, {} "
                 "packages) in {}\n",
                 platform.platform, platform.digest, platform.dependencies, platform.packages,
                 platform.attestation);
      continue;
    }
    ++failed;
    for (const auto& problem : platform.problems) {
      fmt::print("kiln: refused: {} {}: {}\n", platform.platform, platform.digest, problem);
    }
  }
  if (failed > 0) {
    fmt::print("kiln: attest verify: {}: {} of {} platform image(s) lack what a consumer checks\n",
               args.ref, failed, checked->size());
    return k_exit_failed;
  }
  fmt::print("kiln: attest verify: {}: {} platform image(s), each with its provenance and SBOM\n",
             args.ref, checked->size());
  return k_exit_ok;
}

} // namespace kiln
