#pragma once

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
  std::vector<std::string> build_argv(const BuildRequest& request) const override;
  bool has_stage_image(const NamedContext& context) const override;
  std::string stage_image_place(const NamedContext& context) const override {
    return context.image;
  }
  ImageConfigRead stage_image_config(const NamedContext& context) const override;
  tl::expected<ImageLayout, std::string>
  stage_image_layout(const NamedContext& context,
                     const std::filesystem::path& scratch) const override;
  std::string stage_image_source(const NamedContext& context) const override;
  std::optional<ImageEnv> external_image_env(const std::string& ref) const override;
  std::unique_ptr<BuildOutput> read_output() const override;
  tl::expected<void, std::string> withdraw_image(const BuildRequest& request) const override;

private:
  std::string m_isolation;
};

} // namespace kiln
