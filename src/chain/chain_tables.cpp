// Reading each table of a chain file into the Chain: [chain], [engine], [defaults], [cache],
// [disk], [resources], [gates], [smoke], [publish], [history], [trace], [[transient]] and
// [[stage]], and the versions file.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "chain/loader.h"
#include "chain/versions.h"
#include "util/image_ref.h"
#include "util/pattern.h"
#include "util/strings.h"

namespace kiln::chain_loading {

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
    read_names(*buildkit, "workers", "a worker name",
               "write workers = [\"bk1\", ...] with names of [[worker]] tables",
               m_chain.buildkit_workers, m_chain.buildkit_workers_pos, "[engine.buildkit]");
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

void Loader::read_disk(const toml::table& root) {
  DiskSettings& disk = m_chain.disk;
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
  disk.exports_max_gb = get_gb(*table, where, "exports_max_gb");
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
                                      std::vector<SourcePos>& where, std::string_view in) {
  const auto* array = get<toml::array>(table, fmt::format("in {}", in), key);
  if (array == nullptr) {
    return nullptr;
  }
  for (const auto& element : *array) {
    if (const auto* name = element.as_string()) {
      names.push_back(name->get());
      where.push_back(pos(element));
    } else {
      error(pos(element),
            fmt::format("each of '{}' in {} must be {}, not {}", key, in, what, type_name(element)),
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
  read_names(table, "needs", "a stage name", "write the stage name in quotes", stage.needs,
             stage.needs_pos);
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
  std::vector<SourcePos> label_pos;
  if (const auto* labels =
          read_names(table, "worker_labels", "a label", "write worker_labels = [\"gpu\", ...]",
                     stage.worker_labels, label_pos)) {
    stage.worker_labels_pos = pos(*labels);
  }
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
  stage.stable_name = stage.kind == StageKind::build || table.contains("tag");
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

void Loader::read_records(const toml::table& root) {
  const auto* table = get<toml::table>(root, "at the top level", "records");
  if (!table) {
    return;
  }
  check_keys(*table, "in [records]", k_records_keys);
  m_chain.records_keep = get_count(*table, "in [records]", "keep",
                                   "1 keeps the newest run only; leave it out to "
                                   "keep every run");
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

} // namespace kiln::chain_loading
