#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "chain/chain.h"
#include "engine/engine.h"

namespace kiln {

/// The built-in class of registry cache-import flakes, which the run answers by dropping the
/// registry-facing cache tiers after repeated hits.
constexpr std::string_view k_cache_import_class = "cache-import";

/// The class of a build whose BuildKit daemon was lost or not there: the worker failed, not the
/// build.
constexpr std::string_view k_worker_lost_class = "worker-lost";

/// The class of an attempt the stall limit stopped (no output for the stage's stall_timeout_s).
constexpr std::string_view k_stall_class = "stall";

/// The built-in transient classes: builder, registry and RUN-step fetch flakes that go away on
/// their own.
const std::vector<TransientClass>& builtin_transient_classes();

/// What to do after an attempt failed.
enum class Verdict {
  retry,             // transient, budget left, tail differs from the previous attempt (or the
                     // class is retried despite an identical tail)
  permanent,         // no transient pattern matched: a script or compile failure
  refused_identical, // transient pattern, but the same failing tail as the previous attempt
  exhausted,         // transient, but the attempt budget is used up
};

const char* verdict_name(Verdict verdict);

struct FailureVerdict {
  Verdict verdict = Verdict::permanent;
  std::string class_name;   // the transient class that matched, empty when none did
  std::string matched_line; // the line that matched, verbatim
  std::string reason;       // one sentence for the driver log and the console
};

/// Remove what differs between two runs of the same failure and says nothing about it:
/// per-line elapsed-time prefixes (`#12 3.456 ` -> `#12 `), timestamps (-> `<time>`), durations
/// (-> `<dur>`), uuids and hex runs of 12+ characters (-> `<id>`).
std::string normalise_line(const std::string& line);

/// Classify the failure of attempt `attempt` (1-based) of a budget of `budget`, given this
/// attempt's failing tail and the previous attempt's (nullopt on the first attempt).
/// `classes` are tried in order; within the tail, the last matching line wins (it is the one
/// closest to the failure). A class that is `engine_only` reads `engine_lines` instead: the
/// lines of `tail` the engine printed itself (BuildOutput::engine_evidence). nullptr: every
/// line of `tail` is the tool's own (a push's or a pull's output).
FailureVerdict classify_failure(const Tail& tail, const std::optional<Tail>& previous_tail,
                                int attempt, int budget, const std::vector<TransientClass>& classes,
                                const Tail* engine_lines = nullptr);

/// Classify an attempt stopped because the engine printed nothing for the stall limit, at step
/// `step` (as step_name says it), after `silent_seconds` of silence. A stall is transient: a
/// network call that hangs once rarely hangs twice. The same step stalling again is not a flake,
/// and is refused.
FailureVerdict classify_stall(const std::string& step, const std::optional<std::string>& previous,
                              int attempt, int budget, double silent_seconds);

/// How long to wait before attempt `next_attempt` (2-based): the cooldown doubling per failure,
/// capped at the policy's maximum.
std::chrono::milliseconds cooldown_before(int next_attempt, const RetryPolicy& policy);

} // namespace kiln
