#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "chain/chain.h"
#include "engine/engine.h"
#include "explain/cause.h"
#include "explain/file_hashes.h"
#include "explain/stage_inputs.h"

namespace kiln {

/// One stage's inputs as its build starts, beside those of its last build that ended ok.
struct StageVerdict {
  NamedContext image; // how the engine names the stage's image
  StageInputs now;
  std::optional<StageInputs> before;
  CacheEvidence evidence;
  std::optional<Cause> cause; // why the engine will rebuild it; nullopt: it should be reused
  /// When its inputs differ from its last good build's but equal those of an earlier one: that
  /// build's inputs. The engine's cache holds more than the newest build of a stage, so an
  /// edit taken back is served from it.
  std::optional<StageInputs> earlier;
  std::string problem; // why the last good inputs could not be read, "" when they could
};

/// Records each stage's inputs and judges why it rebuilds, for a run and for a dry run alike:
/// the inputs now against `<records>/inputs/<stage>.json`, those of the stage's last build that
/// ended ok. Safe to share between stage jobs.
class RebuildJudge {
public:
  RebuildJudge(const Chain& chain, const Engine& engine, const KeyValues& overrides, bool no_cache);

  /// The stage's inputs for `request` (its needs' identities already set in it, or named as
  /// rebuilt), built on `worker` ("" outside a pool), its last good ones and the cause kiln
  /// expects.
  StageVerdict judge(const Stage& stage, const BuildRequest& request, const std::string& worker);

  /// After the stage's build ended ok as `outcome` (built | reused) with image `image`: the
  /// cause to record (nullopt for a reused build), and its inputs kept in the run folder
  /// `run_folder` and as the stage's last good ones. `import_dropped`: its registry cache was
  /// left out.
  std::optional<Cause> ended_ok(StageVerdict& verdict, const std::string& outcome,
                                const std::string& image, const std::string& ended,
                                bool import_dropped, const std::filesystem::path& run_folder);

  /// Inputs of a build that did not end ok are kept in the run folder only.
  void ended_otherwise(const StageVerdict& verdict, const std::filesystem::path& run_folder);

  /// Keeps the file hashes for the next run; an error says why not (the next run reads again).
  tl::expected<void, std::string> save();

  FileHashes::Counts hash_counts() const { return m_hashes.counts(); }

private:
  /// The newest build of `stage` in the run folders whose inputs equal `now`.
  std::optional<StageInputs> earlier_build(const std::string& stage, const StageInputs& now) const;

  const Chain& m_chain;
  const Engine& m_engine;
  const KeyValues& m_overrides;
  bool m_no_cache;
  FileHashes m_hashes;
  std::string m_key;
};

/// How many earlier runs a judge looks through for a build with the same inputs.
constexpr int k_earlier_runs_searched = 30;

} // namespace kiln
