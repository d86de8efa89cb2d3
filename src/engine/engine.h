#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "chain/chain.h"
#include "util/process.h"

namespace kiln {

/// A stage's image seen by a later stage under the stage's name (`FROM base`).
struct NamedContext {
  std::string name;
  std::string image; // a reference in the engine's image store
};

/// Everything one engine invocation needs; the engine decides how to spell it.
struct BuildRequest {
  std::filesystem::path dockerfile;
  std::filesystem::path context;
  std::string target;
  std::string tag;
  KeyValues build_args;
  std::vector<NamedContext> contexts;
  /// A folder holding kiln's static tools (kiln-cc), offered to the Dockerfile as the named
  /// context `kiln-tools`; empty when kiln has none to offer.
  std::filesystem::path tools;
  std::vector<SecretRef> secrets;
};

/// What the output of one build has said so far about its progress.
struct BuildProgress {
  int build_stage = 0;  // Dockerfile stage being built, 1-based; 0 when single-stage
  int build_stages = 0; // how many the engine will build for this target
  int step = 0;         // step within that Dockerfile stage, 1-based
  int steps = 0;
  std::string instruction; // the current step's instruction, as the engine echoed it
  int steps_run = 0;       // steps that produce a layer (FROM excluded) started so far
  int steps_cached = 0;    // of those, how many the layer cache served
  std::string image_id;    // the id of the image built, once the engine has reported it
};

/// The one seam between kiln and a real builder.
class Engine {
public:
  virtual ~Engine() = default;

  virtual std::string name() const = 0;

  /// The builder's version for the record; an error saying what to install when it is absent.
  virtual tl::expected<std::string, std::string> version() const = 0;

  /// The exact command a build runs: what `--dry-run` prints and what build() executes.
  virtual std::vector<std::string> build_argv(const BuildRequest& request) const = 0;

  /// Whether an image reference exists in the engine's store.
  virtual bool image_exists(const std::string& image) const = 0;

  /// Fold one line of build output into `progress`; true when it changed.
  virtual bool update_progress(std::string_view line, BuildProgress& progress) const = 0;

  /// Whether a line only repeats the Dockerfile's text (a step header, an error quoting the
  /// step): failure classification skips such lines, or a RUN that mentions a flake's message
  /// would look like the flake.
  virtual bool echoes_instruction(std::string_view line) const = 0;

  /// Run a build, streaming its output to `sink`; stops when `interrupt_fd` becomes readable.
  ProcessExit build(const BuildRequest& request, const OutputSink& sink, int interrupt_fd) const {
    return run_process({build_argv(request), {}, {}}, sink, interrupt_fd);
  }
};

/// The engine a chain names; the loader has already refused names kiln does not know.
std::unique_ptr<Engine> make_engine(const Chain& chain);

} // namespace kiln
