#include "cli/gate_command.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/chain_file.h"
#include "driver/run_loop.h"
#include "engine/buildah_engine.h"
#include "engine/image_config.h"
#include "gates/image_env.h"
#include "gates/layer_scan.h"
#include "gates/sbom.h"
#include "util/diagnostic.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/time.h"

namespace kiln {

void add_gate_command(CLI::App& app, GateArgs& args, CLI::App*& image_env, CLI::App*& residue) {
  CLI::App* gate = app.add_subcommand("gate", "Gates on what is about to be published");
  gate->require_subcommand(1);
  image_env = gate->add_subcommand(
      "image-env", "Refuse an image whose config Env carries a build-host setting: a cache "
                   "backend's name, or a private or link-local address in a host position");
  image_env->add_option("image", args.image, "An image in buildah's store, or an OCI layout folder")
      ->required();
  image_env->add_option("--name", args.names,
                        "Another build-host variable name, NAME or PREFIX* (repeatable)");
  residue = gate->add_subcommand(
      "residue", "Refuse an image whose layers carry build-host files (credentials, keys, "
                 "configs naming the build network), even ones a later layer deleted");
  residue->add_option("image", args.image, "An image in buildah's store, or an OCI layout folder")
      ->required();
  residue->add_option("--chain", args.chain_file, "Apply this chain's [gates] residue_allow");
  residue->add_option("--allow", args.allow,
                      "Report but let ship the files matching GLOB, for REASON: 'GLOB=REASON' "
                      "(repeatable)");
  residue->add_flag("--arch", args.arch,
                    "In the same pass, refuse an ELF file not built for the image's platform "
                    "(with the chain's [gates] arch_allow)");
  residue->add_option("--sbom", args.sbom,
                      "In the same pass, write the image's SPDX 2.3 SBOM (its package databases) "
                      "to this file");
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

int residue_gate_command(const GateArgs& args) {
  std::vector<ResidueAllow> allow;
  std::vector<ResidueAllow> arch_allow;
  if (!args.chain_file.empty()) {
    auto chain = load_chain_or_report(args.chain_file, "", "nothing was scanned");
    if (!chain) {
      return k_exit_usage;
    }
    allow = chain->gates.residue_allow;
    arch_allow = chain->gates.arch_allow;
  }
  for (const auto& entry : args.allow) {
    auto eq = entry.find('=');
    if (!entry.starts_with("/")) {
      fmt::print(stderr,
                 "kiln: error: --allow '{}' is no absolute path; write --allow '/path/glob=why "
                 "it may ship'\n",
                 entry);
      return k_exit_usage;
    }
    if (eq == std::string::npos || trim(entry.substr(eq + 1)).empty()) {
      fmt::print(stderr,
                 "kiln: error: --allow '{}' gives no reason; write --allow 'GLOB=why it may "
                 "ship'\n",
                 entry);
      return k_exit_usage;
    }
    allow.push_back({entry.substr(0, eq), entry.substr(eq + 1)});
  }
  std::error_code ignored;
  ScanOptions options;
  options.allow = allow;
  options.arch = args.arch;
  options.arch_allow = arch_allow;
  options.sbom = !args.sbom.empty();
  // A layout is read as it is; an image of buildah's store in place, where the store keeps it.
  const bool layout =
      std::filesystem::exists(std::filesystem::path(args.image) / "index.json", ignored);
  BuildahEngine buildah("chroot");
  NamedContext context{"image", args.image, {}, {}, {}};
  std::string digest;
  tl::expected<std::vector<LayoutImage>, std::string> images =
      layout ? layout_images(args.image) : buildah.stage_images(context);
  if (!layout) {
    digest = "sha256:" + buildah.stage_image_identity(context);
  } else if (auto index = read_file(std::filesystem::path(args.image) / "index.json")) {
    // What a layout holds first is what it is: its digest names the image the SBOM describes.
    nlohmann::json doc = nlohmann::json::parse(*index, nullptr, false);
    if (doc.is_object() && doc.contains("manifests") && doc["manifests"].is_array() &&
        !doc["manifests"].empty() && doc["manifests"][0].is_object()) {
      digest = doc["manifests"][0].value("digest", "");
    }
  }
  if (!images) {
    fmt::print(stderr, "kiln: error: {}\n", images.error());
    return k_exit_usage;
  }
  std::vector<ImageScan> scans;
  for (const auto& image : *images) {
    auto scan = scan_image(image, options);
    if (!scan) {
      fmt::print(stderr, "kiln: error: {}\n", scan.error());
      return k_exit_usage;
    }
    if (images->size() > 1) {
      for (auto& finding : scan->residue) {
        finding.platform = scan->platform;
      }
    }
    scans.push_back(std::move(*scan));
  }
  size_t refused = 0;
  size_t allowed = 0;
  size_t layers = 0;
  for (const ImageScan& scan : scans) {
    layers += scan.layers;
    for (const auto& finding : scan.residue) {
      fmt::print("kiln: {}: {}\n", finding.allowed.empty() ? "refused" : "allowed",
                 residue_message(finding));
      ++(finding.allowed.empty() ? refused : allowed);
    }
  }
  size_t foreign = 0;
  for (const ImageScan& scan : scans) {
    std::string where = scans.size() > 1 ? scan.platform + ": " : "";
    if (args.arch && !scan.arch_judged) {
      fmt::print("kiln: warning: {}kiln does not know what the ELF files of {} look like: not "
                 "judged\n",
                 where, scan.platform);
    }
    for (const auto& binary : scan.foreign) {
      fmt::print("kiln: {}: {}{}: {}, added in layer {} of {}, in a {} image{}\n",
                 binary.allowed.empty() ? "refused" : "allowed", where, printable(binary.path),
                 binary.description, binary.layer, scan.layers, scan.platform,
                 binary.allowed.empty() ? "" : "; allowed: " + binary.allowed);
      ++(binary.allowed.empty() ? foreign : allowed);
    }
  }
  if (options.sbom) {
    std::vector<Package> packages;
    OsRelease os;
    for (const ImageScan& scan : scans) {
      packages.insert(packages.end(), scan.packages.begin(), scan.packages.end());
      os = scan.os;
    }
    nlohmann::json document =
        spdx_document({args.image, digest, scans.empty() ? std::string() : scans.front().platform},
                      packages, os, utc_iso8601(std::chrono::system_clock::now()), KILN_VERSION);
    if (auto written = write_file_atomic(args.sbom, document.dump(2) + "\n"); !written) {
      fmt::print(stderr, "kiln: error: {}\n", written.error());
      return k_exit_usage;
    }
    fmt::print("kiln: SBOM of {}: {} package(s), SPDX 2.3, in {}\n", args.image, packages.size(),
               args.sbom);
  }
  if (foreign > 0) {
    refused += foreign;
  }
  std::string of = scans.size() > 1 ? fmt::format(" ({} platforms)", scans.size()) : "";
  std::string also = allowed > 0 ? fmt::format("; {} allowed", allowed) : "";
  if (refused > 0) {
    fmt::print("kiln: residue gate: {}{} refused; {} build-host file(s){} in its {} "
               "layer(s){}\n",
               args.image, of, refused - foreign,
               foreign > 0 ? fmt::format(" and {} ELF file(s) of another platform", foreign) : "",
               layers, also);
    return k_exit_failed;
  }
  fmt::print("kiln: residue gate: {}{} passes: no build-host file in its {} layer(s){}\n",
             args.image, of, layers, also);
  return k_exit_ok;
}

} // namespace kiln
