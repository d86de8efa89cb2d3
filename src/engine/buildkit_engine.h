#pragma once

#include <optional>

#include "engine/engine.h"

namespace kiln {

/// A BuildKit release, compared by its numbers (`v0.11.6` -> {0, 11, 6}).
struct BuildkitVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;

  /// `vX.Y.Z`, with or without a suffix: a dev build's `v0.12.0-rc1-23-g1c3e5ad.m` counts as its
  /// release, as BuildKit's own user agent counts it. nullopt for anything else, and for 0.0.0:
  /// no release has that number, it is what a build without a version stamp reports
  /// (`0.0.0+unknown`) or a Go pseudo-version of an untagged commit (`v0.0.0-2023...-abcdef`).
  static std::optional<BuildkitVersion> parse(std::string_view text);
  auto operator<=>(const BuildkitVersion&) const = default;
};

/// The platforms `buildctl debug workers` lists (its `ID  PLATFORMS` table, a row per worker,
/// each row's platforms comma-separated), every worker's, each once, in order; nullopt when the
/// text is not that table.
std::optional<std::vector<std::string>> parse_buildkit_workers(std::string_view text);

/// One rule of a daemon's GC policy as `buildctl debug workers -v` prints it.
struct BuildkitGcRule {
  bool all = false;                   // also prunes internal and frontend records
  std::vector<std::string> filters;   // empty: every record type
  bool has_duration = false;          // prunes only what was not used for that long
  std::optional<uint64_t> keep_bytes; // its `Keep Bytes:` line; nullopt: it printed none
};

/// The `GC Policy rule#N:` blocks of `buildctl debug workers -v` (tab-indented `Key:\tvalue`
/// lines; filters joined by commas or spaces), every worker's, in order.
std::vector<BuildkitGcRule> parse_buildkit_gc_rules(std::string_view text);

/// The most layer cache `rules` let a daemon keep between runs: the smallest Keep Bytes of a
/// rule that prunes layer records whatever their age (no filter, or exactly `type==regular`;
/// no Keep Duration), since each rule prunes what it matches down to its own figure. A rule
/// without a Keep Bytes line (another BuildKit's wording) says nothing. nullopt when no rule
/// does.
std::optional<uint64_t> layer_keep_bytes(const std::vector<BuildkitGcRule>& rules);

/// What one side of BuildKit, buildctl or buildkitd, says its version is.
struct BuildkitSide {
  std::string reported;                   // as printed ("v0.11.6", "0.0.0+unknown"); "" if none
  std::optional<BuildkitVersion> release; // what `reported` names; nullopt: no release
  /// Known only to be older than this: a buildkitd without the Info call (v0.11) has no
  /// version to report.
  std::optional<BuildkitVersion> before;

  /// The version word of `buildctl --version` or `buildctl debug info` output: the word after
  /// the program's name and BuildKit's Go package ("buildctl github.com/moby/buildkit v0.11.6
  /// <rev>", "BuildKit: github.com/moby/buildkit v0.11.6 <rev>").
  static BuildkitSide from_probe(std::string_view output);
  /// A buildkitd that answers, but has no `debug info`.
  static BuildkitSide without_info();
  /// How it reads in the version text the run records (version()).
  std::string shown() const;
};

/// Both sides as version() recorded them: "buildkitd <shown>, buildctl <shown>".
struct BuildkitVersions {
  BuildkitSide daemon;
  BuildkitSide client;

  std::string text() const;
  static BuildkitVersions parse(std::string_view text);
};

/// What the versions at hand mean for a run's requests.
struct BuildkitVersionCheck {
  /// Options the installed BuildKit is too old for, one sentence each: the run is refused.
  std::vector<std::string> problems;
  /// A side whose version names no release, with the options kiln could not check on it: the
  /// run goes on and says so.
  std::vector<std::string> warnings;
};

/// Where buildctl connects and who said so: BUILDKIT_HOST wins over the chain file.
struct BuildkitAddress {
  BuildkitAddress() = default;
  BuildkitAddress(std::string address, std::string source, std::filesystem::path ca = {},
                  std::filesystem::path cert = {}, std::filesystem::path key = {})
      : address(std::move(address)), source(std::move(source)), tls_ca(std::move(ca)),
        tls_cert(std::move(cert)), tls_key(std::move(key)) {}

  std::string address; // empty: buildctl's own default
  std::string source;  // "BUILDKIT_HOST", "[engine.buildkit] host" or "buildctl's default"
  std::filesystem::path tls_ca, tls_cert, tls_key; // a lane's, for a tcp:// daemon; "" none

  /// `--addr A` and the TLS flags buildctl connects with; nothing for buildctl's default.
  std::vector<std::string> flags() const;

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
  /// "buildkitd v0.11.6, buildctl v0.11.6", or why neither answers. Both are asked at once.
  tl::expected<std::string, std::string> version() const override;
  /// buildctl's file and, for a local daemon that is listening, its socket file: a restarted
  /// daemon binds a new one. A tcp:// daemon has none.
  std::string version_key() const override;
  /// `buildctl debug info`, stopped at `limit`.
  std::optional<std::string> unresponsive(std::chrono::milliseconds limit) const override;
  /// `buildctl debug workers`, read with parse_buildkit_workers.
  tl::expected<std::vector<std::string>, std::string> platforms() const override;
  /// `buildctl debug workers -v`, read with parse_buildkit_gc_rules and layer_keep_bytes.
  tl::expected<std::optional<uint64_t>, std::string> layer_cache_keep() const override;
  std::unique_ptr<Engine> on_host(const BuildRequest& request) const override {
    return std::make_unique<BuildkitEngine>(BuildkitAddress{
        request.host, request.host_from, request.tls_ca, request.tls_cert, request.tls_key});
  }
  std::vector<std::string> unsupported(const std::vector<BuildRequest>& requests,
                                       const std::string& version) const override;
  std::vector<std::string> version_warnings(const std::vector<BuildRequest>& requests,
                                            const std::string& version) const override;
  /// The decision behind unsupported() and version_warnings().
  BuildkitVersionCheck check_versions(const std::vector<BuildRequest>& requests,
                                      const BuildkitVersions& versions) const;
  std::vector<std::string> build_argv(const BuildRequest& request) const override;
  bool has_stage_image(const NamedContext& context) const override;
  std::string stage_image_place(const NamedContext& context) const override {
    return context.metadata.string();
  }
  /// The digest its metadata file names.
  std::string stage_image_identity(const NamedContext& context) const override;
  ImageConfigRead stage_image_config(const NamedContext& context) const override;
  /// From the stage's OCI layout, by digest.
  tl::expected<std::vector<LayoutImage>, std::string>
  stage_images(const NamedContext& context) const override;
  /// The manifest and its blobs taken from the stage's layout: the gated bytes, unchanged.
  tl::expected<Descriptor, std::string> export_image(const NamedContext& context,
                                                     LayoutWriter& layout,
                                                     const std::string& name) const override;
  /// The pin BuildKit's build info records for the source (its metadata file's
  /// `containerimage.buildinfo` sources).
  std::string external_image_digest(const std::string& ref,
                                    const NamedContext& built_by) const override;
  std::unique_ptr<BuildOutput> read_output() const override;
  /// The metadata file goes: a later stage is handed an image only through the digest it names.
  tl::expected<void, std::string> withdraw_image(const BuildRequest& request,
                                                 const std::string& identity,
                                                 const std::string& stable_tag) const override;
  std::string built_image(const BuildRequest& request,
                          const BuildProgress& progress) const override;
  std::string explain_failure(const Tail& evidence) const override;

  /// `buildctl [--addr A] <args...>`: every command kiln sends to the daemon.
  std::vector<std::string> command(std::initializer_list<std::string> args) const;

private:
  /// The layout a stage's image is read from and its digest: its own layout, which a stage
  /// handed over through the registry does not have.
  tl::expected<ImageLayout, std::string> stage_layout(const NamedContext& context) const;

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
