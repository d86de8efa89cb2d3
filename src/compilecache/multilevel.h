#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cc {

/// Environment variables by name: what sccache reads its cache levels from.
using Environment = std::map<std::string, std::string>;

Environment environment_of_process();

/// One URL-valued variable that says where a cache level lives.
struct LevelEndpoint {
  std::string variable;
  std::string url;
  std::string default_scheme; // for a URL written without one
};

/// A cache level as upstream sccache configures it from the environment (docs/Configuration.md
/// and src/config.rs, read at mozilla/sccache bf75727, 0.17.0). `name` is spelled as
/// SCCACHE_MULTILEVEL_CHAIN spells it: disk, s3, redis, memcached, gcs, gha, azure, webdav,
/// oss, cos.
struct CacheLevel {
  std::string name;
  /// What a probe connects to; empty for the local disk and for a backend whose address comes
  /// from a cloud SDK rather than a variable (S3 without SCCACHE_ENDPOINT, GCS, ...).
  std::vector<LevelEndpoint> endpoints;
};

constexpr const char* k_chain_variable = "SCCACHE_MULTILEVEL_CHAIN";

/// The levels sccache would use, fastest first. With SCCACHE_MULTILEVEL_CHAIN set (and
/// `chain_honoured`: a sccache older than 0.15 ignores the chain without a word), the chain's
/// entries in order; otherwise every configured remote backend: sccache uses the first in its
/// own precedence, and the next one once that is dropped.
std::vector<CacheLevel> configured_levels(const Environment& env, bool chain_honoured = true);

/// The chain's entries, trimmed and lower case; empty when the variable is unset or empty.
std::vector<std::string> chain_entries(const Environment& env);

/// The variables of `env` that configure `level`, sorted by name.
std::vector<std::string> level_variables(std::string_view level, const Environment& env);

/// A change to make to the environment of the compiles; no value means unset.
struct EnvironmentChange {
  std::string name;
  std::optional<std::string> value;
};

/// Take `level` out of `env`: its variables go, and so does its chain entry (the whole chain
/// variable once no entry is left, which sends sccache back to its single-level default).
/// Returns the changes made, in order.
std::vector<EnvironmentChange> drop_level(Environment& env, std::string_view level);

/// Whether sccache skips writes to `level` (its *_RW_MODE is READ_ONLY; GCS defaults to that).
bool level_read_only(std::string_view level, const Environment& env);

/// Whether a failed level-0 write still starts the writes to the slower levels: only under
/// SCCACHE_MULTILEVEL_WRITE_ERROR_POLICY=ignore, which writes every level in the background
/// (src/cache/multilevel.rs, put_raw).
bool level0_failures_start_uploads(const Environment& env);

} // namespace kiln::cc
