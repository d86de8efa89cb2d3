#include "compilecache/multilevel.h"

#include <algorithm>
#include <cctype>

#include "util/strings.h"

extern char** environ;

namespace kiln::cc {

namespace {

/// What configures one backend, after upstream's src/config.rs (config_from_env).
struct Backend {
  std::string_view name;
  /// Any variable that enables the backend (config_from_env's `if let Some(...)` keys).
  std::vector<std::string_view> enabled_by;
  /// Every variable starting with one of these belongs to the backend...
  std::vector<std::string_view> prefixes;
  /// ...and so do these.
  std::vector<std::string_view> names;
  /// URL-valued variables to probe, with the scheme a bare host takes.
  std::vector<std::pair<std::string_view, std::string_view>> endpoints;
  std::string_view rw_mode;
};

// In the precedence sccache's single-level mode picks from (CacheConfigs::into_fallback).
const std::vector<Backend>& backends() {
  static const std::vector<Backend> k_backends = {
      {"s3",
       {"SCCACHE_BUCKET"},
       {"SCCACHE_S3_"},
       {"SCCACHE_BUCKET", "SCCACHE_ENDPOINT", "SCCACHE_REGION"},
       {{"SCCACHE_ENDPOINT", "http"}},
       "SCCACHE_S3_RW_MODE"},
      {"redis",
       {"SCCACHE_REDIS", "SCCACHE_REDIS_ENDPOINT", "SCCACHE_REDIS_CLUSTER_ENDPOINTS"},
       {"SCCACHE_REDIS"},
       {},
       {{"SCCACHE_REDIS", "redis"},
        {"SCCACHE_REDIS_ENDPOINT", "redis"},
        {"SCCACHE_REDIS_CLUSTER_ENDPOINTS", "redis"}},
       "SCCACHE_REDIS_RW_MODE"},
      {"memcached",
       {"SCCACHE_MEMCACHED", "SCCACHE_MEMCACHED_ENDPOINT"},
       {"SCCACHE_MEMCACHED"},
       {},
       {{"SCCACHE_MEMCACHED", "tcp"}, {"SCCACHE_MEMCACHED_ENDPOINT", "tcp"}},
       "SCCACHE_MEMCACHED_RW_MODE"},
      {"gcs", {"SCCACHE_GCS_BUCKET"}, {"SCCACHE_GCS_"}, {}, {}, "SCCACHE_GCS_RW_MODE"},
      {"gha",
       {"SCCACHE_GHA_VERSION", "SCCACHE_GHA_ENABLED"},
       {"SCCACHE_GHA_"},
       {},
       {{"SCCACHE_GHA_CACHE_URL", "https"}},
       "SCCACHE_GHA_RW_MODE"},
      {"azure",
       {"SCCACHE_AZURE_BLOB_CONTAINER"},
       {"SCCACHE_AZURE_"},
       {},
       {{"SCCACHE_AZURE_ENDPOINT", "https"}},
       "SCCACHE_AZURE_RW_MODE"},
      {"webdav",
       {"SCCACHE_WEBDAV_ENDPOINT"},
       {"SCCACHE_WEBDAV_"},
       {},
       {{"SCCACHE_WEBDAV_ENDPOINT", "http"}},
       "SCCACHE_WEBDAV_RW_MODE"},
      {"oss",
       {"SCCACHE_OSS_BUCKET"},
       {"SCCACHE_OSS_"},
       {},
       {{"SCCACHE_OSS_ENDPOINT", "https"}},
       "SCCACHE_OSS_RW_MODE"},
      {"cos",
       {"SCCACHE_COS_BUCKET"},
       {"SCCACHE_COS_"},
       {},
       {{"SCCACHE_COS_ENDPOINT", "https"}},
       "SCCACHE_COS_RW_MODE"},
      {"disk",
       {},
       {},
       {"SCCACHE_DIR", "SCCACHE_CACHE_SIZE", "SCCACHE_DIRECT", "SCCACHE_LOCAL_RW_MODE"},
       {},
       "SCCACHE_LOCAL_RW_MODE"},
  };
  return k_backends;
}

const Backend* find_backend(std::string_view name) {
  for (const Backend& backend : backends()) {
    if (backend.name == name) {
      return &backend;
    }
  }
  return nullptr;
}

/// sccache treats an empty variable as unset (string_from_env_var).
const std::string* value_of(const Environment& env, std::string_view name) {
  auto it = env.find(std::string(name));
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

bool is_true(const std::string* value) {
  if (value == nullptr) {
    return false;
  }
  std::string v = lower(trim(*value));
  return v == "true" || v == "on" || v == "1";
}

bool configured(const Backend& backend, const Environment& env) {
  if (backend.name == "gha") {
    // SCCACHE_GHA_ENABLED counts only when true; a version alone enables it.
    return value_of(env, "SCCACHE_GHA_VERSION") != nullptr ||
           is_true(value_of(env, "SCCACHE_GHA_ENABLED"));
  }
  return std::any_of(backend.enabled_by.begin(), backend.enabled_by.end(),
                     [&](std::string_view name) { return value_of(env, name) != nullptr; });
}

CacheLevel level_of(const Backend& backend, const Environment& env) {
  CacheLevel level{std::string(backend.name), {}};
  for (const auto& [variable, scheme] : backend.endpoints) {
    const std::string* value = value_of(env, variable);
    if (value == nullptr) {
      continue;
    }
    std::string default_scheme(scheme);
    if (backend.name == "s3") {
      // src/cache/s3.rs endpoint_resolver: SCCACHE_S3_USE_SSL sets the scheme outright.
      if (const std::string* ssl = value_of(env, "SCCACHE_S3_USE_SSL")) {
        default_scheme = is_true(ssl) ? "https" : "http";
        std::string url = *value;
        if (auto pos = url.find("://"); pos != std::string::npos) {
          url = default_scheme + url.substr(pos);
        }
        level.endpoints.push_back({std::string(variable), url, default_scheme});
        continue;
      }
    }
    if (variable == "SCCACHE_REDIS_CLUSTER_ENDPOINTS") {
      for (const std::string& part : split(*value, ',')) {
        std::string url = std::string(trim(part));
        if (!url.empty()) {
          level.endpoints.push_back({std::string(variable), url, default_scheme});
        }
      }
      continue;
    }
    level.endpoints.push_back({std::string(variable), *value, default_scheme});
  }
  return level;
}

} // namespace

Environment environment_of_process() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    auto eq = text.find('=');
    if (eq == std::string_view::npos) {
      continue;
    }
    env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  return env;
}

std::vector<std::string> chain_entries(const Environment& env) {
  std::vector<std::string> entries;
  const std::string* chain = value_of(env, k_chain_variable);
  if (chain == nullptr) {
    return entries;
  }
  for (const std::string& part : split(*chain, ',')) {
    std::string entry = lower(trim(part));
    if (!entry.empty()) {
      entries.push_back(entry);
    }
  }
  return entries;
}

std::vector<CacheLevel> configured_levels(const Environment& env, bool chain_honoured) {
  std::vector<CacheLevel> levels;
  std::vector<std::string> chain = chain_honoured ? chain_entries(env) : std::vector<std::string>{};
  if (!chain.empty()) {
    for (const std::string& entry : chain) {
      const Backend* backend = find_backend(entry);
      // An unknown entry stays a level without endpoints: the server refuses it, and start
      // drops it by name then.
      levels.push_back(backend != nullptr ? level_of(*backend, env) : CacheLevel{entry, {}});
    }
    return levels;
  }
  for (const Backend& backend : backends()) {
    if (backend.name != "disk" && configured(backend, env)) {
      levels.push_back(level_of(backend, env));
    }
  }
  return levels;
}

std::vector<std::string> level_variables(std::string_view level, const Environment& env) {
  std::vector<std::string> names;
  const Backend* backend = find_backend(level);
  if (backend == nullptr) {
    return names;
  }
  for (const auto& [name, value] : env) {
    bool by_prefix = std::any_of(backend->prefixes.begin(), backend->prefixes.end(),
                                 [&](std::string_view prefix) { return name.starts_with(prefix); });
    bool by_name =
        std::find(backend->names.begin(), backend->names.end(), name) != backend->names.end();
    if (by_prefix || by_name) {
      names.push_back(name);
    }
  }
  return names; // a std::map iterates in name order
}

std::vector<EnvironmentChange> drop_level(Environment& env, std::string_view level) {
  std::vector<EnvironmentChange> changes;
  std::vector<std::string> chain = chain_entries(env);
  if (std::find(chain.begin(), chain.end(), level) != chain.end()) {
    std::string kept;
    for (const std::string& entry : chain) {
      if (entry != level) {
        kept += (kept.empty() ? "" : ",") + entry;
      }
    }
    if (kept.empty()) {
      env.erase(k_chain_variable);
      changes.push_back({k_chain_variable, std::nullopt});
    } else {
      env[k_chain_variable] = kept;
      changes.push_back({k_chain_variable, kept});
    }
  }
  for (const std::string& name : level_variables(level, env)) {
    env.erase(name);
    changes.push_back({name, std::nullopt});
  }
  return changes;
}

bool level_read_only(std::string_view level, const Environment& env) {
  const Backend* backend = find_backend(level);
  if (backend == nullptr) {
    return false;
  }
  const std::string* mode = value_of(env, backend->rw_mode);
  if (mode == nullptr) {
    // Upstream warns and defaults GCS to READ_ONLY; every other backend to READ_WRITE.
    return level == "gcs";
  }
  return lower(trim(*mode)) == "read_only";
}

bool level0_failures_start_uploads(const Environment& env) {
  const std::string* policy = value_of(env, "SCCACHE_MULTILEVEL_WRITE_ERROR_POLICY");
  return policy != nullptr && lower(trim(*policy)) == "ignore";
}

} // namespace kiln::cc
