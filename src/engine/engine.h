#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "chain/chain.h"
#include "engine/image_config.h"
#include "engine/oci_writer.h"
#include "util/process.h"

namespace kiln {

/// The last lines of an attempt's output, in order; what failure classification looks at.
using Tail = std::vector<std::string>;

/// How many trailing lines of output classification and the identical-failure check read.
constexpr size_t k_failure_tail_lines = 60;

/// A stage's image seen by a later stage under the stage's name (`FROM base`).
struct NamedContext {
  std::string name;
  std::string image;              // its work tag in the engine's image store (buildah)
  std::filesystem::path layout;   // its OCI layout folder (BuildKit)
  std::filesystem::path metadata; // the metadata file of its last build: names its digest
  std::string pushed;             // its repository in the chain's registry, when pushed
  /// The image itself, once known: buildah's image id, BuildKit's manifest digest. Set by the
  /// run for a stage it built or looked up, and then every use names it, never a tag another
  /// run could move.
  std::string identity = {};
};

/// How long a daemon gets to answer a probe (its version at the start, whether it still
/// answers after a build went silent): a local one answers in milliseconds, a remote one in
/// well under a second; one that takes longer is not serving builds either.
inline constexpr std::chrono::seconds k_daemon_answer_limit{10};

/// Everything one engine invocation needs; the engine decides how to spell it.
struct BuildRequest {
  std::string stage; // the chain's name for it
  // Its lane's: the platform to build for, and the BuildKit daemon to build on (with TLS
  // files for a tcp:// one); empty: the engine's own.
  std::string platform;
  std::string host;
  std::string host_from; // the chain file's table naming `host`: "[[lane]] arm64", "[[worker]] bk2"
  std::filesystem::path tls_ca, tls_cert, tls_key;
  std::filesystem::path dockerfile;
  std::filesystem::path context;
  std::string target;
  std::string tag;
  KeyValues build_args;
  KeyValues labels; // on the image built: buildah `--label`, BuildKit `--opt label:`
  std::vector<NamedContext> contexts;
  /// A folder holding kiln's static tools (kiln-cc), offered to the Dockerfile as the named
  /// context `kiln-tools`; empty when kiln has none to offer.
  std::filesystem::path tools;
  std::vector<SecretRef> secrets;
  /// Where the engine keeps its temporary files (its TMPDIR), a folder of the run's own that
  /// kiln removes however the run ends; empty: the engine's default.
  std::filesystem::path temp_dir;

  // Where a BuildKit build leaves its image: an OCI layout plus the metadata naming its digest,
  // or a push to `pushed` when the chain names a registry.
  std::filesystem::path layout;
  std::filesystem::path metadata;
  std::string pushed;

  // Cache tiers (BuildKit). Registry-facing ones as the chain wrote them; the local stage
  // export lives in `cache_slug` (empty: the tier is off).
  std::vector<std::string> cache_from;
  std::vector<std::string> cache_to;
  std::filesystem::path cache_slug;
  bool export_local = true; // false: read the slug but write no new export
  /// Leave out every registry-facing cache argument: after repeated import flakes, or when the
  /// user asked for no cache export, the build finishes on the local tier.
  bool drop_registry_cache = false;
  /// Run every step afresh: a smoke stage served from the layer cache would report the tests of
  /// an earlier run as this run's.
  bool no_cache = false;
};

/// What the output of one build has said so far about its progress.
struct BuildProgress {
  int build_stage = 0;          // Dockerfile stage being built, 1-based; 0 when unknown
  int build_stages = 0;         // how many the engine will build for this target; 0: unknown
  std::string build_stage_name; // its name, when the engine names stages (BuildKit)
  int step = 0;                 // step within that Dockerfile stage, 1-based
  int steps = 0;
  std::string instruction; // the current step's instruction, as the engine echoed it
  int steps_run = 0;       // steps that produce a layer (FROM excluded) started so far
  int steps_cached = 0;    // of those, how many the layer cache served
  int vertices = 0;        // every operation the engine reported, steps included (BuildKit)
  int vertices_cached = 0;
  std::string image_id; // the id of the image built, once the engine has reported it
};

/// A Dockerfile step the engine reported, and whether the layer cache served it.
struct StepSeen {
  std::string instruction; // as the engine echoed it
  bool cached = false;
};

/// Reads one build's output line by line.
class BuildOutput {
public:
  virtual ~BuildOutput() = default;

  /// Fold one line (without its newline) in; true when progress() changed.
  virtual bool feed(std::string_view line) = 0;

  virtual const BuildProgress& progress() const = 0;

  /// The failing operation's own output: what classification and the identical-failure check
  /// read. Lines that only repeat the Dockerfile's text are left out, or a RUN that mentions a
  /// flake's message would look like the flake.
  virtual Tail evidence() const = 0;
  /// Of evidence(), the lines the engine printed itself (its error lines, what a pull or a cache
  /// import said), in order; never what a build step's command printed.
  virtual Tail engine_evidence() const = 0;

  /// Dockerfile stages every step of which finished (built or served from the cache), in the
  /// order they finished, and the stage whose step failed; empty where the engine's output does
  /// not name stages (buildah numbers them).
  virtual std::vector<std::string> finished_build_stages() const { return {}; }
  /// Every layer-producing step (FROM excluded) the build reported, in order.
  virtual std::vector<StepSeen> steps() const = 0;
  virtual std::string failed_build_stage() const { return {}; }
};

/// What may stop a build besides its own end.
struct BuildLimits {
  std::chrono::milliseconds timeout{0};       // wall-clock cap of one attempt; zero: none
  std::chrono::milliseconds stall_timeout{0}; // no output for this long; zero: none
  const CancelToken* cancel = nullptr;        // nullptr: interrupt_token()
  std::function<void()> on_stop{};            // told when a limit or the token stops it
};

/// The one seam between kiln and a real builder.
class Engine {
public:
  virtual ~Engine() = default;

  virtual std::string name() const = 0;

  /// The builder's version for the record; an error saying what is wrong (not installed, a
  /// daemon not reachable) and what to do.
  virtual tl::expected<std::string, std::string> version() const = 0;

  /// What identifies everything version() asks (the programs' files, a local daemon's
  /// socket), such that the same key means the same answer; "" when nothing does, as for a
  /// remote daemon, and then every run asks. The probes are a fair share of a fully cached
  /// chain's time.
  virtual std::string version_key() const { return {}; }

  /// Start in the background what a run asks of the engine once its builds are done (buildah:
  /// where its store is, for the stable tags), so it overlaps the first build instead of
  /// following the last. What it finds is kept where those later calls look.
  virtual void look_ahead() const {}

  /// The same engine on the daemon `request` builds on (a lane's `host`, with its TLS files);
  /// nullptr for an engine to which a host means nothing (buildah builds on the local host).
  virtual std::unique_ptr<Engine> on_host(const BuildRequest& request) const {
    (void)request;
    return nullptr;
  }

  /// After a build went silent: why the builder's daemon is not answering (frozen, gone), or
  /// nullopt when it answers within `limit` (or there is no daemon: buildah runs no daemon of
  /// its own). A silence the daemon answers through is the step's.
  virtual std::optional<std::string> unresponsive(std::chrono::milliseconds limit) const {
    (void)limit;
    return std::nullopt;
  }

  /// The platforms the builder builds for, natively or through an emulator it has, as it lists
  /// them; empty when there is no daemon to ask (buildah builds what its host runs), an error
  /// saying why they could not be read.
  virtual tl::expected<std::vector<std::string>, std::string> platforms() const {
    return std::vector<std::string>{};
  }

  /// The most layer cache the builder's garbage collector keeps between runs, in bytes;
  /// nullopt when it bounds none (buildah keeps what it built until told otherwise).
  virtual tl::expected<std::optional<uint64_t>, std::string> layer_cache_keep() const {
    return std::optional<uint64_t>{};
  }

  /// Options in `requests` that the builder at `version` rejects, one message each.
  virtual std::vector<std::string> unsupported(const std::vector<BuildRequest>& requests,
                                               const std::string& version) const {
    (void)requests;
    (void)version;
    return {};
  }

  /// What kiln could not check about the builder at `version` for `requests` (a version that
  /// names no release): the run goes on and warns, one message each.
  virtual std::vector<std::string> version_warnings(const std::vector<BuildRequest>& requests,
                                                    const std::string& version) const {
    (void)requests;
    (void)version;
    return {};
  }

  /// The exact command a build runs: what `--dry-run` prints and what build() executes.
  virtual std::vector<std::string> build_argv(const BuildRequest& request) const = 0;

  /// Whether an earlier run left the image a later stage would be handed as `context`.
  virtual bool has_stage_image(const NamedContext& context) const = 0;

  /// Where has_stage_image() looks, for a message that says what is missing.
  virtual std::string stage_image_place(const NamedContext& context) const = 0;

  /// The identity of the image an earlier run left as `context` (buildah's image id under the
  /// stage's work tag, BuildKit's digest in the metadata file); "" when there is none.
  virtual std::string stage_image_identity(const NamedContext& context) const = 0;

  /// Whether `context`'s name still holds the image `identity`: what a judge of a rebuild asks
  /// of every stage whose inputs did not change, so an engine answers it as cheaply as it can.
  virtual bool holds_stage_image(const NamedContext& context, const std::string& identity) const {
    return stage_image_identity(context) == identity;
  }

  /// The config of the image `context` names (by its identity when set): the Env the publish
  /// gate grades, the labels and platform the index's gates read.
  virtual ImageConfigRead stage_image_config(const NamedContext& context) const = 0;

  /// The image `context` names, each platform with its layers where the engine keeps them
  /// (buildah's store, BuildKit's layout), read in place: what the layer gates scan.
  virtual tl::expected<std::vector<LayoutImage>, std::string>
  stage_images(const NamedContext& context) const = 0;

  /// The image `context` names (by identity) put into `layout` under `name`, as it is pushed:
  /// its descriptor. Its config is the gated image's; a digest that moved on the way is an error.
  virtual tl::expected<Descriptor, std::string> export_image(const NamedContext& context,
                                                             LayoutWriter& layout,
                                                             const std::string& name) const = 0;

  /// Point `tag` at the image `identity` names, once every gate and smoke stage that guards it
  /// passed: the stable name of buildah's store. An engine with nothing local to name does
  /// nothing.
  virtual tl::expected<void, std::string> move_tag(const std::string& identity,
                                                   const std::string& tag) const {
    (void)identity;
    (void)tag;
    return {};
  }

  /// The Env of an image a Dockerfile names that is no stage of the chain (`FROM debian:12`);
  /// nullopt when this engine cannot see it before the build does (it resolves inside a daemon).
  virtual std::optional<ImageEnv> external_image_env(const std::string& ref) const {
    (void)ref;
    return std::nullopt;
  }

  /// The digest of an image from outside the chain (`FROM debian:12`) as the build of
  /// `built_by` resolved it, for a provenance; "" when the engine does not say.
  virtual std::string external_image_digest(const std::string& ref,
                                            const NamedContext& built_by) const {
    (void)ref;
    (void)built_by;
    return {};
  }

  /// A reader for one build's output.
  virtual std::unique_ptr<BuildOutput> read_output() const = 0;

  /// The id of the image a successful build of `request` produced.
  virtual std::string built_image(const BuildRequest& request,
                                  const BuildProgress& progress) const {
    (void)request;
    return progress.image_id;
  }

  /// Take back the image a build of `request` left where a later stage or run is handed it (a
  /// stage that built but was refused must not pass its image on), `identity` being that image:
  /// its work name, and a stable name (`stable_tag`) that names the same image. Ok when nothing
  /// is there.
  virtual tl::expected<void, std::string> withdraw_image(const BuildRequest& request,
                                                         const std::string& identity,
                                                         const std::string& stable_tag) const = 0;

  /// A precise sentence for a failure the engine itself explains (an option this builder does
  /// not know), empty when it has nothing to add to the evidence.
  virtual std::string explain_failure(const Tail& evidence) const {
    (void)evidence;
    return {};
  }

  /// Run a build, streaming its output to `sink`, within `limits`.
  virtual ProcessExit build(const BuildRequest& request, const OutputSink& sink,
                            const BuildLimits& limits) const {
    ProcessSpec spec{build_argv(request),  {},           {}, limits.timeout,
                     limits.stall_timeout, limits.cancel};
    if (!request.temp_dir.empty()) {
      spec.env.emplace_back("TMPDIR", request.temp_dir.string());
    }
    spec.on_stop = limits.on_stop;
    return run_process(spec, sink);
  }
};

/// The engine a chain names; the loader has already refused names kiln does not know.
std::unique_ptr<Engine> make_engine(const Chain& chain);

} // namespace kiln
