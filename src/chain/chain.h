#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

#include "gates/residue.h"
#include "util/diagnostic.h"
#include "util/pattern.h"

namespace kiln {

struct DockerfileSource;

using KeyValues = std::vector<std::pair<std::string, std::string>>;

/// The most kiln reads of a chain file or a versions file: far beyond any real one, while a
/// mistake (a build log named as the chain) fails at once instead of filling memory.
constexpr uint64_t k_chain_file_limit = 16 << 20;

/// The text of a chain or versions file, or why it cannot be read without the file's name (the
/// diagnostic's position names it). A FIFO or a device is refused, not waited on or read
/// without end, and so is a file over k_chain_file_limit.
tl::expected<std::string, std::string> read_chain_input(const std::filesystem::path& file);

/// A secret reaches the build by the name of an environment variable or a file path, never by
/// value: a value on a command line ends up in `ps`, shell history and logs.
struct SecretRef {
  std::string id;
  std::string env;            // set when passed from an environment variable
  std::filesystem::path file; // set when passed from a file (absolute)
  SourcePos pos;
};

/// A family of failures worth another attempt, recognised by patterns (RE2 regular expressions,
/// compiled when the chain loads, matched anywhere in a line) over the failing output.
struct TransientClass {
  std::string name;
  std::vector<Pattern> patterns;
  /// A line that matches one of `patterns` but also one of these is not of the class: RE2 has
  /// no lookahead, so an exception is a pattern of its own.
  std::vector<Pattern> unless;
  /// Retry even when two attempts fail with the same tail: measured to go green later.
  bool retry_despite_identical = false;
  /// Match only lines the engine itself printed (its errors, a pull's messages), never what a
  /// build step printed: a test suite that prints `unexpected EOF` and fails is no engine flake.
  bool engine_only = false;
};

using Milliseconds = std::chrono::milliseconds;

struct RetryPolicy {
  int attempts = 3;
  Milliseconds cooldown{5000};      // before the second attempt; doubles after each failure
  Milliseconds cooldown_max{60000}; // the doubling stops here
  /// No output from the engine for this long stops an attempt as a stall (transient, unless it
  /// stalls again at the same step): a network call in a step once hung for exactly 2 h while
  /// the real work took 162 s.
  Milliseconds stall_timeout{std::chrono::hours(1)};
  Milliseconds timeout{0}; // one attempt's wall-clock cap; zero: none
};

/// A cache import or export as BuildKit spells it: `type=registry,ref=...,mode=max`.
struct CacheSpec {
  std::string text; // as written
  SourcePos pos;

  /// The value of attribute `key`, empty when absent.
  std::string attr(std::string_view key) const;
};

/// How kiln uses BuildKit's cache tiers. Every tier is off unless the chain asks for it.
struct CachePolicy {
  bool local = false;         // the local stage export (`mode=max`, one slug per stage and lane)
  std::filesystem::path root; // where the slugs live; absolute
  int import_flakes_before_drop = 2; // registry cache-import flakes before dropping the registry
  bool salvage = true;               // re-drive named targets so a failed stage's export lands
  double salvage_min_free_gb = 40;   // below this free space the salvage is skipped
  Milliseconds salvage_target_timeout{std::chrono::minutes(10)};
};

/// How kiln keeps a run from dying of a full disk ([disk] in the chain file).
struct DiskSettings {
  std::filesystem::path path;           // the drive to measure, absolute; "": each store's own
  double need_gb = 0;                   // free space a run needs to start; 0: no preflight
  double guard_gb = 10;                 // below this the in-stage watchdog reclaims; 0: no watchdog
  double floor_gb = 10;                 // a stage's default floor, checked before it starts
  int keep_slugs = 3;                   // newest cache exports a trim never removes
  std::optional<double> exports_max_gb; // the cache exports' total; nullopt: no cap
  double buildkit_keep_gb = 120;        // layer cache a BuildKit store prune keeps
  Milliseconds watch_interval{std::chrono::minutes(2)}; // the watchdog's tick
};

/// The resource sampler and the job budget ([resources] in the chain file).
struct ResourceSettings {
  Milliseconds sample_interval{std::chrono::seconds(20)}; // zero: no sampling
  std::optional<double> host_reserve_gb;
  std::optional<double> memory_limit_gb;
  double mem_per_job_gb = 2;
  /// Stages that build at once; nullopt: as many as the job budget has slots (each stage takes
  /// at least one).
  std::optional<int> max_parallel;
};

/// What a stage is for: `build` makes an image; `smoke` builds against the image it needs to run
/// tests, and its output must report results that meet the chain's coverage floors.
enum class StageKind { build, smoke };

/// What the gates check beyond their built-in rules ([gates] and [smoke] in the chain file).
struct GateSettings {
  std::vector<std::string> host_env_names; // more build-host names, NAME or PREFIX*
  std::optional<std::vector<std::string>> cache_mount_targets; // unset: the linter's; []: none
  std::string cache_endpoint_arg;                              // empty: the linter's default
  std::vector<std::string> per_file_only_dirs; // as written, relative to a stage's context
  /// The stage whose image is published: graded before anything leaves the host. Default: the
  /// last build stage in file order.
  std::string final_stage;
  SourcePos final_pos;
  // Coverage floors of every smoke stage: a gate that asserted nothing must never print green.
  int min_passed = 1;
  int max_skipped = 0;
  /// Build-host files the residue gate reports but lets ship, each with the chain's reason.
  std::vector<ResidueAllow> residue_allow;
  /// ELF files of another platform the arch gate reports but lets ship (a cross toolchain's
  /// target libraries), each with the chain's reason.
  std::vector<ResidueAllow> arch_allow;
};

/// The multi-platform image assembled from the lanes' final images ([publish] in the chain file).
struct PublishSettings {
  std::string index;      // where the image index is pushed, host/repository:tag; "": none
  bool tls_verify = true; // false for a plain-HTTP registry, such as one on 127.0.0.1
  SourcePos pos;          // of `index`
  /// A published image must have passed a smoke stage that needs it; false says the chain
  /// publishes without one, on purpose.
  bool require_smoke = true;
  /// Commands run after the push and before the tag moves, `{ref}` and `{digest}` replaced in
  /// each word: a signer, and a check of its signature. Empty: none.
  std::vector<std::string> sign;
  std::vector<std::string> verify;
};

/// When the end of a run flags a stage as slower than usual ([history] in the chain file; the
/// median is over the stage's last 10 green builds like it: docs/forensics.md).
struct HistorySettings {
  double regression_percent = 20;
  double regression_seconds = 30;
};

struct Stage {
  std::string name;
  StageKind kind = StageKind::build;
  /// Grade the built image's Env like the final image's (the final stage is always graded).
  bool gate_image_env = false;
  SourcePos pos;                    // of the [[stage]] table
  std::filesystem::path dockerfile; // absolute
  std::filesystem::path context;    // absolute
  std::string target;               // empty: the Dockerfile's last stage
  std::string tag;                  // image name the stage is tagged with
  /// Whether a run moves `tag` to the stage's image once it passed. A smoke stage's image is a
  /// test run that nothing builds on or publishes: it keeps its work name only, unless the chain
  /// file writes its `tag`, and no run pays a buildah call to name it.
  bool stable_name = true;
  std::vector<std::string> needs;
  std::vector<SourcePos> needs_pos; // one per entry of needs
  KeyValues build_args;             // from the chain file, in file order
  std::vector<SourcePos> build_args_pos;
  std::vector<SecretRef> secrets;
  int attempts = 3;
  Milliseconds stall_timeout{std::chrono::hours(1)}; // [defaults] unless set on the stage
  Milliseconds timeout{0};                           // zero: no limit
  /// The fewest compile requests the stage's kiln-cc steps must report, 0 for no floor: a
  /// component that bypasses the compile cache adds nothing to a hit rate, only to this count.
  int min_compile_requests = 0;
  /// Its claim on the job budget against the stages building at the same time.
  int weight = 1;
  /// A smoke stage's own coverage floors; unset: [smoke]'s. An 11-check self-test and a
  /// 342-test suite cannot share one floor.
  std::optional<int> min_passed;
  std::optional<int> max_skipped;
  /// Absolute paths its built image must hold, read from its layers: a stage that "built" but
  /// lost its library fails here, not three stages later.
  std::vector<std::string> artifacts;
  /// The most layers its image may have (0: no ceiling).
  int max_layers = 0;
  /// The Dockerfile as the chain loaded it, read and parsed once: every question a run asks
  /// about it is answered from here. Stages that share a file share one.
  std::shared_ptr<const DockerfileSource> dockerfile_source;
  /// Every name the Dockerfile declares with ARG (before or after FROM), in first-seen order.
  std::vector<std::string> declared_args;

  /// The name its Dockerfile and the Dockerfiles that need it know it by (FROM base): its
  /// name without its lane. Empty: its name (a stage made by hand).
  std::string context_name;
  const std::string& known_as() const { return context_name.empty() ? name : context_name; }
  /// With [[lane]] tables, the lanes it runs in as the chain file names them (none: all), and
  /// once the chain is loaded, the one lane of this copy.
  std::vector<std::string> lanes;
  std::vector<SourcePos> lanes_pos;
  /// Labels a worker of its pool must have to build it (a GPU, a big disk).
  std::vector<std::string> worker_labels;
  SourcePos worker_labels_pos;
  /// The workers it may be placed on, in the chain file's order: its lane's pool (or the
  /// chain's) less those without its labels or its lane's platform; empty: no pool, it builds
  /// on its lane's host. Set when the lanes are expanded.
  std::vector<std::string> workers;

  // BuildKit cache tiers.
  std::string lane;                  // part of the local cache slug's name (an arch, a variant);
                                     // with [[lane]] tables, the lane of this copy
  bool cache_local = false;          // the local stage export, from [cache] local unless set here
  std::vector<CacheSpec> cache_from; // registry tiers the build imports
  std::vector<CacheSpec> cache_to;   // registry and inline tiers the build exports
  std::optional<CacheSpec> snapshot_to; // the registry mode=max export `kiln cache snapshot`
                                        // writes, never on a build's critical path

  std::optional<double> disk_floor_gb;  // free space the stage needs to start; [disk] floor_gb
  std::optional<double> mem_per_job_gb; // the job budget's divisor; [resources] mem_per_job_gb
};

/// A BuildKit daemon of a pool: a lane that names it in `workers` (or a chain without lanes,
/// in `[engine.buildkit] workers`) places each of its stages on one of the pool's workers.
struct Worker {
  std::string name;
  std::string host;                    // its BuildKit address (buildctl --addr)
  std::filesystem::path ca, cert, key; // TLS files for a tcp:// host, absolute; "" for none
  std::vector<std::string> platforms;  // what it builds for, normalised; empty: not said
  std::vector<std::string> labels;     // what a stage's worker_labels may ask of it
  int max_parallel = 1;                // stages building on it at once
  std::optional<double> memory_gb;     // what it has, for the budget of a stage on it
  std::optional<int> cores;
  SourcePos pos;
};

/// One copy of the chain for one platform or worker: every stage runs once per lane unless it
/// names its lanes. Its stages' images, layouts, budget files and cache slugs are its own.
struct Lane {
  std::string name;
  std::string platform;                // BuildKit `--opt platform=`, buildah `--platform`
  std::string host;                    // the BuildKit address its builds go to; "" the chain's
  std::filesystem::path ca, cert, key; // TLS files for a tcp:// host, absolute; "" for none
  std::vector<std::string> workers;    // its pool: [[worker]] names; empty: `host`
  std::vector<SourcePos> workers_pos;
  KeyValues build_args; // over the stage's own, under the command line's
  SourcePos pos;
};

struct Chain {
  std::filesystem::path file; // the chain file, absolute
  std::filesystem::path dir;  // its folder; relative paths in the file resolve against it
  std::string name;
  std::string engine = "buildah";
  std::string buildah_isolation = "chroot";
  std::string buildkit_host; // [engine.buildkit] host; empty: buildctl's default
  /// [engine.buildkit] workers: the pool of a chain without lanes (and of lanes that name
  /// neither a host nor workers).
  std::vector<std::string> buildkit_workers;
  std::vector<SourcePos> buildkit_workers_pos;
  std::vector<Worker> workers; // [[worker]] tables, in file order
  std::string registry;        // stage handoff by push when set (BuildKit)
  CachePolicy cache;
  DiskSettings disk;
  ResourceSettings resources;
  GateSettings gates;
  PublishSettings publish;
  HistorySettings history;
  /// [trace] otlp_endpoint: where the run's spans go over OTLP/HTTP when it ends ("": nowhere,
  /// unless OTEL_EXPORTER_OTLP_ENDPOINT names one).
  std::string otlp_endpoint;
  std::filesystem::path versions_file; // absolute; empty when the chain names none
  std::filesystem::path records;       // absolute
  /// [records] keep: at the end of each run, remove all but the newest this many run folders
  /// and their history rows (`kiln records prune --keep`); nullopt keeps every run.
  std::optional<int> records_keep;
  KeyValues versions; // pins from versions_file, in file order
  RetryPolicy defaults;
  std::vector<TransientClass> transient; // chain-file additions to the built-in classes
  /// In file order. With lanes, one per stage and lane, lane by lane: `<lane>/<stage>`.
  std::vector<Stage> stages;
  std::vector<Lane> lanes;      // [[lane]] tables, in file order; none: one copy of the chain
  std::optional<int> max_lanes; // lanes building at once; nullopt: all

  const Stage* find_stage(const std::string& name) const;
  /// Every stage's name, in file order: what a "did you mean" picks from.
  std::vector<std::string> stage_names() const;
  const Lane* find_lane(const std::string& name) const;
  const Worker* find_worker(const std::string& name) const;

  /// The reference a stage's image is pushed to when the chain names a registry: the tag's
  /// repository and tag moved under the registry (`localhost/hello-base:latest` ->
  /// `<registry>/hello-base:latest`).
  std::string pushed_ref(const Stage& stage) const;

  /// The local cache slug of a stage: one folder per stage and lane under the cache root.
  std::filesystem::path cache_slug(const Stage& stage) const;
};

} // namespace kiln
