#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include "chain/chain.h"
#include "engine/engine.h"
#include "explain/file_hashes.h"

namespace kiln {

/// One instruction of a stage's build, as what keys its layer in the engine's cache.
struct StepInput {
  int line = 0;
  std::string text;     // as written, continuations joined
  std::string expanded; // build args and ENV in effect substituted; RUN as written (its shell
                        // expands it, inside the build)
  /// The build args its key depends on: for RUN every ARG in scope (the engine hands them all
  /// to the command's environment), for the others those its text names.
  std::vector<std::string> args;
  /// COPY/ADD from the build context: each file it sends, relative to the context, with the
  /// SHA-256 of its content (`link:<target>` for a symlink).
  std::map<std::string, std::string> files;
  /// The chain stages it reads (FROM, COPY --from, RUN --mount from=), with the identity of the
  /// image handed over for each.
  std::map<std::string, std::string> parents;
  std::string base; // FROM an image from outside the chain: the reference as resolved
  /// What the engine's key does not hold and kiln cannot hash: a secret, a cache mount, a fetch
  /// from the network.
  std::vector<std::string> unhashed;
};

/// A build arg as recorded: a secret-shaped value only as a keyed hash.
struct ArgInput {
  std::string value;  // "" when secret-shaped
  std::string hashed; // HMAC-SHA256 under the records' key, when secret-shaped
  std::string source; // build_arg_source(): `--build-arg`, `lane <x>`, `chain file`, else the
                      // versions file's name
  bool operator==(const ArgInput& other) const {
    return value == other.value && hashed == other.hashed;
  }
};

/// Everything kiln hands the engine for one stage's build that can decide whether the engine's
/// cache serves it (docs/explain.md).
struct StageInputs {
  std::string run_id;
  std::string stage;
  std::string lane;
  std::string engine;
  std::string worker;     // the BuildKit worker it was placed on; "" when none
  std::string dockerfile; // relative to the chain file's folder
  /// Why the engine was told not to use its cache: `--no-cache` (the run's flag) or `smoke` (a
  /// smoke stage runs every time); "" when it may.
  std::string bypass;
  std::map<std::string, ArgInput> args;
  std::map<std::string, std::string> bases; // external image reference -> digest, when known
  std::vector<StepInput> steps;
  std::string image; // the identity of the image the build made; "" before it ended ok
  std::string ended; // UTC ISO-8601, when it ended ok
};

nlohmann::json to_json(const StageInputs& inputs);
/// An error names what was malformed; the caller names the file.
tl::expected<StageInputs, std::string> inputs_from_json(const nlohmann::json& json);

/// What collect_inputs() reads besides the chain.
struct InputSources {
  const KeyValues& overrides; // --build-arg, for each arg's source
  /// The identity of the image handed over for the chain stage a Dockerfile knows as `name`.
  std::function<std::string(const std::string& name)> identity;
  FileHashes& hashes;
  std::string secret_key; // keys the hash of a secret-shaped build arg
  bool no_cache = false;  // the run's --no-cache
};

/// The inputs of `request`'s build of `stage`. Files that cannot be read are recorded with
/// the reason in place of a hash: a build would fail on them, and the difference still shows.
StageInputs collect_inputs(const Chain& chain, const Stage& stage, const BuildRequest& request,
                           const InputSources& sources);

/// The key that hashes secret-shaped build args of one records folder (`<records>/explain-key`),
/// made on first use; readable only by its owner.
tl::expected<std::string, std::string> records_secret_key(const std::filesystem::path& records);

/// Where a run keeps a stage's inputs (`<run>/inputs/<stage>.json`, a lane's `/` made `~`), and
/// where the records keep those of the stage's last build that ended ok (`<records>/inputs/`).
std::filesystem::path inputs_file(const std::filesystem::path& folder, const std::string& stage);

/// Reads an inputs file; nullopt when there is none, an error when it is unreadable.
tl::expected<std::optional<StageInputs>, std::string>
read_inputs(const std::filesystem::path& file);

} // namespace kiln
