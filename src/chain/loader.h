// The chain loader's internals, shared by its files: the Loader class, the keys each table
// takes and the limits on values, and the value checks the readers share. chain_loader.cpp
// drives a load and reads single values; chain_tables.cpp reads each table of the chain file;
// chain_checks.cpp checks the stages against each other; chain_lanes.cpp reads [[lane]] tables
// and expands the stages into one copy per lane.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <tl/expected.hpp>
#include <toml++/toml.h>

#include "chain/chain.h"
#include "chain/chain_loader.h"
#include "util/diagnostic.h"

namespace kiln::chain_loading {

namespace fs = std::filesystem;

inline const std::vector<std::string> k_engines = {"buildah", "buildkit"};
inline const std::vector<std::string> k_isolations = {"chroot", "oci", "rootless"};

inline const std::vector<std::string> k_top_keys = {
    "chain", "engine", "defaults", "transient", "cache",   "disk",  "resources", "gates",
    "smoke", "stage",  "lane",     "publish",   "history", "trace", "worker",    "records"};
inline const std::vector<std::string> k_lane_keys = {"name", "platform", "host",       "ca",
                                                     "cert", "key",      "build_args", "workers"};
inline const std::vector<std::string> k_worker_keys = {
    "name",      "host",   "ca",           "cert",      "key",
    "platforms", "labels", "max_parallel", "memory_gb", "cores"};
inline const std::vector<std::string> k_gates_keys = {"host_env_names",     "cache_mount_targets",
                                                      "cache_endpoint_arg", "per_file_only_dirs",
                                                      "residue_allow",      "arch_allow"};
inline const std::vector<std::string> k_residue_allow_keys = {"path", "reason"};
inline const std::vector<std::string> k_smoke_keys = {"min_passed", "max_skipped"};
inline const std::vector<std::string> k_publish_keys = {"index", "tls_verify", "require_smoke",
                                                        "sign", "verify"};
inline const std::vector<std::string> k_history_keys = {"regression_percent", "regression_seconds"};
inline const std::vector<std::string> k_trace_keys = {"otlp_endpoint"};
inline const std::vector<std::string> k_records_keys = {"keep"};
inline const std::vector<std::string> k_disk_keys = {
    "path",       "need_gb",          "guard_gb",         "floor_gb",
    "keep_slugs", "buildkit_keep_gb", "watch_interval_s", "exports_max_gb"};
inline const std::vector<std::string> k_resources_keys = {"sample_interval_s", "host_reserve_gb",
                                                          "memory_limit_gb",   "mem_per_job_gb",
                                                          "max_parallel",      "max_lanes"};
inline const std::vector<std::string> k_chain_keys = {"name",    "engine",   "versions",
                                                      "records", "registry", "final"};
inline const std::vector<std::string> k_engine_keys = {"buildah", "buildkit"};
inline const std::vector<std::string> k_buildkit_keys = {"host", "workers"};
inline const std::vector<std::string> k_cache_keys = {"local",
                                                      "root",
                                                      "import_flakes_before_drop",
                                                      "salvage",
                                                      "salvage_min_free_gb",
                                                      "salvage_target_timeout_s"};
inline const std::vector<std::string> k_buildah_keys = {"isolation"};
inline const std::vector<std::string> k_defaults_keys = {"attempts", "cooldown_s", "cooldown_max_s",
                                                         "stall_timeout_s", "timeout_s"};
inline const std::vector<std::string> k_transient_keys = {"name", "patterns",
                                                          "retry_despite_identical"};
inline const std::vector<std::string> k_stage_keys = {
    "name",          "dockerfile",     "context",       "target",         "tag",
    "needs",         "build_args",     "secrets",       "attempts",       "min_compile_requests",
    "lane",          "cache_local",    "cache_from",    "cache_to",       "snapshot_cache_to",
    "disk_floor_gb", "mem_per_job_gb", "kind",          "gate_image_env", "stall_timeout_s",
    "timeout_s",     "weight",         "lanes",         "min_passed",     "max_skipped",
    "artifacts",     "max_layers",     "worker_labels", "matrix"};
inline constexpr const char* k_attempts_hint = "1 means a single attempt and no retry";
inline const std::vector<std::string> k_secret_keys = {"id", "env", "file"};

// The longest duration any key takes: longer is a typo (minutes for seconds, an extra digit).
inline constexpr double k_max_seconds = 30.0 * 24 * 3600;

// The largest count any key takes (attempts, floors): more is a typo, and sums stay far from
// overflowing.
inline constexpr int64_t k_max_count = 1000000;

// The largest size any key takes, in GB: a petabyte is a typo for a disk a chain builds on.
inline constexpr double k_max_gb = 1e6;

// The most stages one matrix makes: more is a variable listed twice or a product mistaken.
inline constexpr size_t k_max_matrix_stages = 256;

inline constexpr std::string_view k_identifier_rule =
    "use letters, digits and '_', not starting with a digit";

/// Chain and stage names: lower-case letters, digits, '_', '.' and '-', starting with a letter
/// (or a digit, when `digit_first`).
bool is_lower_name(std::string_view name, bool digit_first);
/// A Dockerfile stage name as `--target` takes it: BuildKit's `^[a-z][a-z0-9-_.]*$`, any case.
bool is_stage_target(std::string_view target);
/// `os/arch[/variant]` as containerd normalises it (lower case; `x86_64` is `amd64`, `aarch64`
/// `arm64`, `armhf` `arm/v7`; a variant that is the arch's baseline dropped), or what is wrong:
/// not that shape, an os or architecture Go does not name, a variant its architecture lacks.
tl::expected<std::string, std::string> normalize_platform(std::string_view platform);
/// What is wrong with a daemon address an engine gets as an argv word, "" when nothing: the
/// shape buildctl dials (unix:// with a path, tcp:// with a host and a port of 1-65535).
std::string host_address_problem(std::string_view host);
bool is_secret_id(std::string_view id);
/// How a chain file's value reads in a message: "a string", "an integer", ...
std::string_view type_name(const toml::node& node);
/// What get<T> expects, in the words of type_name.
template <typename T> constexpr std::string_view expected_type() {
  if constexpr (std::is_same_v<T, std::string>) {
    return "a string";
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return "an integer";
  } else if constexpr (std::is_same_v<T, bool>) {
    return "a boolean";
  } else if constexpr (std::is_same_v<T, toml::array>) {
    return "an array";
  } else {
    return "a table";
  }
}

/// "did you mean 'x'?" for the candidate closest to `word`, else `list_intro` and every one.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates,
                         std::string_view list_intro);
/// `text` as a message fragment: trimmed, no final '.', its first letter lower case.
std::string as_fragment(std::string_view text);
/// A stage with no `lanes` runs in every lane.
bool runs_in(const Stage& stage, const std::string& lane);

/// One combination of a matrix: each variable with its value.
using MatrixBinding = std::vector<std::pair<std::string, std::string>>;
/// `node`'s strings set to those of `written` (a copy of it as the file has it) with each
/// `${variable}` of `binding` replaced. The table is changed in place, not copied, since
/// toml++ keeps no source position on a copy: diagnostics point into the written table.
void substitute_matrix(toml::node& node, const toml::node& written, const MatrixBinding& binding);

enum class PathKind { file, directory };

enum class VisitState { unvisited, on_path, done };

struct StageSource {
  int name_line = 0;
  std::string dockerfile; // as written
  SourcePos dockerfile_pos;
  bool dockerfile_found = false;
};

class Loader {
public:
  Loader(const fs::path& file, const LoadOptions& options)
      : m_file(file), m_name(file.string()), m_options(options) {}

  tl::expected<Chain, Diagnostics> load();

private:
  SourcePos pos(const toml::source_position& at) const {
    return {m_name, static_cast<int>(at.line), static_cast<int>(at.column)};
  }
  SourcePos pos(const toml::node& node) const { return pos(node.source().begin); }
  void error(SourcePos pos, std::string message, std::string hint = {}) {
    m_diagnostics.push_back({std::move(pos), std::move(message), std::move(hint)});
  }

  fs::path resolve(const std::string& written) const;
  void check_keys(const toml::table& table, std::string_view where,
                  const std::vector<std::string>& keys);
  template <typename T>
  auto get(const toml::table& table, std::string_view where, std::string_view key,
           bool required = false) -> decltype(table.get(key)->as<T>());
  std::vector<const toml::table*> tables_in(const toml::table& root, std::string_view key);
  /// A positive integer; `hint` says what 1 means, for the error below 1.
  std::optional<int> get_count(const toml::table& table, std::string_view where,
                               std::string_view key, std::string_view hint);
  /// A duration written in seconds, from `least` to `most` (30 days unless said): every time
  /// key is bounded here, so nothing later overflows a clock or spins on a huge interval.
  std::optional<Milliseconds> get_seconds(const toml::table& table, std::string_view where,
                                          std::string_view key, double least = 0,
                                          double most = k_max_seconds);
  std::optional<fs::path> existing_path(const toml::value<std::string>& node, std::string_view what,
                                        PathKind kind);

  void read_chain(const toml::table& root);
  void read_engine(const toml::table& root);
  void read_defaults(const toml::table& root);
  void read_cache(const toml::table& root);
  void read_disk(const toml::table& root);
  void read_resources(const toml::table& root);
  void read_publish(const toml::table& root);
  void read_history(const toml::table& root);
  void read_trace(const toml::table& root);
  void read_records(const toml::table& root);
  void read_gates(const toml::table& root);
  void read_smoke(const toml::table& root);
  /// An array of strings; `what` says what one entry is, for the error on a non-string.
  std::vector<std::string> get_strings(const toml::table& table, std::string_view where,
                                       std::string_view key, std::string_view what);
  /// `at` moved to the first byte of its line that is not UTF-8.
  SourcePos first_invalid_byte(SourcePos at) const;
  /// Where byte `offset` of a pattern written as `node` is in the chain file.
  SourcePos pattern_pos(const toml::value<std::string>& node, size_t offset) const;
  /// A count of 0 or more.
  std::optional<int> get_floor(const toml::table& table, std::string_view where,
                               std::string_view key);
  /// A size in GB, 0 or more (`positive`: more than 0).
  std::optional<double> get_gb(const toml::table& table, std::string_view where,
                               std::string_view key, bool positive = false);
  std::vector<CacheSpec> read_cache_specs(const toml::table& table, std::string_view key);
  std::optional<CacheSpec> read_cache_spec(const toml::node& node, std::string_view key);
  void read_transient(const toml::table& table);
  void read_stage(const toml::table& table);
  /// The combinations of a [[stage]] table's matrix: one, with no variable, when it has none;
  /// none when the matrix is wrong.
  std::vector<MatrixBinding> matrix_bindings(const toml::table& stage);
  /// A stage's image tag becomes an engine's argv word and its store's name: a reference with
  /// no digest (`--all` would be read as a flag).
  void check_tag(const std::string& tag, SourcePos at);
  /// `[gates] residue_allow` or `arch_allow`: files a gate reports but lets ship, each with
  /// the chain's reason.
  void read_allow_list(const toml::table& gates, std::string_view key,
                       std::vector<ResidueAllow>& out);
  /// A [[stage]] array of names, each with where it is; the array, or nullptr when absent.
  const toml::array* read_names(const toml::table& table, std::string_view key,
                                std::string_view what, std::string_view hint,
                                std::vector<std::string>& names, std::vector<SourcePos>& where,
                                std::string_view in = "[[stage]]");
  void read_build_args(const toml::table& table, KeyValues& args, std::vector<SourcePos>* where);
  void read_lane(const toml::table& table);
  void read_worker(const toml::table& table);
  /// Pools name [[worker]] tables, only with BuildKit; a lane's pool can build its platform; a
  /// stage's worker_labels are some worker's of each pool it is placed from.
  void check_workers();
  /// Each stage's `workers`: its pool less the workers that cannot build it.
  void place_in_pools();
  /// Each stage's `lanes` names lanes, and a stage runs in every lane of the stages it needs.
  void check_lanes();
  /// An index has one entry per platform: every lane the final stage runs in names its own.
  void check_publish();
  /// A chain that publishes has, in every lane of its final stage, a smoke stage that needs it
  /// (unless [publish] require_smoke = false).
  void check_publish_guarded();
  /// One copy of each stage per lane it runs in, `<lane>/<stage>`, its needs in its lane.
  void expand_lanes();
  void read_secret(const toml::table& table, Stage& stage);
  void read_versions();
  void check_needs();
  void check_cycles();
  void visit(size_t index, std::vector<VisitState>& state, std::vector<size_t>& path);
  void load_dockerfiles();
  /// Each stage needs the chain stages its Dockerfile names, besides those written.
  void infer_needs();
  /// A bare Dockerfile reference one typo away from a chain stage is an error.
  void report_near_miss(std::string_view ref, std::string_view written, SourcePos at,
                        const std::vector<std::string>& names);
  void check_cache_tiers();
  void check_gates();

  fs::path m_file;
  std::string m_name; // the chain file as the user named it, for diagnostics
  LoadOptions m_options;
  Chain m_chain;
  std::optional<SourcePos> m_engine_pos;   // where the chain names its engine
  std::optional<SourcePos> m_registry_pos; // where it names a registry
  bool m_chain_name_valid = false;         // a default tag is made of it: judged once it is
  std::optional<bool> m_cache_local;       // [cache] local as written
  Diagnostics m_diagnostics;
  std::vector<StageSource> m_sources;          // one per stage
  std::map<std::string, size_t> m_stage_index; // first stage of each name
  fs::path m_versions_shown;                   // the versions file as diagnostics name it
  std::string m_text;                          // the chain file as read
};

template <typename T>
auto Loader::get(const toml::table& table, std::string_view where, std::string_view key,
                 bool required) -> decltype(table.get(key)->as<T>()) {
  const toml::node* node = table.get(key);
  if (!node) {
    if (required) {
      error(pos(table), fmt::format("missing required key '{}' {}", key, where),
            fmt::format("add {} = ... to this table", key));
    }
    return nullptr;
  }
  auto* typed = node->as<T>();
  if (!typed) {
    error(pos(*node), fmt::format("'{}' {} must be {}, not {}", key, where, expected_type<T>(),
                                  type_name(*node)));
  }
  return typed;
}

} // namespace kiln::chain_loading
