#pragma once

#include <future>

#include "engine/engine.h"

namespace kiln {

/// buildah: daemonless, the default engine. Layers are cached (`--layers`), a needed stage is
/// bound as `--build-context <name>=container-image://<tag>`, secrets by env or file.
class BuildahEngine : public Engine {
public:
  explicit BuildahEngine(std::string isolation) : m_isolation(std::move(isolation)) {}

  std::string name() const override { return "buildah"; }
  tl::expected<std::string, std::string> version() const override;
  /// buildah's file: its version is the program's.
  std::string version_key() const override;
  /// Locates the store (locate_buildah_store).
  void look_ahead() const override;
  std::vector<std::string> build_argv(const BuildRequest& request) const override;
  bool has_stage_image(const NamedContext& context) const override;
  std::string stage_image_place(const NamedContext& context) const override {
    return context.image;
  }
  /// The image id under the work tag.
  std::string stage_image_identity(const NamedContext& context) const override;
  /// From the store's index, which a run has read already; a buildah process only when the
  /// index does not say so.
  bool holds_stage_image(const NamedContext& context, const std::string& identity) const override;
  ImageConfigRead stage_image_config(const NamedContext& context) const override;
  /// Read in place from the store (buildah_store_image).
  tl::expected<std::vector<LayoutImage>, std::string>
  stage_images(const NamedContext& context) const override;
  /// `buildah push --format oci` of the image id: its layers compressed, its config unchanged.
  tl::expected<Descriptor, std::string> export_image(const NamedContext& context,
                                                     LayoutWriter& layout,
                                                     const std::string& name) const override;
  tl::expected<void, std::string> move_tag(const std::string& identity,
                                           const std::string& tag) const override;
  std::optional<ImageEnv> external_image_env(const std::string& ref) const override;
  /// The manifest digest the store records for the image the build pulled.
  std::string external_image_digest(const std::string& ref,
                                    const NamedContext& built_by) const override;
  std::unique_ptr<BuildOutput> read_output() const override;
  tl::expected<void, std::string> withdraw_image(const BuildRequest& request,
                                                 const std::string& identity,
                                                 const std::string& stable_tag) const override;

private:
  std::string m_isolation;
  mutable std::future<void> m_looking_ahead; // waited for when the engine goes
};

} // namespace kiln
