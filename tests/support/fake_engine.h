#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "fake_clock.h"
#include "temp_dir.h"

namespace kiln::testing {

/// One scripted engine invocation: what it prints (in buildah's format, read by buildah's own
/// reader) and how it ends.
struct FakeBuild {
  std::vector<std::string> lines;
  int exit_code = 0;
  std::chrono::milliseconds takes{0}; // moved on the fake clock, when the engine has one
  bool stalled = false;               // ends as if its stall limit stopped it
  bool timed_out = false;             // ends as if its time limit stopped it
  /// Runs in the middle of the build, after the lines: throw to play an internal failure.
  std::function<void()> during;
  /// Real time the build takes, ended early by its cancel token: lets builds overlap.
  std::chrono::milliseconds holds{0};
  /// Held like a builder slow to clean up: the first cancel does not end it, a second does.
  bool stubborn = false;

  /// A build of `steps` steps (`RUN step k`), each served from the cache or not, that ends
  /// with the image id line of a successful build.
  static FakeBuild ok(int steps = 1, bool cached = false);
  /// A build that fails at its last step, printing `error`.
  static FakeBuild failing(const std::string& error, int exit_code = 1);
};

/// An engine that runs nothing: each stage's builds play from a script, in order, and a stage
/// with no script left builds ok. It remembers what it was asked, so a test of the run loop
/// runs in-process, deterministic and fast.
class FakeEngine : public Engine {
public:
  explicit FakeEngine(const FakeClock* clock = nullptr) : m_clock(clock) {}

  void script(const std::string& stage, std::vector<FakeBuild> builds);
  /// The Env the image of `stage` carries, for the image-env gate.
  void set_env(const std::string& stage, std::vector<std::string> env);
  /// The layer blobs (tests/support/layer_tarball.h) the image of `stage` is made of, bottom
  /// first; a stage without them has an image of no layers.
  void set_layers(const std::string& stage, std::vector<std::string> layers);

  /// Stage names in the order their builds started, one entry per build.
  std::vector<std::string> builds() const;
  /// Tags whose images were withdrawn.
  std::vector<std::string> withdrawn() const;
  /// `start <stage>` and `end <stage>` for every build, in the order they happened.
  std::vector<std::string> events() const;
  /// The most builds that were running at the same moment.
  int most_at_once() const;

  std::string name() const override { return "fake"; }
  tl::expected<std::string, std::string> version() const override { return std::string("1.0"); }
  std::vector<std::string> build_argv(const BuildRequest& request) const override;
  bool has_stage_image(const NamedContext& context) const override;
  std::string stage_image_place(const NamedContext& context) const override {
    return context.image;
  }
  /// The id the last successful build under the context's tag printed.
  std::string stage_image_identity(const NamedContext& context) const override;
  /// The Env set for the stage, and the labels and platform of the build that left the image.
  ImageConfigRead stage_image_config(const NamedContext& context) const override;
  /// An OCI layout written into a folder of the engine's from the stage's layers.
  tl::expected<std::vector<LayoutImage>, std::string>
  stage_images(const NamedContext& context) const override;
  tl::expected<Descriptor, std::string> export_image(const NamedContext& context,
                                                     LayoutWriter& layout,
                                                     const std::string& name) const override;
  std::unique_ptr<BuildOutput> read_output() const override;
  tl::expected<void, std::string> withdraw_image(const BuildRequest& request,
                                                 const std::string& identity,
                                                 const std::string& stable_tag) const override;
  ProcessExit build(const BuildRequest& request, const OutputSink& sink,
                    const BuildLimits& limits) const override;

private:
  const FakeClock* m_clock;
  mutable std::mutex m_mutex;
  mutable std::map<std::string, std::vector<FakeBuild>> m_scripts;
  std::map<std::string, std::vector<std::string>> m_env;
  std::map<std::string, std::vector<std::string>> m_layers; // by stage
  mutable std::vector<std::string> m_builds;
  mutable std::vector<std::string> m_withdrawn;
  mutable std::map<std::string, std::string> m_images;  // tag -> the id its last build left
  mutable std::map<std::string, ImageConfig> m_configs; // by id: the build's labels
  TempDir m_scratch;                                    // where stage_images writes layouts
  mutable std::vector<std::string> m_events;
  mutable int m_running = 0;
  mutable int m_most_at_once = 0;
};

} // namespace kiln::testing
