#include "cli/gate_command.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "cli/chain_file.h"
#include "driver/run_loop.h"
#include "engine/image_config.h"
#include "gates/image_env.h"
#include "gates/layer_scan.h"
#include "util/strings.h"

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
  if (!args.chain_file.empty()) {
    auto chain = load_chain_or_report(args.chain_file, "", "nothing was scanned");
    if (!chain) {
      return k_exit_usage;
    }
    allow = chain->gates.residue_allow;
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
  std::filesystem::path layout = args.image;
  std::optional<std::filesystem::path> exported;
  if (!std::filesystem::exists(layout / "index.json", ignored)) {
    // buildah keeps an image's layers where only it reads them: export them to be read.
    std::string scratch = (std::filesystem::temp_directory_path() / "kiln-residue.XXXXXX").string();
    if (mkdtemp(scratch.data()) == nullptr) {
      fmt::print(stderr, "kiln: error: cannot make a scratch folder {}: {}\n", scratch,
                 std::strerror(errno));
      return k_exit_usage;
    }
    exported = scratch;
    auto written = export_buildah_image(args.image, *exported / "layout");
    if (!written) {
      std::filesystem::remove_all(*exported, ignored);
      fmt::print(stderr, "kiln: error: {}\n", written.error());
      return k_exit_usage;
    }
    layout = written->path;
  }
  ScanOptions options;
  options.allow = allow;
  auto scans = scan_layout(layout, options);
  if (exported) {
    std::filesystem::remove_all(*exported, ignored);
  }
  if (!scans) {
    fmt::print(stderr, "kiln: error: {}\n", scans.error());
    return k_exit_usage;
  }
  size_t refused = 0;
  size_t allowed = 0;
  size_t layers = 0;
  for (const ImageScan& scan : *scans) {
    layers += scan.layers;
    for (const auto& finding : scan.residue) {
      fmt::print("kiln: {}: {}\n", finding.allowed.empty() ? "refused" : "allowed",
                 residue_message(finding));
      ++(finding.allowed.empty() ? refused : allowed);
    }
  }
  std::string of = scans->size() > 1 ? fmt::format(" ({} platforms)", scans->size()) : "";
  std::string also = allowed > 0 ? fmt::format("; {} allowed", allowed) : "";
  if (refused > 0) {
    fmt::print("kiln: residue gate: {}{} refused; {} build-host file(s) in its {} layer(s){}\n",
               args.image, of, refused, layers, also);
    return k_exit_failed;
  }
  fmt::print("kiln: residue gate: {}{} passes: no build-host file in its {} layer(s){}\n",
             args.image, of, layers, also);
  return k_exit_ok;
}

} // namespace kiln
