// `kiln-cc session`'s verbs share these: the session folder `start` leaves, running sccache,
// the limits and file names, and the messages kiln-cc prints. session.cpp reads the command line
// and prints; session_sccache.cpp runs sccache; session_folder.cpp keeps the session's state in
// its folder; session_start.cpp probes the levels and starts the server; session_end.cpp drains
// the slower levels, counts the step's compiles and stops the server; session_run.cpp runs a
// command in a session of its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "compilecache/multilevel.h"
#include "compilecache/sccache_stats.h"
#include "compilecache/stats_line.h"
#include "util/cancel.h"

namespace kiln::cc::session_control {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline constexpr int k_usage_exit = 2;
inline constexpr std::chrono::milliseconds k_default_budget = 2000ms;
inline constexpr int k_default_drain_timeout_s = 600;
// A minute in which no level's counters move: one large object on a slow link can take that
// long, and the timeout bounds the wait anyway.
inline constexpr int k_default_stable_polls = 60;
inline constexpr std::chrono::milliseconds k_poll_interval = 1000ms;
// sccache's own client gives up on a starting server after 10 s; this only catches a hang.
inline constexpr std::chrono::milliseconds k_sccache_timeout = 30000ms;
inline constexpr size_t k_error_log_tail_lines = 20;
// The idle timeout `start` gives the server unless the step set one: how long a server can
// outlive a watchdog that was itself killed. While the watchdog lives, it keeps the server
// from idling out during a long link and stops it once the step's shell is gone.
inline constexpr int k_idle_timeout_s = 120;
// sccache's own default, for a SCCACHE_IDLE_TIMEOUT it cannot read.
inline constexpr int k_sccache_default_idle_timeout_s = 600;
// How long a server asked to stop may take to go before the watchdog kills it.
inline constexpr std::chrono::milliseconds k_stop_grace = 10000ms;

inline constexpr const char* k_session_file = "session.json";
inline constexpr const char* k_baseline_file = "baseline.json";
inline constexpr const char* k_final_file = "final.json";
inline constexpr const char* k_ccache_stats_log = "ccache-stats.log";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- messages: session.cpp ----------------------------------------------------------------

void print(std::FILE* stream, const std::string& text);
void warn(const std::string& message);
void note(const std::string& message);
std::string first_line(std::string_view text);
/// The lines of `text` that say something, joined with " | ": one line for a WARN.
std::string one_line(std::string_view text);

// ---- options ----------------------------------------------------------------------------

struct Options {
  std::chrono::milliseconds budget = k_default_budget;
  int timeout_s = k_default_drain_timeout_s;
  int stable_polls = k_default_stable_polls;
};

// ---- running sccache: session_sccache.cpp ------------------------------------------------

struct Version {
  int major = 0;
  int minor = 0;
  int patch = 0;
  auto operator<=>(const Version&) const = default;
};

// The server address moved off the fixed TCP port with SCCACHE_SERVER_UDS in 0.10.0 (#2206);
// multi-level chains came in 0.15.0; --show-stats stopped spawning a server in 0.7.7.
inline constexpr Version k_uds_since{0, 10, 0};
inline constexpr Version k_multilevel_since{0, 15, 0};
inline constexpr Version k_show_stats_quiet_since{0, 7, 7};

/// "sccache 0.4.0-pre.6" -> 0.4.0.
std::optional<Version> parse_version(std::string_view text);

struct CommandResult {
  std::string spawn_error; // set when it never ran
  bool timed_out = false;
  int exit_code = -1;
  std::string out;
  std::string err;

  bool ok() const { return spawn_error.empty() && !timed_out && exit_code == 0; }
  std::string what() const {
    if (!spawn_error.empty()) {
      return spawn_error;
    }
    std::string said = one_line(out + "\n" + err);
    std::string how =
        timed_out ? "no answer within " + std::to_string(k_sccache_timeout.count() / 1000) + " s"
                  : "exit " + std::to_string(exit_code);
    return said.empty() ? how : said + " (" + how + ")";
  }
};

/// `env` as exec takes it: one `NAME=value` each.
std::vector<std::string> environment_strings(const Environment& env);
/// Run `program` with exactly `env`. Output goes to memory files rather than pipes: a server
/// that sccache forks keeps whatever descriptors it inherited until it daemonizes, and a pipe
/// would then never see its end. That is also why this is not kiln_base's run_process: it
/// reads a pipe to its end and kills the process group the command leaves behind, and it
/// merges stdout and stderr, which sccache's answers need apart.
CommandResult run_command(const std::string& program, const std::vector<std::string>& args,
                          const Environment& env, std::chrono::milliseconds timeout);
void apply_changes(Environment& env, const std::vector<EnvironmentChange>& changes);

// ---- the session folder: session_folder.cpp ----------------------------------------------

/// What `start` leaves in $KILN_CC_SESSION/session.json for the other verbs.
struct Session {
  fs::path dir;
  std::string sccache; // empty: none on PATH
  std::string version_text;
  Version version;
  /// absent (no sccache), failed (it did not start), running, stopped, lost (it stopped
  /// answering before stop)
  std::string server = "absent";
  /// The variables `start` printed, in order, the private server address among them: the
  /// other verbs apply them to their own sccache calls too, so a verb run outside the shell
  /// that evaluated them still reaches the right server with the same configuration.
  std::vector<EnvironmentChange> changes;
  std::string address_name;
  std::string address_value;
  std::vector<std::pair<std::string, bool>> levels; // the chain kept, level 0 first; read-only
  bool level0_failures_start_uploads = false;
  std::string error_log;
  /// Where ccache logs each compile's outcome (CCACHE_STATSLOG), and how many bytes of it were
  /// there before the step: ccache's hits and misses for this step alone, whoever else shares
  /// its cache folder.
  std::string ccache_stats_log;
  long ccache_stats_offset = 0;
};

bool save(const Session& session);
/// The session `start` left in `dir`; nullopt when there is none.
std::optional<Session> load_session_at(const fs::path& dir);
/// The session `start` left, from $KILN_CC_SESSION. Throws UsageError: a verb run without a
/// session is a mistake in the build script, not a cache failure.
Session load_session(const Environment& env);
/// The environment the session's sccache calls run with.
Environment session_environment(const Session& session);
std::optional<SccacheStats> parse_stats_file(const fs::path& path);
/// The server's stats now, and their raw JSON; nullopt with `failure` saying why.
std::optional<std::pair<SccacheStats, std::string>> query_stats(const Session& session,
                                                                std::string& failure);
SccacheStats baseline_of(const Session& session);

// ---- probe and start: session_start.cpp ---------------------------------------------------

int run_probe(const Options& options);
bool server_running(const Session& session);
/// Whether the session's server accepts connections: a connect, no sccache process and no
/// request (so it keeps no idle server alive).
bool answers(const Session& session);
/// Start a session in a watchdog that stops its sccache server once `owner` has ended. Returns
/// the session folder, or "" when there is none.
std::string start_watched(const Options& options, pid_t owner);
int run_start(const Options& options);

// ---- drain, stats, stop: session_end.cpp --------------------------------------------------

/// Wait for the slower levels (see the usage). `cancel` cuts the wait short.
void drain(Session& session, const Options& options, const CancelToken& cancel);
/// This step's numbers since `start`, as the stats line carries them.
CompileStats step_stats(Session& session);
/// Save the final stats, stop the server and print its error log's tail (see the usage).
void stop(Session& session);

// ---- run: session_run.cpp -----------------------------------------------------------------

/// `run`: the whole compile step in one session that ends whatever the command does.
int run_with_session(const Options& options, const std::vector<std::string>& command);

} // namespace kiln::cc::session_control
