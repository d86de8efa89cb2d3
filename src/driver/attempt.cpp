#include "driver/attempt.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kiln {

namespace {

/// Built-in patterns ignore case: tools print the same failure as `Connection reset by peer`
/// and `connection reset by peer`.
std::vector<Pattern> builtin_patterns(std::initializer_list<const char*> sources) {
  std::vector<Pattern> patterns;
  for (const char* source : sources) {
    patterns.push_back(Pattern::builtin(source, {.case_insensitive = true}));
  }
  return patterns;
}

} // namespace

const std::vector<TransientClass>& builtin_transient_classes() {
  // Messages as the engines and Go's net/http print them. Recorded from buildah 1.28.2: a failed
  // /v2/ ping says `503 (Service Unavailable)`, a failed manifest read `503 Service Unavailable`,
  // and a 429 without an error body `StatusCode: 429, `.
  static const std::vector<TransientClass> k_classes = {
      // The daemon went away under the build, or is not there: killed (`Unavailable ... error
      // reading from server: EOF`), stopped, which cancels its builds (`failed to solve:
      // Canceled: context canceled`; a cancel kiln asked for is an interrupt, a stall or a time
      // limit, never classified), or not listening (`Unavailable: connection error`), as
      // recorded from buildkitd v0.11.6. Nothing in the build failed: a restarted daemon took
      // the next build at once, so it is retried even when the attempt failed identically.
      {std::string(k_worker_lost_class),
       builtin_patterns(
           {R"(code = Unavailable desc = error reading from server)",
            R"(failed to solve: Canceled: context canceled)",
            R"(Unavailable: connection error: desc = "transport: error while dialing)"}),
       {},
       true,
       true},
      // A registry cache import that times out (field notes: it killed six attempts in one
      // afternoon). Retried even when identical: after repeated flakes the run drops the
      // registry-facing cache arguments, so the next attempt is not the same build.
      {std::string(k_cache_import_class),
       builtin_patterns({"DeadlineExceeded", "httpReadSeeker", "no active session"}),
       {},
       true,
       true},
      // A fetch inside a RUN step (curl, wget, git, pip, apt-get), as each prints a DNS hiccup,
      // a reset, a hang-up, its own timeout or a 429/502/503/504: the recordings in
      // tests/fixtures/fetch-network. Before registry-network, whose generic `connection reset
      // by peer` would otherwise claim curl's lines; these patterns carry each tool's own
      // wording, so an engine's registry lines stay registry-network. Left out, and permanent:
      // a refused connection and a name the resolver says does not exist (a wrong address or
      // port), 404s, and pip's hash mismatch (a cut download and a wrong pin read the same).
      {"fetch-network",
       builtin_patterns(
           {// glibc's EAI_AGAIN text (wget, pip, git://), and apt's own
            "Temporary failure in name resolution", "Temporary failure resolving '",
            // curl, and git over http through libcurl. curl says the first for a name that
            // does not exist too: a typo then fails identically and is refused next time.
            "Could not resolve host: ", "Recv failure: ", "transfer closed with ",
            "Empty reply from server", R"(Operation timed out after \d+ milliseconds)",
            R"(Operation too slow\. Less than)",
            R"(The requested URL returned error: (429|50[234])\b)",
            // wget
            R"(Read error (\(|at byte \d))", R"(Connection closed at byte \d)",
            R"(awaiting response\.\.\. No data received\.)", R"(ERROR (429|50[234]): )",
            // pip (urllib3)
            R"(ConnectionResetError\(104,)", R"(RemoteDisconnected\(')", R"(ReadTimeoutError\()",
            R"(too many (429|50[234]) error responses)",
            // apt: the status, two spaces, its reason, then `[IP: address port]`
            R"(Connection failed \[IP: )", R"(Undetermined Error \[IP: )",
            R"(\b(429|50[234])  [^\[]*\[IP: )",
            // git
            "fatal: early EOF", "fetch-pack: unexpected disconnect while reading sideband packet",
            "fatal: read error: Connection reset by peer"}),
       {},
       false},
      {"registry-network",
       builtin_patterns(
           {"i/o timeout", "TLS handshake timeout", "connection reset by peer", "unexpected EOF",
            // A registry that drops the connection mid-push, as skopeo and buildah
            // say it (`writing blob: Patch "...": EOF`, or the write that found the
            // connection gone): a rerun pushes fine.
            R"(writing (blob|manifest): .*(: EOF\b|use of closed network )"
            R"(connection|: broken pipe))",
            R"(502 \(?Bad Gateway)", R"(503 \(?Service Unavailable)", R"(504 \(?Gateway Timeout)",
            R"(429 \(?Too Many Requests)", "StatusCode: 429,", "toomanyrequests",
            "net/http: request canceled", "http2: server sent GOAWAY"}),
       {},
       false,
       true},
      {"engine-session", builtin_patterns({"context deadline exceeded"}), {}, false, true},
      {"storage-contention",
       builtin_patterns({"layer not known", "database is locked", "device or resource busy"}),
       {},
       false,
       true},
      // A snapshot mount that failed once may mount the next time; failing identically it
      // will not (it retried an operation-not-permitted mount until the attempts ran out).
      {"snapshot-mount", builtin_patterns({"failed to mount"}), {}, false, true},
      // Measured to go green on a later attempt even when the tail is identical. The checksum
      // error ending in `"<path>": not found` is a file missing from the context, found at parse
      // time: it fails the same way every time.
      {"snapshot-checksum", builtin_patterns({"failed to calculate checksum of ref"}),
       builtin_patterns({R"(failed to calculate checksum of ref .*": not found)"}), true, true},
  };
  return k_classes;
}

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
  case Verdict::retry:
    return "retry";
  case Verdict::permanent:
    return "permanent";
  case Verdict::refused_identical:
    return "refused-identical";
  case Verdict::exhausted:
    return "exhausted";
  }
  return "unknown";
}

std::string normalise_line(const std::string& line) {
  // BuildKit plain progress: `#5 0.254 hello`; the vertex number stays, it names the step.
  static const Pattern k_elapsed = Pattern::builtin(R"(^(#\d+) \d+\.\d+( |$))");
  static const Pattern k_timestamp =
      Pattern::builtin(R"(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?)");
  static const Pattern k_clock = Pattern::builtin(R"(\b\d{2}:\d{2}:\d{2}(\.\d+)?\b)");
  // Before hex runs: a uuid's last group alone is a 12-digit hex run.
  static const Pattern k_uuid = Pattern::builtin(
      R"(\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)");
  static const Pattern k_hex_run = Pattern::builtin(R"(\b[0-9a-fA-F]{12,}\b)");
  static const Pattern k_duration = Pattern::builtin(R"(\b(\d+(\.\d+)?(ns|us|µs|ms|h|m|s))+\b)");

  std::string result = k_elapsed.replace_all(line, "\\1\\2");
  result = k_timestamp.replace_all(result, "<time>");
  result = k_clock.replace_all(result, "<time>");
  result = k_uuid.replace_all(result, "<id>");
  result = k_hex_run.replace_all(result, "<id>");
  return k_duration.replace_all(result, "<dur>");
}

namespace {

// What classification and the identical check read: the last k_failure_tail_lines lines,
// trailing blank lines dropped (whether an engine ends with one says nothing).
Tail failure_window(const Tail& tail) {
  auto end = tail.end();
  while (end != tail.begin() && (end - 1)->find_first_not_of(" \t\r") == std::string::npos) {
    --end;
  }
  const size_t size = std::min(static_cast<size_t>(end - tail.begin()), k_failure_tail_lines);
  return Tail(end - static_cast<std::ptrdiff_t>(size), end);
}

bool same_failure(const Tail& tail, const Tail& previous) {
  return std::equal(tail.begin(), tail.end(), previous.begin(), previous.end(),
                    [](const std::string& line, const std::string& previous_line) {
                      return normalise_line(line) == normalise_line(previous_line);
                    });
}

bool matches_any(const std::string& line, const std::vector<Pattern>& patterns) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const Pattern& pattern) { return pattern.search(line); });
}

// The last line of `window` that is of `transient`'s class, or nullptr.
const std::string* last_match(const Tail& window, const TransientClass& transient) {
  for (auto line = window.rbegin(); line != window.rend(); ++line) {
    if (matches_any(*line, transient.patterns) && !matches_any(*line, transient.unless)) {
      return &*line;
    }
  }
  return nullptr;
}

} // namespace

FailureVerdict classify_failure(const Tail& tail, const std::optional<Tail>& previous_tail,
                                int attempt, int budget, const std::vector<TransientClass>& classes,
                                const Tail* engine_lines) {
  const Tail window = failure_window(tail);
  const Tail engine_window = engine_lines != nullptr ? failure_window(*engine_lines) : window;
  FailureVerdict result;
  const TransientClass* transient = nullptr;
  for (const TransientClass& candidate : classes) {
    const Tail& read = candidate.engine_only ? engine_window : window;
    if (const std::string* line = last_match(read, candidate)) {
      transient = &candidate;
      result.class_name = candidate.name;
      result.matched_line = *line;
      break;
    }
  }
  if (transient == nullptr) {
    result.verdict = Verdict::permanent;
    result.reason = "no transient pattern matched; a script or compile failure is not retried";
    return result;
  }
  const bool identical =
      previous_tail.has_value() && same_failure(window, failure_window(*previous_tail));
  if (identical && !transient->retry_despite_identical) {
    result.verdict = Verdict::refused_identical;
    result.reason = fmt::format("failed exactly as attempt {} did (class '{}'); a flake changes "
                                "between attempts, this did not",
                                attempt - 1, transient->name);
    return result;
  }
  // After the identical check: "it failed the same way" says more than "the budget is gone".
  if (attempt >= budget) {
    result.verdict = Verdict::exhausted;
    result.reason = fmt::format("transient failure (class '{}') on attempt {} of {}; the retry "
                                "budget is used up",
                                transient->name, attempt, budget);
    return result;
  }
  result.verdict = Verdict::retry;
  // No "retrying as attempt N": the run loop says that, with the cooldown.
  if (identical) {
    result.reason = fmt::format("failed exactly as attempt {} did (class '{}'), retried anyway: "
                                "this class clears on a later attempt",
                                attempt - 1, transient->name);
  } else {
    result.reason = fmt::format("transient failure (class '{}')", transient->name);
  }
  return result;
}

FailureVerdict classify_stall(const std::string& step, const std::optional<std::string>& previous,
                              int attempt, int budget, double silent_seconds) {
  FailureVerdict result;
  result.class_name = std::string(k_stall_class);
  std::string silence = fmt::format("no output for {:.0f}s at {}", silent_seconds, step);
  if (previous && *previous == step) {
    result.verdict = Verdict::refused_identical;
    result.reason = fmt::format("stalled again ({}), at the same step as attempt {}: a step "
                                "that hangs twice is not a flake; bound its network calls",
                                silence, attempt - 1);
  } else if (attempt >= budget) {
    result.verdict = Verdict::exhausted;
    result.reason = fmt::format("stalled ({}) on attempt {} of {}; the retry budget is used up",
                                silence, attempt, budget);
  } else {
    result.verdict = Verdict::retry;
    result.reason = fmt::format("stalled: {}; its process group was stopped", silence);
  }
  return result;
}

std::chrono::milliseconds cooldown_before(int next_attempt, const RetryPolicy& policy) {
  if (next_attempt <= 1) {
    return std::chrono::milliseconds(0);
  }
  // ldexp overflows to infinity rather than wrapping, and the cap then holds.
  const double doubled = std::ldexp(static_cast<double>(policy.cooldown.count()), next_attempt - 2);
  const double capped = std::min(doubled, static_cast<double>(policy.cooldown_max.count()));
  return std::chrono::milliseconds(static_cast<int64_t>(std::max(0.0, capped)));
}

} // namespace kiln
