#pragma once

#include <optional>

#include "engine/engine.h"

namespace kiln {

/// A BuildKit release, compared by its numbers (`v0.11.6` -> {0, 11, 6}).
struct BuildkitVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;

  static std::optional<BuildkitVersion> parse(std::string_view text);
  auto operator<=>(const BuildkitVersion&) const = default;
};

/// Where buildctl connects and who said so: BUILDKIT_HOST wins over the chain file.
struct BuildkitAddress {
  std::string address; // empty: buildctl's own default
  std::string source;  // "BUILDKIT_HOST", "[engine.buildkit] host" or "buildctl's default"

  /// The address as a person should read it.
  std::string shown() const;
};

BuildkitAddress resolve_buildkit_address(const std::string& chain_host);

/// BuildKit through `buildctl build` against a buildkitd, local or remote. A stage's image is
/// handed over as an OCI layout (`--oci-layout` + `context:<name>=oci-layout://...`), or pushed
/// and bound as `docker-image://` when the chain names a registry.
class BuildkitEngine : public Engine {
public:
  explicit BuildkitEngine(BuildkitAddress address) : m_address(std::move(address)) {}

  std::string name() const override { return "buildkit"; }
  /// "buildkitd v0.11.6, buildctl v0.11.6", or why neither answers.
  tl::expected<std::string, std::string> version() const override;
  std::vector<std::string> unsupported(const std::vector<BuildRequest>& requests,
                                       const std::string& version) const override;
  std::vector<std::string> build_argv(const BuildRequest& request) const override;
  bool has_stage_image(const NamedContext& context) const override;
  std::string stage_image_place(const NamedContext& context) const override {
    return context.metadata.string();
  }
  ImageEnv stage_image_env(const NamedContext& context) const override;
  std::unique_ptr<BuildOutput> read_output() const override;
  std::string built_image(const BuildRequest& request,
                          const BuildProgress& progress) const override;
  std::string explain_failure(const Tail& evidence) const override;

  /// `buildctl [--addr A] <args...>`: every command kiln sends to the daemon.
  std::vector<std::string> command(std::initializer_list<std::string> args) const;

private:
  BuildkitAddress m_address;
};

/// The image digest a build's `--metadata-file` names, empty when it names none (or none that
/// is_oci_digest accepts).
std::string metadata_digest(const std::filesystem::path& metadata);

/// Whether `slug` holds a local cache export to import: an empty or absent one is a clean miss,
/// and importing it would only make BuildKit warn.
bool cache_slug_ready(const std::filesystem::path& slug);

/// Whether a cache spec talks to a registry (everything but kiln's local tier).
bool registry_facing(std::string_view spec);

} // namespace kiln
