#include "chain/chain_loader.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "chain/plan.h"
#include "chain/versions.h"
#include "dockerfile/declared_args.h"
#include "dockerfile/external_refs.h"
#include "dockerfile/source.h"
#include "util/fs.h"
#include "util/image_ref.h"
#include "util/strings.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> k_engines = {"buildah", "buildkit"};
const std::vector<std::string> k_isolations = {"chroot", "oci", "rootless"};

const std::vector<std::string> k_top_keys = {"chain", "engine",    "defaults", "transient", "cache",
                                             "disk",  "resources", "gates",    "smoke",     "stage",
                                             "lane",  "publish",   "history",  "trace"};
const std::vector<std::string> k_lane_keys = {"name", "platform", "host",      "ca",
                                              "cert", "key",      "build_args"};
const std::vector<std::string> k_gates_keys = {"host_env_names",     "cache_mount_targets",
                                               "cache_endpoint_arg", "per_file_only_dirs",
                                               "residue_allow",      "arch_allow"};
const std::vector<std::string> k_residue_allow_keys = {"path", "reason"};
const std::vector<std::string> k_smoke_keys = {"min_passed", "max_skipped"};
const std::vector<std::string> k_publish_keys = {"index", "tls_verify", "require_smoke", "sign",
                                                 "verify"};
const std::vector<std::string> k_history_keys = {"regression_percent", "regression_seconds"};
const std::vector<std::string> k_trace_keys = {"otlp_endpoint"};
const std::vector<std::string> k_disk_keys = {
    "path",       "need_gb",          "guard_gb",        "floor_gb",
    "keep_slugs", "buildkit_keep_gb", "watch_interval_s"};
const std::vector<std::string> k_resources_keys = {"sample_interval_s", "host_reserve_gb",
                                                   "memory_limit_gb",   "mem_per_job_gb",
                                                   "max_parallel",      "max_lanes"};
const std::vector<std::string> k_chain_keys = {"name",    "engine",   "versions",
                                               "records", "registry", "final"};
const std::vector<std::string> k_engine_keys = {"buildah", "buildkit"};
const std::vector<std::string> k_buildkit_keys = {"host"};
const std::vector<std::string> k_cache_keys = {"local",
                                               "root",
                                               "import_flakes_before_drop",
                                               "salvage",
                                               "salvage_min_free_gb",
                                               "salvage_target_timeout_s"};
const std::vector<std::string> k_buildah_keys = {"isolation"};
const std::vector<std::string> k_defaults_keys = {"attempts", "cooldown_s", "cooldown_max_s",
                                                  "stall_timeout_s", "timeout_s"};
const std::vector<std::string> k_transient_keys = {"name", "patterns", "retry_despite_identical"};
const std::vector<std::string> k_stage_keys = {
    "name",          "dockerfile",     "context",    "target",         "tag",
    "needs",         "build_args",     "secrets",    "attempts",       "min_compile_requests",
    "lane",          "cache_local",    "cache_from", "cache_to",       "snapshot_cache_to",
    "disk_floor_gb", "mem_per_job_gb", "kind",       "gate_image_env", "stall_timeout_s",
    "timeout_s",     "weight",         "lanes",      "min_passed",     "max_skipped",
    "artifacts",     "max_layers"};
const char* const k_attempts_hint = "1 means a single attempt and no retry";
const std::vector<std::string> k_secret_keys = {"id", "env", "file"};

// The longest duration any key takes: longer is a typo (minutes for seconds, an extra digit).
constexpr double k_max_seconds = 30.0 * 24 * 3600;

// The largest count any key takes (attempts, floors): more is a typo, and sums stay far from
// overflowing.
constexpr int64_t k_max_count = 1000000;

// The largest size any key takes, in GB: a petabyte is a typo for a disk a chain builds on.
constexpr double k_max_gb = 1e6;

const std::string_view k_identifier_rule = "use letters, digits and '_', not starting with a digit";

bool is_lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// Chain and stage names end up in image tags and build-context names, which are lower case.
bool is_lower_name(std::string_view name, bool digit_first) {
  if (name.empty() ||
      !(digit_first ? is_lower_alnum(name[0]) : (name[0] >= 'a' && name[0] <= 'z'))) {
    return false;
  }
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return is_lower_alnum(c) || c == '_' || c == '.' || c == '-'; });
}

/// A Dockerfile stage name as `--target` takes it: BuildKit's `^[a-z][a-z0-9-_.]*$`, any case.
bool is_stage_target(std::string_view target) {
  return !target.empty() && std::isalnum(static_cast<unsigned char>(target[0])) &&
         std::all_of(target.begin(), target.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
         });
}

/// `os/arch[/variant]`, each part letters, digits, '_', '.' or '-' and not starting with '-'.
bool is_platform_shape(std::string_view platform) {
  std::vector<std::string> parts = split(platform, '/');
  return (parts.size() == 2 || parts.size() == 3) &&
         std::all_of(parts.begin(), parts.end(), [](const std::string& part) {
           return !part.empty() && part[0] != '-' &&
                  std::all_of(part.begin(), part.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
                           c == '-';
                  });
         });
}

/// What is wrong with a daemon address an engine gets as an argv word, "" when nothing.
std::string host_address_problem(std::string_view host) {
  if (host.find("://") == std::string_view::npos) {
    return "has no scheme";
  }
  if (host.front() == '-') {
    return "starts with '-', which buildctl would read as an option";
  }
  if (std::any_of(host.begin(), host.end(),
                  [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; })) {
    return "holds white space";
  }
  return {};
}

bool is_secret_id(std::string_view id) {
  return !id.empty() && std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

std::string_view type_name(const toml::node& node) {
  switch (node.type()) {
  case toml::node_type::string:
    return "a string";
  case toml::node_type::integer:
    return "an integer";
  case toml::node_type::floating_point:
    return "a float";
  case toml::node_type::boolean:
    return "a boolean";
  case toml::node_type::table:
    return "a table";
  case toml::node_type::array:
    return "an array";
  case toml::node_type::date:
    return "a date";
  case toml::node_type::time:
    return "a time";
  case toml::node_type::date_time:
    return "a date-time";
  default:
    return "nothing";
  }
}

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

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates,
                         std::string_view list_intro) {
  std::string match = closest_match(word, candidates);
  if (!match.empty()) {
    return fmt::format("did you mean '{}'?", match);
  }
  return fmt::format("{}: {}", list_intro, join(candidates, ", "));
}

// toml++ and std::regex describe errors as capitalised sentences; our messages are fragments.
std::string as_fragment(std::string_view text) {
  std::string out(trim(text));
  while (!out.empty() && out.back() == '.') {
    out.pop_back();
  }
  if (!out.empty()) {
    out[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(out[0])));
  }
  return out;
}

enum class PathKind { file, directory };

enum class VisitState { unvisited, on_path, done };

struct StageSource {
  int name_line = 0;
  std::string dockerfile; // as written
  SourcePos dockerfile_pos;
  bool dockerfile_found = false;
  int needs_line = 0; // of the needs key, 0 when the stage has none
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
                                std::vector<std::string>& names, std::vector<SourcePos>& where);
  void read_build_args(const toml::table& table, KeyValues& args, std::vector<SourcePos>* where);
  void read_lane(const toml::table& table);
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
  void check_dockerfile_needs();
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

SourcePos Loader::first_invalid_byte(SourcePos at) const {
  if (size_t bad = first_invalid_utf8(line_at(m_text, at.line)); bad != std::string_view::npos) {
    at.column = static_cast<int>(bad + 1);
  }
  return at;
}

SourcePos Loader::pattern_pos(const toml::value<std::string>& node, size_t offset) const {
  SourcePos at = pos(node);
  // The caret goes under the offending part when the pattern is written as it reads (a literal
  // '...' string, or a "..." one without escapes); otherwise under the string's start.
  std::string_view rest = line_at(m_text, at.line);
  size_t quote = static_cast<size_t>(std::max(at.column - 1, 0));
  if (quote < rest.size() && (rest[quote] == '\'' || rest[quote] == '"') &&
      rest.substr(quote + 1).starts_with(node.get())) {
    at.column += static_cast<int>(1 + offset);
  }
  return at;
}

void Loader::check_tag(const std::string& tag, SourcePos at) {
  auto parsed = parse_image_ref(tag);
  if (!parsed || !parsed->digest.empty()) {
    error(at,
          fmt::format("image tag '{}' is not a valid image reference: {}", tag,
                      parsed ? "it names a digest, which a build cannot tag" : parsed.error()),
          "write [host[:port]/]repository[:tag], e.g. \"localhost/app-final:1.0\"");
  }
}

fs::path Loader::resolve(const std::string& written) const {
  fs::path path = (m_chain.dir / written).lexically_normal();
  // "dir/." normalises to "dir/"; keep paths comparable and printable without the slash.
  return path.has_filename() ? path : path.parent_path();
}

void Loader::check_keys(const toml::table& table, std::string_view where,
                        const std::vector<std::string>& keys) {
  for (auto&& [key, value] : table) {
    if (std::find(keys.begin(), keys.end(), key.str()) == keys.end()) {
      error(pos(key.source().begin), fmt::format("unknown key '{}' {}", key.str(), where),
            did_you_mean(key.str(), keys, "valid keys"));
    }
  }
}

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

std::vector<const toml::table*> Loader::tables_in(const toml::table& root, std::string_view key) {
  std::vector<const toml::table*> tables;
  const toml::node* node = root.get(key);
  if (!node) {
    return tables;
  }
  const toml::array* array = node->as_array();
  if (!array) {
    error(pos(*node), fmt::format("'{}' must be an array of tables, not {}", key, type_name(*node)),
          fmt::format("write each one as [[{}]], with double brackets", key));
    return tables;
  }
  for (const auto& element : *array) {
    if (const auto* table = element.as_table()) {
      tables.push_back(table);
    } else {
      error(pos(element), fmt::format("each '{}' must be a table, not {}", key, type_name(element)),
            fmt::format("write each one as [[{}]]", key));
    }
  }
  return tables;
}

std::optional<int> Loader::get_count(const toml::table& table, std::string_view where,
                                     std::string_view key, std::string_view hint) {
  const auto* node = get<int64_t>(table, where, key);
  if (!node) {
    return std::nullopt;
  }
  int64_t value = node->get();
  if (value < 1) {
    error(pos(*node), fmt::format("'{}' {} must be at least 1, not {}", key, where, value),
          std::string(hint));
    return std::nullopt;
  }
  if (value > k_max_count) {
    error(pos(*node),
          fmt::format("'{}' {} is {}, more than the {} allowed", key, where, value, k_max_count));
    return std::nullopt;
  }
  return static_cast<int>(value);
}

std::optional<Milliseconds> Loader::get_seconds(const toml::table& table, std::string_view where,
                                                std::string_view key, double least, double most) {
  const toml::node* node = table.get(key);
  if (!node) {
    return std::nullopt;
  }
  if (!node->is_number()) {
    error(pos(*node),
          fmt::format("'{}' {} must be a number of seconds, not {}", key, where, type_name(*node)));
    return std::nullopt;
  }
  double value = node->is_integer() ? static_cast<double>(node->as_integer()->get())
                                    : node->as_floating_point()->get();
  if (!std::isfinite(value)) {
    error(pos(*node), fmt::format("'{}' {} must be a finite number, not {}", key, where, value));
    return std::nullopt;
  }
  if (value < least) {
    error(pos(*node), least == 0
                          ? fmt::format("'{}' {} must be 0 or more, not {}", key, where, value)
                          : fmt::format("'{}' {} must be at least {} second(s), not {}", key, where,
                                        least, value));
    return std::nullopt;
  }
  if (value > most) {
    error(pos(*node),
          fmt::format("'{}' {} is {} seconds, more than the {} allowed", key, where, value, most),
          most == k_max_seconds ? "a duration longer than 30 days is a mistake; write seconds"
                                : "write seconds");
    return std::nullopt;
  }
  return std::chrono::duration_cast<Milliseconds>(std::chrono::duration<double>(value));
}

std::optional<fs::path> Loader::existing_path(const toml::value<std::string>& node,
                                              std::string_view what, PathKind kind) {
  const std::string& written = node.get();
  fs::path path = resolve(written);
  std::error_code ignored;
  fs::file_status status = fs::status(path, ignored);
  if (!fs::exists(status)) {
    error(pos(node),
          fmt::format("{} '{}' does not exist (resolved to {})", what, written, path.string()),
          "fix the path; a relative path starts from the chain file's folder");
    return std::nullopt;
  }
  if (kind == PathKind::file && !fs::is_regular_file(status)) {
    error(
        pos(node),
        fmt::format("{} '{}' is not a regular file (resolved to {})", what, written, path.string()),
        "name a file, not a directory");
    return std::nullopt;
  }
  if (kind == PathKind::directory && !fs::is_directory(status)) {
    error(pos(node),
          fmt::format("{} '{}' is not a directory (resolved to {})", what, written, path.string()),
          "name the directory the build runs in");
    return std::nullopt;
  }
  return path;
}

void Loader::read_chain(const toml::table& root) {
  if (!root.contains("chain")) {
    error(pos(root), "missing required table [chain]", "add a [chain] table with a name");
  }
  const auto* table = get<toml::table>(root, "at the top level", "chain");
  if (!table) {
    return;
  }
  const std::string_view where = "in [chain]";
  check_keys(*table, where, k_chain_keys);
  if (const auto* name = get<std::string>(*table, where, "name", true)) {
    m_chain.name = name->get();
    m_chain_name_valid = is_lower_name(m_chain.name, true);
    if (!m_chain_name_valid) {
      error(pos(*name), fmt::format("chain name '{}' is not valid", m_chain.name),
            "use lower-case letters, digits, '_', '.' and '-', starting with a letter or digit");
    }
  }
  if (const auto* engine = get<std::string>(*table, where, "engine")) {
    if (std::find(k_engines.begin(), k_engines.end(), engine->get()) == k_engines.end()) {
      error(pos(*engine), fmt::format("unsupported engine '{}'", engine->get()),
            fmt::format("supported engines: {}", join(k_engines, ", ")));
    } else {
      m_chain.engine = engine->get();
      m_engine_pos = pos(*engine);
    }
  }
  if (const auto* registry = get<std::string>(*table, where, "registry")) {
    m_chain.registry = registry->get();
    m_registry_pos = pos(*registry);
    while (!m_chain.registry.empty() && m_chain.registry.back() == '/') {
      m_chain.registry.pop_back();
    }
    // A prefix of repositories: whatever follows it must make a reference without a tag.
    auto parsed = parse_image_ref(m_chain.registry + "/kiln");
    if (m_chain.registry.empty() || !parsed || !parsed->tag.empty() || !parsed->digest.empty()) {
      error(pos(*registry),
            fmt::format("registry '{}' is not a registry reference{}", registry->get(),
                        parsed || m_chain.registry.empty() ? "" : ": " + parsed.error()),
            "write host[:port]/path, e.g. \"registry.example:5000/team\", without a scheme");
    }
  }
  if (const auto* versions = get<std::string>(*table, where, "versions")) {
    if (auto path = existing_path(*versions, "versions file", PathKind::file)) {
      m_chain.versions_file = *path;
      m_versions_shown = (m_file.parent_path() / versions->get()).lexically_normal();
    }
  }
  const auto* records = get<std::string>(*table, where, "records");
  m_chain.records = resolve(records ? records->get() : "records");
  if (const auto* final_stage = get<std::string>(*table, where, "final")) {
    m_chain.gates.final_stage = final_stage->get();
    m_chain.gates.final_pos = pos(*final_stage);
  }
}

void Loader::read_engine(const toml::table& root) {
  const auto* engine = get<toml::table>(root, "at the top level", "engine");
  if (!engine) {
    return;
  }
  check_keys(*engine, "in [engine]", k_engine_keys);
  if (const auto* buildkit = get<toml::table>(*engine, "in [engine]", "buildkit")) {
    check_keys(*buildkit, "in [engine.buildkit]", k_buildkit_keys);
    if (const auto* host = get<std::string>(*buildkit, "in [engine.buildkit]", "host")) {
      m_chain.buildkit_host = host->get();
      if (std::string wrong = host_address_problem(m_chain.buildkit_host); !wrong.empty()) {
        error(pos(*host), fmt::format("buildkit host '{}' {}", m_chain.buildkit_host, wrong),
              "write unix:///path/to/buildkitd.sock, tcp://host:port, or another address "
              "buildctl --addr accepts");
      }
    }
  }
  const auto* buildah = get<toml::table>(*engine, "in [engine]", "buildah");
  if (!buildah) {
    return;
  }
  const std::string_view where = "in [engine.buildah]";
  check_keys(*buildah, where, k_buildah_keys);
  if (const auto* isolation = get<std::string>(*buildah, where, "isolation")) {
    const std::string& value = isolation->get();
    if (std::find(k_isolations.begin(), k_isolations.end(), value) == k_isolations.end()) {
      error(pos(*isolation), fmt::format("unknown isolation '{}'", value),
            did_you_mean(value, k_isolations, "use one of"));
    } else {
      m_chain.buildah_isolation = value;
    }
  }
}

void Loader::read_cache(const toml::table& root) {
  m_chain.cache.root = m_chain.records / "cache";
  const auto* cache = get<toml::table>(root, "at the top level", "cache");
  if (!cache) {
    return;
  }
  const std::string_view where = "in [cache]";
  check_keys(*cache, where, k_cache_keys);
  if (const auto* local = get<bool>(*cache, where, "local")) {
    m_cache_local = local->get();
    m_chain.cache.local = local->get();
  }
  if (const auto* root_dir = get<std::string>(*cache, where, "root")) {
    m_chain.cache.root = resolve(root_dir->get());
  }
  if (auto flakes = get_count(*cache, where, "import_flakes_before_drop",
                              "1 drops the registry tiers after the first import flake")) {
    m_chain.cache.import_flakes_before_drop = *flakes;
  }
  if (const auto* salvage = get<bool>(*cache, where, "salvage")) {
    m_chain.cache.salvage = salvage->get();
  }
  if (const toml::node* node = cache->get("salvage_min_free_gb")) {
    if (!node->is_number() || node->value<double>().value_or(-1) < 0) {
      error(pos(*node), "'salvage_min_free_gb' in [cache] must be a number of GB, 0 or more",
            "0 salvages whatever the free space");
    } else {
      m_chain.cache.salvage_min_free_gb = node->value<double>().value_or(0);
    }
  }
  if (auto timeout = get_seconds(*cache, where, "salvage_target_timeout_s")) {
    m_chain.cache.salvage_target_timeout = *timeout;
  }
}

std::optional<double> Loader::get_gb(const toml::table& table, std::string_view where,
                                     std::string_view key, bool positive) {
  const toml::node* node = table.get(key);
  if (!node) {
    return std::nullopt;
  }
  double value = node->value<double>().value_or(-1);
  if (!node->is_number() || !std::isfinite(value) || value < 0 || (positive && value == 0)) {
    error(pos(*node),
          fmt::format("'{}' {} must be a number of GB, {}", key, where,
                      positive ? "more than 0" : "0 or more"),
          positive ? "write it like 4 or 2.5" : "write it like 40 or 12.5; 0 turns it off");
    return std::nullopt;
  }
  if (value > k_max_gb) {
    error(pos(*node),
          fmt::format("'{}' {} is {} GB, more than the {} allowed", key, where, value, k_max_gb),
          "sizes are in GB: write 40 for 40 GB");
    return std::nullopt;
  }
  return value;
}

void Loader::read_disk(const toml::table& root) {
  DiskSettings& disk = m_chain.disk;
  disk.path = m_chain.records;
  const auto* table = get<toml::table>(root, "at the top level", "disk");
  if (!table) {
    return;
  }
  const std::string_view where = "in [disk]";
  check_keys(*table, where, k_disk_keys);
  if (const auto* path = get<std::string>(*table, where, "path")) {
    disk.path = resolve(path->get());
  }
  disk.need_gb = get_gb(*table, where, "need_gb").value_or(disk.need_gb);
  disk.guard_gb = get_gb(*table, where, "guard_gb").value_or(disk.guard_gb);
  disk.floor_gb = get_gb(*table, where, "floor_gb").value_or(disk.floor_gb);
  disk.buildkit_keep_gb = get_gb(*table, where, "buildkit_keep_gb").value_or(disk.buildkit_keep_gb);
  if (const auto* keep = get<int64_t>(*table, where, "keep_slugs")) {
    if (keep->get() < 0 || keep->get() > 1000000) {
      error(pos(*keep), "'keep_slugs' in [disk] must be 0 or more",
            "the newest this many cache exports are never trimmed");
    } else {
      disk.keep_slugs = static_cast<int>(keep->get());
    }
  }
  disk.watch_interval =
      get_seconds(*table, where, "watch_interval_s", 1, 24 * 3600).value_or(disk.watch_interval);
}

void Loader::read_resources(const toml::table& root) {
  const auto* table = get<toml::table>(root, "at the top level", "resources");
  if (!table) {
    return;
  }
  ResourceSettings& resources = m_chain.resources;
  const std::string_view where = "in [resources]";
  check_keys(*table, where, k_resources_keys);
  resources.sample_interval = get_seconds(*table, where, "sample_interval_s", 0, 24 * 3600)
                                  .value_or(resources.sample_interval);
  if (auto reserve = get_gb(*table, where, "host_reserve_gb")) {
    resources.host_reserve_gb = reserve;
  }
  if (auto limit = get_gb(*table, where, "memory_limit_gb", true)) {
    resources.memory_limit_gb = limit;
  }
  resources.mem_per_job_gb =
      get_gb(*table, where, "mem_per_job_gb", true).value_or(resources.mem_per_job_gb);
  m_chain.max_lanes = get_count(*table, where, "max_lanes",
                                "1 builds one lane at a time; leave it out to build every lane "
                                "at once");
  resources.max_parallel = get_count(*table, where, "max_parallel",
                                     "1 builds one stage at a time; leave it out to "
                                     "build as many at once as the job budget allows");
}

std::vector<std::string> Loader::get_strings(const toml::table& table, std::string_view where,
                                             std::string_view key, std::string_view what) {
  std::vector<std::string> out;
  const auto* array = get<toml::array>(table, where, key);
  if (!array) {
    return out;
  }
  for (const auto& element : *array) {
    if (const auto* text = element.as_string(); text && !text->get().empty()) {
      out.push_back(text->get());
    } else {
      error(pos(element),
            fmt::format("each of '{}' {} must be {}, not {}", key, where, what,
                        text ? "an empty string" : type_name(element)),
            "write it in quotes");
    }
  }
  return out;
}

std::optional<int> Loader::get_floor(const toml::table& table, std::string_view where,
                                     std::string_view key) {
  const auto* node = get<int64_t>(table, where, key);
  if (!node) {
    return std::nullopt;
  }
  if (node->get() < 0 || node->get() > std::numeric_limits<int>::max()) {
    error(pos(*node),
          fmt::format("'{}' {} must be a count of 0 or more, not {}", key, where, node->get()));
    return std::nullopt;
  }
  return static_cast<int>(node->get());
}

void Loader::read_gates(const toml::table& root) {
  const auto* table = get<toml::table>(root, "at the top level", "gates");
  if (!table) {
    return;
  }
  GateSettings& gates = m_chain.gates;
  const std::string_view where = "in [gates]";
  check_keys(*table, where, k_gates_keys);
  gates.host_env_names = get_strings(*table, where, "host_env_names", "a NAME or PREFIX*");
  for (const auto& name : gates.host_env_names) {
    std::string_view stem(name);
    if (!stem.empty() && stem.back() == '*') {
      stem.remove_suffix(1);
    }
    if (!is_identifier(stem)) {
      error(pos(*table->get("host_env_names")),
            fmt::format("host_env_names entry '{}' is not a variable name", name),
            "write NAME or PREFIX* with letters, digits and '_'");
    }
  }
  if (table->contains("cache_mount_targets")) {
    gates.cache_mount_targets =
        get_strings(*table, where, "cache_mount_targets", "an absolute path inside the build");
  }
  if (const auto* arg = get<std::string>(*table, where, "cache_endpoint_arg")) {
    gates.cache_endpoint_arg = arg->get();
    if (!is_identifier(gates.cache_endpoint_arg)) {
      error(pos(*arg),
            fmt::format("cache_endpoint_arg '{}' is not an ARG name", gates.cache_endpoint_arg),
            std::string(k_identifier_rule));
    }
  }
  gates.per_file_only_dirs =
      get_strings(*table, where, "per_file_only_dirs", "a directory of the build context");
  read_allow_list(*table, "residue_allow", m_chain.gates.residue_allow);
  read_allow_list(*table, "arch_allow", m_chain.gates.arch_allow);
}

void Loader::read_allow_list(const toml::table& gates, std::string_view key,
                             std::vector<ResidueAllow>& out) {
  const auto* array = get<toml::array>(gates, "in [gates]", key);
  if (!array) {
    return;
  }
  const std::string hint =
      fmt::format("write {{ path = \"{}\", reason = \"why it may ship\" }}",
                  key == "arch_allow" ? "/usr/lib/gcc-cross/*" : "/usr/lib/python3*/test/*.pem");
  const std::string where = fmt::format("in a {} entry", key);
  for (const auto& element : *array) {
    const auto* entry = element.as_table();
    if (!entry) {
      error(pos(element),
            fmt::format("each of '{}' must be a table, not {}", key, type_name(element)), hint);
      continue;
    }
    check_keys(*entry, where, k_residue_allow_keys);
    const auto* path = get<std::string>(*entry, where, "path");
    const auto* reason = get<std::string>(*entry, where, "reason");
    if (!path || !path->get().starts_with("/")) {
      error(pos(path ? static_cast<const toml::node&>(*path) : element),
            fmt::format("a {} entry needs a 'path': an absolute path in the image, `*` for any "
                        "characters",
                        key),
            hint);
      continue;
    }
    if (!reason || trim(reason->get()).empty()) {
      error(pos(element), fmt::format("the {} entry for '{}' gives no reason", key, path->get()),
            "say why this file may ship in a published image: an allowance without one is a "
            "finding nobody decided on");
      continue;
    }
    out.push_back({path->get(), reason->get()});
  }
}

void Loader::read_smoke(const toml::table& root) {
  const auto* table = get<toml::table>(root, "at the top level", "smoke");
  if (!table) {
    return;
  }
  const std::string_view where = "in [smoke]";
  check_keys(*table, where, k_smoke_keys);
  GateSettings& gates = m_chain.gates;
  gates.min_passed = get_floor(*table, where, "min_passed").value_or(gates.min_passed);
  gates.max_skipped = get_floor(*table, where, "max_skipped").value_or(gates.max_skipped);
}

std::optional<CacheSpec> Loader::read_cache_spec(const toml::node& node, std::string_view key) {
  const auto* text = node.as_string();
  if (!text) {
    error(pos(node), fmt::format("each of '{}' must be a string, not {}", key, type_name(node)),
          "write BuildKit's form, e.g. \"type=registry,ref=registry.example/app:cache\"");
    return std::nullopt;
  }
  CacheSpec spec{text->get(), pos(node)};
  std::string type = spec.attr("type");
  bool import = key == "cache_from";
  if (type == "local") {
    error(spec.pos, fmt::format("'{}' names a local cache; kiln manages that tier itself", key),
          "set local = true in [cache] (or cache_local = true on the stage) instead");
    return std::nullopt;
  }
  if (type != "registry" && (import || type != "inline")) {
    error(spec.pos, fmt::format("'{}' entry '{}' has type '{}'", key, spec.text, type),
          import ? "a stage imports type=registry caches; the local tier is [cache] local"
                 : "a stage exports type=registry or type=inline caches");
    return std::nullopt;
  }
  if (type == "registry" && spec.attr("ref").empty()) {
    error(spec.pos, fmt::format("'{}' entry '{}' has no ref", key, spec.text),
          "add ref=<registry>/<repository>:<tag>");
    return std::nullopt;
  }
  return spec;
}

std::vector<CacheSpec> Loader::read_cache_specs(const toml::table& table, std::string_view key) {
  std::vector<CacheSpec> specs;
  if (const auto* array = get<toml::array>(table, "in [[stage]]", key)) {
    for (const auto& element : *array) {
      if (auto spec = read_cache_spec(element, key)) {
        specs.push_back(std::move(*spec));
      }
    }
  }
  return specs;
}

void Loader::read_defaults(const toml::table& root) {
  const auto* defaults = get<toml::table>(root, "at the top level", "defaults");
  if (!defaults) {
    return;
  }
  const std::string_view where = "in [defaults]";
  check_keys(*defaults, where, k_defaults_keys);
  RetryPolicy& policy = m_chain.defaults;
  if (auto attempts = get_count(*defaults, where, "attempts", k_attempts_hint)) {
    policy.attempts = *attempts;
  }
  auto cooldown = get_seconds(*defaults, where, "cooldown_s", 0, 24 * 3600);
  auto cooldown_max = get_seconds(*defaults, where, "cooldown_max_s", 0, 24 * 3600);
  policy.stall_timeout =
      get_seconds(*defaults, where, "stall_timeout_s").value_or(policy.stall_timeout);
  policy.timeout = get_seconds(*defaults, where, "timeout_s").value_or(policy.timeout);
  policy.cooldown = cooldown.value_or(policy.cooldown);
  policy.cooldown_max = cooldown_max.value_or(policy.cooldown_max);
  if (policy.cooldown_max >= policy.cooldown) {
    return;
  }
  double cooldown_s = std::chrono::duration<double>(policy.cooldown).count();
  double cooldown_max_s = std::chrono::duration<double>(policy.cooldown_max).count();
  if (cooldown_max) {
    error(pos(*defaults->get("cooldown_max_s")),
          fmt::format("'cooldown_max_s' in [defaults] ({}) is below 'cooldown_s' ({})",
                      cooldown_max_s, cooldown_s),
          fmt::format("raise cooldown_max_s to at least {}", cooldown_s));
  } else {
    error(pos(*defaults->get("cooldown_s")),
          fmt::format("'cooldown_s' in [defaults] ({}) is above the default 'cooldown_max_s' ({})",
                      cooldown_s, cooldown_max_s),
          fmt::format("set cooldown_max_s to at least {}", cooldown_s));
  }
}

void Loader::read_transient(const toml::table& table) {
  const std::string_view where = "in [[transient]]";
  check_keys(table, where, k_transient_keys);
  TransientClass transient;
  if (const auto* name = get<std::string>(table, where, "name", true)) {
    transient.name = name->get();
  }
  if (const auto* patterns = get<toml::array>(table, where, "patterns", true)) {
    if (patterns->empty()) {
      error(pos(*patterns), "'patterns' in [[transient]] is empty",
            "add at least one regular expression");
    }
    for (const auto& element : *patterns) {
      const auto* pattern = element.as_string();
      if (!pattern) {
        error(pos(element), fmt::format("each of 'patterns' in [[transient]] must be a string, "
                                        "not {}",
                                        type_name(element)));
        continue;
      }
      auto compiled = Pattern::compile(pattern->get());
      if (compiled) {
        transient.patterns.push_back(std::move(*compiled));
        continue;
      }
      std::string part = compiled.error().offset > 0 || pattern->get().size() <= 60
                             ? pattern->get().substr(compiled.error().offset, 60)
                             : pattern->get().substr(0, 60);
      error(pattern_pos(*pattern, compiled.error().offset),
            fmt::format("invalid regular expression: {} at '{}'",
                        as_fragment(compiled.error().message), printable(part)),
            "patterns are RE2 regular expressions (no lookaround or backreferences); escape a "
            "literal character with a backslash, in a '...' string so TOML keeps it");
    }
  }
  if (const auto* retry = get<bool>(table, where, "retry_despite_identical")) {
    transient.retry_despite_identical = retry->get();
  }
  m_chain.transient.push_back(std::move(transient));
}

const toml::array* Loader::read_names(const toml::table& table, std::string_view key,
                                      std::string_view what, std::string_view hint,
                                      std::vector<std::string>& names,
                                      std::vector<SourcePos>& where) {
  const auto* array = get<toml::array>(table, "in [[stage]]", key);
  if (array == nullptr) {
    return nullptr;
  }
  for (const auto& element : *array) {
    if (const auto* name = element.as_string()) {
      names.push_back(name->get());
      where.push_back(pos(element));
    } else {
      error(pos(element),
            fmt::format("each of '{}' in [[stage]] must be {}, not {}", key, what,
                        type_name(element)),
            std::string(hint));
    }
  }
  return array;
}

void Loader::read_stage(const toml::table& table) {
  const std::string_view where = "in [[stage]]";
  check_keys(table, where, k_stage_keys);
  Stage stage;
  StageSource source;
  stage.pos = pos(table);
  if (const auto* name = get<std::string>(table, where, "name", true)) {
    stage.name = name->get();
    stage.context_name = stage.name;
    source.name_line = static_cast<int>(name->source().begin.line);
    if (!is_lower_name(stage.name, false)) {
      error(pos(*name), fmt::format("stage name '{}' is not valid", stage.name),
            "use lower-case letters, digits, '_', '.' and '-', starting with a letter: the name "
            "becomes a build context in FROM <name>");
    }
    if (auto first = m_stage_index.find(stage.name); first != m_stage_index.end()) {
      error(pos(*name), fmt::format("duplicate stage name '{}'", stage.name),
            fmt::format("the first stage named '{}' is on line {}; rename one of them", stage.name,
                        m_sources[first->second].name_line));
    } else {
      m_stage_index.emplace(stage.name, m_chain.stages.size());
    }
  }
  if (const auto* dockerfile = get<std::string>(table, where, "dockerfile", true)) {
    source.dockerfile = dockerfile->get();
    source.dockerfile_pos = pos(*dockerfile);
    if (auto path = existing_path(*dockerfile, "dockerfile", PathKind::file)) {
      stage.dockerfile = *path;
      source.dockerfile_found = true;
    }
  }
  stage.context = m_chain.dir;
  if (const auto* context = get<std::string>(table, where, "context")) {
    stage.context = existing_path(*context, "context", PathKind::directory).value_or(fs::path());
  }
  if (const auto* target = get<std::string>(table, where, "target")) {
    stage.target = target->get();
    if (!is_stage_target(stage.target)) {
      error(pos(*target), fmt::format("target '{}' is not a Dockerfile stage name", stage.target),
            "write the name of a FROM ... AS <name> of the Dockerfile: letters, digits, '_', "
            "'.' and '-', starting with a letter or digit");
    }
  }
  stage.tag = fmt::format("localhost/{}-{}:latest", m_chain.name, stage.name);
  if (const auto* tag = get<std::string>(table, where, "tag")) {
    stage.tag = tag->get();
    check_tag(stage.tag, pos(*tag));
  } else if (const auto* name = table.get("name");
             name != nullptr && m_chain_name_valid && is_lower_name(stage.name, false)) {
    check_tag(stage.tag, pos(*name));
  }
  if (const auto* needs =
          read_names(table, "needs", "a stage name", "write the stage name in quotes", stage.needs,
                     stage.needs_pos)) {
    source.needs_line = static_cast<int>(needs->source().begin.line);
  }
  if (const auto* build_args = get<toml::table>(table, where, "build_args")) {
    read_build_args(*build_args, stage.build_args, &stage.build_args_pos);
  }
  if (const auto* secrets = get<toml::array>(table, where, "secrets")) {
    for (const auto& element : *secrets) {
      if (const auto* secret = element.as_table()) {
        read_secret(*secret, stage);
      } else {
        error(pos(element),
              fmt::format("each of 'secrets' in [[stage]] must be a table, not {}",
                          type_name(element)),
              "write { id = \"...\", env = \"VAR\" } or { id = \"...\", file = \"path\" }");
      }
    }
  }
  stage.attempts =
      get_count(table, where, "attempts", k_attempts_hint).value_or(m_chain.defaults.attempts);
  stage.stall_timeout =
      get_seconds(table, where, "stall_timeout_s").value_or(m_chain.defaults.stall_timeout);
  stage.timeout = get_seconds(table, where, "timeout_s").value_or(m_chain.defaults.timeout);
  stage.min_compile_requests =
      get_count(table, where, "min_compile_requests",
                "leave it out for no floor; 1 already catches a step that compiled nothing "
                "through the cache")
          .value_or(0);
  read_names(table, "lanes", "a lane name",
             "write lanes = [\"amd64\", ...] with names of [[lane]] tables", stage.lanes,
             stage.lanes_pos);
  stage.weight = get_count(table, where, "weight",
                           "a stage's share of the job budget is its weight over the weights of "
                           "the stages building with it; 1 is an equal share")
                     .value_or(1);
  if (const auto* lane = get<std::string>(table, where, "lane")) {
    stage.lane = lane->get();
    if (!is_lower_name(stage.lane, true)) {
      error(pos(*lane), fmt::format("lane '{}' is not valid", stage.lane),
            "use lower-case letters, digits, '_', '.' and '-': it names a cache folder");
    }
  }
  stage.cache_local = m_chain.cache.local;
  if (const auto* local = get<bool>(table, where, "cache_local")) {
    stage.cache_local = local->get();
  }
  stage.cache_from = read_cache_specs(table, "cache_from");
  stage.cache_to = read_cache_specs(table, "cache_to");
  if (const toml::node* snapshot = table.get("snapshot_cache_to")) {
    if (auto spec = read_cache_spec(*snapshot, "snapshot_cache_to")) {
      if (spec->attr("type") != "registry" || spec->attr("mode") != "max") {
        error(spec->pos, "'snapshot_cache_to' must be a type=registry export with mode=max",
              "a snapshot exists to carry every intermediate vertex off the host; write "
              "\"type=registry,ref=...,mode=max\"");
      } else {
        stage.snapshot_to = std::move(spec);
      }
    }
  }
  stage.disk_floor_gb = get_gb(table, where, "disk_floor_gb");
  stage.mem_per_job_gb = get_gb(table, where, "mem_per_job_gb", true);
  if (const auto* kind = get<std::string>(table, where, "kind")) {
    if (kind->get() == "smoke") {
      stage.kind = StageKind::smoke;
    } else if (kind->get() != "build") {
      error(pos(*kind), fmt::format("stage kind '{}' is not known", kind->get()),
            "write kind = \"build\" (the default) or kind = \"smoke\"");
    }
  }
  if (const auto* gate = get<bool>(table, where, "gate_image_env")) {
    stage.gate_image_env = gate->get();
  }
  stage.min_passed = get_floor(table, where, "min_passed");
  stage.max_skipped = get_floor(table, where, "max_skipped");
  for (const char* key : {"min_passed", "max_skipped"}) {
    if (stage.kind != StageKind::smoke && table.contains(key)) {
      error(pos(*table.get(key)),
            fmt::format("'{}' is a smoke stage's coverage floor, and stage '{}' is a build stage",
                        key, stage.name),
            "add kind = \"smoke\" to the stage, or leave the floor out");
    }
  }
  stage.artifacts = get_strings(table, where, "artifacts", "an absolute path in the image");
  for (const auto& artifact : stage.artifacts) {
    if (!artifact.starts_with("/")) {
      error(
          pos(*table.get("artifacts")),
          fmt::format("artifact '{}' of stage '{}' is not an absolute path", artifact, stage.name),
          "write the path the file has in the built image, e.g. \"/opt/lib/libx.so\"");
    }
  }
  if (auto layers = get_floor(table, where, "max_layers")) {
    if (*layers == 0) {
      error(pos(*table.get("max_layers")), "'max_layers' must be 1 or more",
            "leave it out for no ceiling");
    }
    stage.max_layers = *layers;
  }
  m_chain.stages.push_back(std::move(stage));
  m_sources.push_back(std::move(source));
}

void Loader::read_build_args(const toml::table& table, KeyValues& args,
                             std::vector<SourcePos>* where) {
  // toml++ keeps keys sorted; the model keeps them in file order.
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (auto&& [key, value] : table) {
    entries.emplace_back(&key, &value);
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.first->source().begin < b.first->source().begin;
  });
  for (const auto& [key, value] : entries) {
    std::string name(key->str());
    SourcePos key_pos = pos(key->source().begin);
    if (!is_identifier(name)) {
      error(key_pos,
            fmt::format("build arg '{}' is not a valid ARG name and would never reach the build",
                        name),
            "rename it: an ARG name has letters, digits and '_', and does not start with a digit");
      continue;
    }
    const auto* text = value->as_string();
    if (!text) {
      std::string hint = "write the value in quotes";
      if (value->is_value()) {
        std::ostringstream shown;
        value->visit([&](const auto& v) { shown << v; });
        hint = fmt::format("quote it: {} = \"{}\"", name, shown.str());
      }
      error(pos(*value),
            fmt::format("build arg '{}' must be a string, not {}", name, type_name(*value)), hint);
      continue;
    }
    args.emplace_back(name, text->get());
    if (where != nullptr) {
      where->push_back(key_pos);
    }
  }
}

void Loader::read_secret(const toml::table& table, Stage& stage) {
  const std::string_view where = "in a secret of [[stage]]";
  check_keys(table, where, k_secret_keys);
  SecretRef secret;
  secret.pos = pos(table);
  if (const auto* id = get<std::string>(table, where, "id", true)) {
    secret.id = id->get();
    bool seen = std::any_of(stage.secrets.begin(), stage.secrets.end(),
                            [&](const SecretRef& other) { return other.id == secret.id; });
    if (!is_secret_id(secret.id)) {
      error(pos(*id), fmt::format("secret id '{}' is not valid", secret.id),
            "use letters, digits, '_', '.' and '-'");
    } else if (seen) {
      error(pos(*id), fmt::format("duplicate secret id '{}' in stage '{}'", secret.id, stage.name),
            "give each secret of a stage its own id");
    }
  }
  const toml::node* env = table.get("env");
  const toml::node* file = table.get("file");
  if (!env && !file) {
    error(pos(table), "a secret needs 'env' or 'file'",
          "add env = \"VAR\" to pass an environment variable, or file = \"path\" to pass a file");
  } else if (env && file) {
    error(pos(*file), "a secret takes 'env' or 'file', not both", "remove one of them");
  } else if (env) {
    if (const auto* name = get<std::string>(table, where, "env")) {
      secret.env = name->get();
      if (!is_identifier(secret.env)) {
        error(pos(*name), fmt::format("'{}' is not a valid environment variable name", secret.env),
              std::string(k_identifier_rule));
      }
    }
  } else if (const auto* path = get<std::string>(table, where, "file")) {
    secret.file = existing_path(*path, "secret file", PathKind::file).value_or(fs::path());
  }
  stage.secrets.push_back(std::move(secret));
}

void Loader::read_versions() {
  if (m_chain.versions_file.empty()) {
    return;
  }
  auto versions = load_versions(m_versions_shown);
  if (versions) {
    m_chain.versions = std::move(*versions);
  } else {
    m_diagnostics.insert(m_diagnostics.end(), versions.error().begin(), versions.error().end());
  }
}

void Loader::check_needs() {
  std::vector<std::string> names;
  for (const auto& stage : m_chain.stages) {
    names.push_back(stage.name);
  }
  for (const auto& stage : m_chain.stages) {
    for (size_t i = 0; i < stage.needs.size(); ++i) {
      if (!m_stage_index.count(stage.needs[i])) {
        error(stage.needs_pos[i], fmt::format("unknown stage '{}' in needs", stage.needs[i]),
              did_you_mean(stage.needs[i], names, "stages"));
      }
    }
  }
}

void Loader::check_cycles() {
  std::vector<VisitState> state(m_chain.stages.size(), VisitState::unvisited);
  std::vector<size_t> path;
  for (size_t i = 0; i < m_chain.stages.size(); ++i) {
    if (state[i] == VisitState::unvisited) {
      visit(i, state, path);
    }
  }
}

// Depth-first search over needs; an edge back onto the current path closes a cycle.
void Loader::visit(size_t index, std::vector<VisitState>& state, std::vector<size_t>& path) {
  state[index] = VisitState::on_path;
  path.push_back(index);
  const Stage& stage = m_chain.stages[index];
  for (size_t i = 0; i < stage.needs.size(); ++i) {
    auto need = m_stage_index.find(stage.needs[i]);
    if (need == m_stage_index.end()) {
      continue;
    }
    if (state[need->second] == VisitState::unvisited) {
      visit(need->second, state, path);
    } else if (state[need->second] == VisitState::on_path) {
      std::vector<std::string> cycle;
      for (auto it = std::find(path.begin(), path.end(), need->second); it != path.end(); ++it) {
        cycle.push_back(m_chain.stages[*it].name);
      }
      cycle.push_back(need->first);
      error(stage.needs_pos[i], fmt::format("dependency cycle: {}", join(cycle, " -> ")),
            "remove one of these needs: a stage cannot depend on itself, directly or through "
            "others");
    }
  }
  path.pop_back();
  state[index] = VisitState::done;
}

void Loader::load_dockerfiles() {
  // Each file is read and parsed once, however many stages build from it.
  std::map<fs::path, std::shared_ptr<const DockerfileSource>> loaded;
  for (size_t i = 0; i < m_chain.stages.size(); ++i) {
    Stage& stage = m_chain.stages[i];
    const StageSource& source = m_sources[i];
    if (!source.dockerfile_found) {
      continue;
    }
    auto known = loaded.find(stage.dockerfile);
    if (known == loaded.end()) {
      auto dockerfile = load_dockerfile(stage.dockerfile);
      if (!dockerfile && dockerfile.error().pos.line == 0) {
        error(source.dockerfile_pos, dockerfile.error().message);
      } else if (!dockerfile) {
        Diagnostic parse_error = std::move(dockerfile.error());
        parse_error.message = "the Dockerfile does not parse: " + parse_error.message;
        parse_error.hint = fmt::format("fix this line: stage '{}' builds from this file ({}:{})",
                                       stage.name, m_name, source.dockerfile_pos.line);
        m_diagnostics.push_back(std::move(parse_error));
      }
      known = loaded.emplace(stage.dockerfile, dockerfile ? *dockerfile : nullptr).first;
    }
    if (!known->second) {
      continue;
    }
    stage.dockerfile_source = known->second;
    stage.declared_args = declared_args(known->second->parsed);
    for (size_t j = 0; j < stage.build_args.size(); ++j) {
      const std::string& name = stage.build_args[j].first;
      if (std::find(stage.declared_args.begin(), stage.declared_args.end(), name) ==
          stage.declared_args.end()) {
        error(stage.build_args_pos[j],
              fmt::format("build arg '{}' is not declared with ARG in {}, so the build would "
                          "ignore it",
                          name, source.dockerfile),
              fmt::format("declare 'ARG {}' in {} or remove it", name, source.dockerfile));
      }
    }
  }
}

// A chain stage the Dockerfile names but needs does not list gets no build context: the engine
// would pull an image of that name from a registry, and the run order would not wait for the
// stage that builds it.
void Loader::check_dockerfile_needs() {
  for (size_t i = 0; i < m_chain.stages.size(); ++i) {
    const Stage& stage = m_chain.stages[i];
    if (!stage.dockerfile_source) {
      continue;
    }
    KeyValues args = stage_build_args(m_chain, stage, {});
    std::vector<std::string> reported;
    for (const auto& ref :
         external_refs(stage.dockerfile_source->parsed, stage.target, {args.begin(), args.end()})) {
      std::string name = lower(ref.ref);
      bool itself = name == stage.name;
      bool needed = std::find(stage.needs.begin(), stage.needs.end(), name) != stage.needs.end();
      bool seen = std::find(reported.begin(), reported.end(), name) != reported.end();
      if (!m_stage_index.count(name) || (needed && !itself) || seen) {
        continue;
      }
      reported.push_back(name);
      SourcePos at{stage.dockerfile_source->path.string(), ref.pos.line, ref.pos.column};
      if (itself) {
        error(at,
              fmt::format("{} names stage '{}' itself: a stage cannot build on its own image",
                          ref.written, name),
              "name a stage listed in needs, or an image from a registry by its full path");
        continue;
      }
      const StageSource& source = m_sources[i];
      std::string fix = source.needs_line > 0
                            ? fmt::format("add \"{}\" to needs of stage '{}' ({}:{})", name,
                                          stage.name, m_name, source.needs_line)
                            : fmt::format("add needs = [\"{}\"] to stage '{}' ({}:{})", name,
                                          stage.name, m_name, stage.pos.line);
      error(at,
            fmt::format("{} names chain stage '{}', which stage '{}' does not list in needs",
                        ref.written, name, stage.name),
            fix + ", or name an image from a registry by its full path");
    }
  }
}

void Loader::check_gates() {
  GateSettings& gates = m_chain.gates;
  for (const auto& stage : m_chain.stages) {
    if (stage.kind == StageKind::smoke && stage.needs.empty()) {
      error(stage.pos,
            fmt::format("smoke stage '{}' needs no stage, so it tests nothing", stage.name),
            "add needs = [\"<the image it tests>\"]");
    }
    for (size_t i = 0; i < stage.needs.size(); ++i) {
      const Stage* need = m_chain.find_stage(stage.needs[i]);
      if (need && need->kind == StageKind::smoke) {
        error(stage.needs_pos[i],
              fmt::format("stage '{}' needs smoke stage '{}', whose image is a test run, not a "
                          "parent",
                          stage.name, need->name),
              "need the stage the smoke stage tests instead");
      }
    }
  }
  if (gates.final_stage.empty()) {
    for (const auto& stage : m_chain.stages) {
      if (stage.kind == StageKind::build) {
        gates.final_stage = stage.name;
      }
    }
    return;
  }
  const Stage* final_stage = m_chain.find_stage(gates.final_stage);
  if (!final_stage) {
    std::vector<std::string> names;
    for (const auto& stage : m_chain.stages) {
      names.push_back(stage.name);
    }
    error(gates.final_pos,
          fmt::format("final stage '{}' is not a stage of this chain", gates.final_stage),
          did_you_mean(gates.final_stage, names, "stages"));
  } else if (final_stage->kind == StageKind::smoke) {
    error(gates.final_pos,
          fmt::format("final stage '{}' is a smoke stage; the final stage is the published image",
                      gates.final_stage),
          "name the stage whose image is published");
  }
}

void Loader::read_history(const toml::table& root) {
  const auto* table = get<toml::table>(root, "at the top level", "history");
  if (!table) {
    return;
  }
  const std::string_view where = "in [history]";
  check_keys(*table, where, k_history_keys);
  for (auto [key, value] : {std::pair{"regression_percent", &m_chain.history.regression_percent},
                            std::pair{"regression_seconds", &m_chain.history.regression_seconds}}) {
    const toml::node* node = table->get(key);
    if (!node) {
      continue;
    }
    double number = node->value<double>().value_or(-1);
    if (!node->is_number() || !std::isfinite(number) || number < 0 || number > 1e9) {
      error(pos(*node), fmt::format("'{}' {} must be a number, 0 or more", key, where),
            "write it like 20 or 2.5");
      continue;
    }
    *value = number;
  }
}

void Loader::read_trace(const toml::table& root) {
  const auto* table = get<toml::table>(root, "at the top level", "trace");
  if (!table) {
    return;
  }
  check_keys(*table, "in [trace]", k_trace_keys);
  if (const toml::node* node = table->get("otlp_endpoint")) {
    const auto* text = node->as_string();
    if (text == nullptr || !text->get().starts_with("http://")) {
      error(pos(*node), "'otlp_endpoint' in [trace] must be an http:// URL",
            "write it like \"http://127.0.0.1:4318\" (an OpenTelemetry collector's OTLP/HTTP "
            "port)");
    } else {
      m_chain.otlp_endpoint = text->get();
    }
  }
}

void Loader::read_publish(const toml::table& root) {
  const auto* table = get<toml::table>(root, "at the top level", "publish");
  if (!table) {
    return;
  }
  const std::string_view where = "in [publish]";
  check_keys(*table, where, k_publish_keys);
  if (const auto* index = get<std::string>(*table, where, "index")) {
    m_chain.publish.index = index->get();
    m_chain.publish.pos = pos(*index);
    const std::string& ref = m_chain.publish.index;
    auto parsed = parse_image_ref(ref);
    if (!parsed || parsed->domain.empty() || !parsed->digest.empty()) {
      error(pos(*index),
            fmt::format("index '{}' is not a registry reference: {}", ref,
                        !parsed                  ? parsed.error()
                        : parsed->domain.empty() ? "it names no registry host"
                                                 : "it names a digest"),
            "write host[:port]/repository[:tag], e.g. \"registry.example:5000/media/app:1.0\", "
            "without a scheme or a digest");
    }
  }
  if (const auto* verify = get<bool>(*table, where, "tls_verify")) {
    m_chain.publish.tls_verify = verify->get();
  }
  if (const auto* required = get<bool>(*table, where, "require_smoke")) {
    m_chain.publish.require_smoke = required->get();
  }
  for (auto [key, command] :
       {std::pair{"sign", &m_chain.publish.sign}, std::pair{"verify", &m_chain.publish.verify}}) {
    *command = get_strings(*table, where, key, "a word of the command");
    if (!command->empty() && command->front().starts_with("-")) {
      error(pos(*table->get(key)),
            fmt::format("[publish] {} starts with '{}', not a program", key, command->front()),
            "write the program first, e.g. [\"cosign\", \"sign\", \"{ref}@{digest}\"]");
    }
  }
}

void Loader::check_cache_tiers() {
  if (m_chain.engine != "buildkit") {
    // buildah has no cache import or export; a tier it silently ignored would look insured.
    std::string hint = m_options.engine.empty()
                           ? "set engine = \"buildkit\" in [chain], or run with --engine buildkit"
                           : "run with --engine buildkit, or drop the cache settings";
    if (m_registry_pos) {
      error(*m_registry_pos,
            "'registry' hands stages over by push, which only the buildkit "
            "engine does",
            hint);
    }
    for (const auto& stage : m_chain.stages) {
      for (const auto* specs : {&stage.cache_from, &stage.cache_to}) {
        for (const auto& spec : *specs) {
          error(spec.pos,
                fmt::format("stage '{}' names cache tier '{}', which only the buildkit engine "
                            "has",
                            stage.name, spec.text),
                hint);
        }
      }
      if (stage.snapshot_to) {
        error(stage.snapshot_to->pos,
              fmt::format("stage '{}' names a snapshot cache, which only the buildkit engine "
                          "has",
                          stage.name),
              hint);
      }
    }
    return;
  }
  // Every registry cache a stage imports must be written by something in this chain: an import
  // whose export is switched off misses on every build, so every stage rebuilds from scratch.
  std::vector<std::string> exported;
  for (const auto& stage : m_chain.stages) {
    for (const auto& spec : stage.cache_to) {
      if (spec.attr("type") == "registry") {
        exported.push_back(spec.attr("ref"));
      } else if (m_chain.registry.empty()) {
        error(spec.pos,
              fmt::format("stage '{}' exports an inline cache, which travels inside a pushed "
                          "image, but the chain pushes nothing",
                          stage.name),
              "name a registry in [chain] registry, or remove type=inline");
      } else {
        exported.push_back(m_chain.pushed_ref(stage));
      }
    }
    if (stage.snapshot_to) {
      exported.push_back(stage.snapshot_to->attr("ref"));
    }
  }
  for (const auto& stage : m_chain.stages) {
    for (const auto& spec : stage.cache_from) {
      std::string ref = spec.attr("ref");
      if (std::find(exported.begin(), exported.end(), ref) == exported.end()) {
        error(spec.pos,
              fmt::format("stage '{}' imports cache '{}', which no stage of this chain exports: "
                          "the import would miss on every build and the stage rebuild from "
                          "scratch",
                          stage.name, ref),
              fmt::format("add cache_to = [\"type=registry,ref={},mode=max\"] (or "
                          "snapshot_cache_to) to the stage that builds it, or remove this "
                          "cache_from",
                          ref));
      }
    }
  }
}

void Loader::read_lane(const toml::table& table) {
  const std::string_view where = "in [[lane]]";
  check_keys(table, where, k_lane_keys);
  Lane lane;
  lane.pos = pos(table);
  if (const auto* name = get<std::string>(table, where, "name", true)) {
    lane.name = name->get();
    if (!is_lower_name(lane.name, false)) {
      error(pos(*name), fmt::format("lane name '{}' is not valid", lane.name),
            "use lower-case letters, digits, '_', '.' and '-', starting with a letter: it names "
            "the lane's images and folders");
    } else if (m_chain.find_lane(lane.name) != nullptr) {
      error(pos(*name), fmt::format("duplicate lane name '{}'", lane.name), "rename one of them");
    }
  }
  if (const auto* platform = get<std::string>(table, where, "platform")) {
    lane.platform = platform->get();
    if (!is_platform_shape(lane.platform)) {
      error(pos(*platform), fmt::format("platform '{}' is not a platform", lane.platform),
            "write os/arch[/variant], e.g. \"linux/arm64\"");
    }
  }
  if (const auto* host = get<std::string>(table, where, "host")) {
    lane.host = host->get();
    if (std::string wrong = host_address_problem(lane.host); !wrong.empty()) {
      error(pos(*host), fmt::format("lane host '{}' {}", lane.host, wrong),
            "write unix:///path/to/buildkitd.sock or tcp://host:port");
    }
  }
  for (auto [key, file] :
       {std::pair{"ca", &lane.ca}, std::pair{"cert", &lane.cert}, std::pair{"key", &lane.key}}) {
    if (const auto* path = get<std::string>(table, where, key)) {
      if (auto found = existing_path(*path, fmt::format("lane {} file", key), PathKind::file)) {
        *file = *found;
      }
    }
  }
  if (const auto* build_args = get<toml::table>(table, where, "build_args")) {
    read_build_args(*build_args, lane.build_args, nullptr);
  }
  m_chain.lanes.push_back(std::move(lane));
}

/// A stage with no `lanes` runs in every lane.
bool runs_in(const Stage& stage, const std::string& lane) {
  return stage.lanes.empty() ||
         std::find(stage.lanes.begin(), stage.lanes.end(), lane) != stage.lanes.end();
}

void Loader::check_lanes() {
  std::vector<std::string> names;
  for (const auto& lane : m_chain.lanes) {
    names.push_back(lane.name);
  }
  for (const auto& stage : m_chain.stages) {
    if (!m_chain.lanes.empty() && !stage.lane.empty()) {
      error(stage.pos,
            fmt::format("stage '{}' sets 'lane' while the chain has [[lane]] tables", stage.name),
            "leave 'lane' out: each copy of the stage takes its lane's name; use 'lanes' to "
            "choose the lanes it runs in");
    }
    for (size_t i = 0; i < stage.lanes.size(); ++i) {
      if (m_chain.find_lane(stage.lanes[i]) == nullptr) {
        error(stage.lanes_pos[i],
              m_chain.lanes.empty()
                  ? fmt::format("stage '{}' names lane '{}', but the chain has no [[lane]] tables",
                                stage.name, stage.lanes[i])
                  : fmt::format("unknown lane '{}' in lanes", stage.lanes[i]),
              m_chain.lanes.empty() ? "add a [[lane]] table with that name, or leave 'lanes' out"
                                    : did_you_mean(stage.lanes[i], names, "lanes"));
      }
    }
  }
  // A stage runs only in lanes where every stage it needs runs too.
  for (const auto& stage : m_chain.stages) {
    for (size_t i = 0; i < stage.needs.size(); ++i) {
      const Stage* need = m_chain.find_stage(stage.needs[i]);
      if (need == nullptr) {
        continue;
      }
      for (const auto& lane : m_chain.lanes) {
        if (runs_in(stage, lane.name) && !runs_in(*need, lane.name)) {
          error(stage.needs_pos[i],
                fmt::format("stage '{}' runs in lane '{}', but '{}', which it needs, does not",
                            stage.name, lane.name, need->name),
                fmt::format("add \"{}\" to the lanes of '{}', or limit the lanes of '{}'",
                            lane.name, need->name, stage.name));
          break;
        }
      }
    }
  }
}

void Loader::check_publish() {
  check_publish_guarded();
  if (m_chain.publish.index.empty()) {
    return;
  }
  if (m_chain.lanes.empty()) {
    error(m_chain.publish.pos,
          "an index is assembled from the lanes' final images, and the chain has no [[lane]] "
          "tables",
          "add a [[lane]] table with a platform for each platform of the image, or leave "
          "[publish] index out");
    return;
  }
  const Stage* final_stage = m_chain.find_stage(m_chain.gates.final_stage);
  if (final_stage == nullptr) {
    return; // check_gates said why
  }
  std::map<std::string, std::string> lane_of_platform;
  for (const auto& lane : m_chain.lanes) {
    if (!runs_in(*final_stage, lane.name)) {
      continue;
    }
    if (lane.platform.empty()) {
      error(lane.pos,
            fmt::format("lane '{}' has no platform, and its '{}' image is an entry of the index",
                        lane.name, final_stage->name),
            "add platform = \"os/arch\" to the lane");
    } else if (auto [seen, fresh] = lane_of_platform.emplace(lane.platform, lane.name); !fresh) {
      error(lane.pos,
            fmt::format("lanes '{}' and '{}' both build platform {}, and an index has one image "
                        "per platform",
                        seen->second, lane.name, lane.platform),
            fmt::format("give one of them another platform, or limit the lanes of '{}'",
                        final_stage->name));
    }
  }
}

void Loader::check_publish_guarded() {
  const bool registry = !m_chain.registry.empty() && m_chain.engine == "buildkit";
  if ((m_chain.publish.index.empty() && !registry) || !m_chain.publish.require_smoke) {
    return;
  }
  const Stage* final_stage = m_chain.find_stage(m_chain.gates.final_stage);
  if (final_stage == nullptr) {
    return; // check_gates said why
  }
  // The smoke stages that build on the final image, directly or through other stages.
  auto needs_final = [&](const Stage& stage) {
    std::vector<const Stage*> todo = {&stage};
    std::set<std::string> seen;
    while (!todo.empty()) {
      const Stage* at = todo.back();
      todo.pop_back();
      for (const auto& need : at->needs) {
        if (need == final_stage->name) {
          return true;
        }
        if (const Stage* next = m_chain.find_stage(need); next && seen.insert(need).second) {
          todo.push_back(next);
        }
      }
    }
    return false;
  };
  std::vector<std::string> unguarded;
  std::vector<std::string> lanes;
  for (const auto& lane : m_chain.lanes) {
    lanes.push_back(lane.name);
  }
  if (lanes.empty()) {
    lanes.emplace_back();
  }
  for (const auto& lane : lanes) {
    if (!lane.empty() && !runs_in(*final_stage, lane)) {
      continue;
    }
    bool guarded = std::any_of(m_chain.stages.begin(), m_chain.stages.end(), [&](const Stage& s) {
      return s.kind == StageKind::smoke && (lane.empty() || runs_in(s, lane)) && needs_final(s);
    });
    if (!guarded) {
      unguarded.push_back(lane.empty() ? final_stage->name : lane + "/" + final_stage->name);
    }
  }
  if (!unguarded.empty()) {
    error(!m_chain.publish.index.empty() ? m_chain.publish.pos : *m_registry_pos,
          fmt::format("the chain publishes {} ({}), and no smoke stage needs it: an image would "
                      "leave the host untested",
                      join(unguarded, ", "),
                      !m_chain.publish.index.empty() ? "[publish] index" : "[chain] registry"),
          fmt::format("add a [[stage]] with kind = \"smoke\" and needs = [\"{}\"] that runs its "
                      "tests, or say the chain publishes without one: [publish] require_smoke = "
                      "false",
                      final_stage->name));
  }
}

/// `localhost/hello-base:latest` in lane amd64 is `localhost/hello-base-amd64:latest`.
std::string lane_tag(const std::string& tag, const std::string& lane) {
  size_t slash = tag.rfind('/');
  size_t colon = tag.rfind(':');
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash)) {
    return tag + "-" + lane;
  }
  return tag.substr(0, colon) + "-" + lane + tag.substr(colon);
}

void Loader::expand_lanes() {
  if (m_chain.lanes.empty()) {
    return;
  }
  std::vector<Stage> copies;
  for (const auto& lane : m_chain.lanes) {
    for (const auto& stage : m_chain.stages) {
      if (!runs_in(stage, lane.name)) {
        continue;
      }
      Stage copy = stage;
      copy.name = lane.name + "/" + stage.name;
      copy.lane = lane.name;
      copy.lanes = {lane.name};
      copy.tag = lane_tag(stage.tag, lane.name);
      for (auto& need : copy.needs) {
        need = lane.name + "/" + need;
      }
      copies.push_back(std::move(copy));
    }
  }
  m_chain.stages = std::move(copies);
}

tl::expected<Chain, Diagnostics> Loader::load() {
  std::error_code ignored;
  if (fs::is_directory(m_file, ignored)) {
    return tl::unexpected(Diagnostics{
        {{m_name}, "cannot read chain file: it is a directory", "name the chain's .toml file"}});
  }
  auto text = read_chain_input(m_file);
  if (!text) {
    return tl::unexpected(
        Diagnostics{{{m_name}, fmt::format("cannot read chain file: {}", text.error()), ""}});
  }
  m_text = std::move(*text);
  toml::table root;
  try {
    root = toml::parse(m_text, m_name);
  } catch (const toml::parse_error& e) {
    SourcePos at = pos(e.source().begin);
    std::string_view description = e.description();
    if (description.find("utf-8") != std::string_view::npos) {
      // toml++ names the character before the bad byte; the caret belongs under the byte.
      at = first_invalid_byte(at);
    }
    return tl::unexpected(
        Diagnostics{{at, fmt::format("invalid TOML: {}", as_fragment(description)),
                     description.find("utf-8") != std::string_view::npos
                         ? "a chain file is UTF-8 text; re-save it as UTF-8, or name the right file"
                         : ""}});
  }

  m_chain.file = fs::absolute(m_file).lexically_normal();
  m_chain.dir = m_chain.file.parent_path();
  check_keys(root, "at the top level", k_top_keys);
  read_chain(root);
  read_engine(root);
  if (!m_options.engine.empty()) {
    m_chain.engine = m_options.engine;
  }
  read_defaults(root);
  read_cache(root);
  read_disk(root);
  read_resources(root);
  read_gates(root);
  read_smoke(root);
  read_publish(root);
  read_history(root);
  read_trace(root);
  for (const auto* table : tables_in(root, "transient")) {
    read_transient(*table);
  }
  if (!root.contains("stage")) {
    error(pos(root), "missing required table [[stage]]",
          "add a [[stage]] table with a name and a dockerfile");
  } else if (const auto* stages = root.get_as<toml::array>("stage"); stages && stages->empty()) {
    error(pos(*stages), "the chain has no stages: 'stage' is an empty array",
          "add a [[stage]] table with a name and a dockerfile");
  }
  for (const auto* table : tables_in(root, "lane")) {
    read_lane(*table);
  }
  for (const auto* table : tables_in(root, "stage")) {
    read_stage(*table);
  }
  read_versions();
  check_needs();
  check_cycles();
  load_dockerfiles();
  check_dockerfile_needs();
  check_cache_tiers();
  check_gates();
  check_lanes();
  check_publish();

  if (!m_diagnostics.empty()) {
    // Chain-file problems first, each file top to bottom, the way an editor walks them.
    std::stable_sort(
        m_diagnostics.begin(), m_diagnostics.end(), [&](const Diagnostic& a, const Diagnostic& b) {
          return std::tuple(a.pos.file != m_name, a.pos.file, a.pos.line, a.pos.column) <
                 std::tuple(b.pos.file != m_name, b.pos.file, b.pos.line, b.pos.column);
        });
    return tl::unexpected(std::move(m_diagnostics));
  }
  expand_lanes();
  return std::move(m_chain);
}

} // namespace

tl::expected<Chain, Diagnostics> load_chain(const std::filesystem::path& file,
                                            const LoadOptions& options) {
  return Loader(file, options).load();
}

} // namespace kiln
