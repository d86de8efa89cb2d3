#include "compilecache/session.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "compilecache/child_process.h"
#include "compilecache/endpoint_probe.h"
#include "compilecache/multilevel.h"
#include "compilecache/sccache_stats.h"
#include "compilecache/server_address.h"
#include "compilecache/session_dir.h"
#include "compilecache/stats_line.h"
#include "compilecache/watchdog.h"
#include "util/cancel.h"
#include "util/fs.h"
#include "util/loopback.h"
#include "util/process.h"
#include "util/strings.h"

namespace kiln::cc {

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// `env` as exec takes it: one `NAME=value` each.
std::vector<std::string> environment_strings(const Environment& env) {
  std::vector<std::string> strings;
  for (const auto& [name, value] : env) {
    strings.push_back(name + "=" + value);
  }
  return strings;
}

constexpr int k_usage_exit = 2;
constexpr std::chrono::milliseconds k_default_budget = 2000ms;
constexpr int k_default_drain_timeout_s = 600;
// A minute in which no level's counters move: one large object on a slow link can take that
// long, and the timeout bounds the wait anyway.
constexpr int k_default_stable_polls = 60;
constexpr std::chrono::milliseconds k_poll_interval = 1000ms;
// sccache's own client gives up on a starting server after 10 s; this only catches a hang.
constexpr std::chrono::milliseconds k_sccache_timeout = 30000ms;
constexpr size_t k_error_log_tail_lines = 20;
// The idle timeout `start` gives the server unless the step set one: how long a server can
// outlive a watchdog that was itself killed. While the watchdog lives, it keeps the server
// from idling out during a long link and stops it once the step's shell is gone.
constexpr int k_idle_timeout_s = 120;
// sccache's own default, for a SCCACHE_IDLE_TIMEOUT it cannot read.
constexpr int k_sccache_default_idle_timeout_s = 600;
// How long a server asked to stop may take to go before the watchdog kills it.
constexpr std::chrono::milliseconds k_stop_grace = 10000ms;

constexpr const char* k_session_file = "session.json";
constexpr const char* k_baseline_file = "baseline.json";
constexpr const char* k_final_file = "final.json";
constexpr const char* k_ccache_stats_log = "ccache-stats.log";

constexpr const char* k_usage =
    "usage: kiln-cc session <verb> [options]\n"
    "  probe  [--budget-ms N]   connect to every remote sccache level, report which answer\n"
    "  start  [--budget-ms N]   drop unreachable levels, start a private sccache server;\n"
    "                           use as: eval \"$(kiln-cc session start)\"\n"
    "  drain  [--timeout-s N] [--stable-polls N]\n"
    "                           wait until the slower levels hold what level 0 wrote\n"
    "  stats                    print this step's [kiln-cc:stats] line\n"
    "  stop                     print the final stats to stderr and stop the server\n"
    "  run [--budget-ms N] [--timeout-s N] [--stable-polls N] -- CMD [ARGS...]\n"
    "                           start, run CMD in the session, then drain, stats and stop,\n"
    "                           whatever CMD does; exits as CMD did\n"
    "A session ends with the shell that ran start (or with run): a watchdog stops the server\n"
    "when that process is gone, however it ended.\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// stdio, not iostreams: <iostream>'s static initialisation would run on every compile, since
// the launcher shares this binary.
void print(std::FILE* stream, const std::string& text) {
  std::fputs(text.c_str(), stream);
}

void warn(const std::string& message) {
  print(stderr, "kiln-cc: WARN: " + message + "\n");
}
void note(const std::string& message) {
  print(stderr, "kiln-cc: " + message + "\n");
}

/// The lines of `text` that say something.
std::vector<std::string> said_lines(std::string_view text) {
  std::vector<std::string> lines;
  for (const std::string& line : split(text, '\n')) {
    if (!trim(line).empty()) {
      lines.emplace_back(trim(line));
    }
  }
  return lines;
}

std::string first_line(std::string_view text) {
  std::vector<std::string> lines = said_lines(text);
  return lines.empty() ? "" : lines.front();
}

/// The lines of `text` that say something, joined with " | ": one line for a WARN.
std::string one_line(std::string_view text) {
  return join(said_lines(text), " | ");
}

// ---- options ----------------------------------------------------------------------------

struct Options {
  std::chrono::milliseconds budget = k_default_budget;
  int timeout_s = k_default_drain_timeout_s;
  int stable_polls = k_default_stable_polls;
};

long parse_count(const std::string& option, const std::string& text, long low, long high) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      })) {
    throw UsageError(option + " takes a whole number, not '" + text + "'");
  }
  long value = text.size() > 9 ? high + 1 : std::stol(text);
  if (value < low || value > high) {
    throw UsageError(option + " must be between " + std::to_string(low) + " and " +
                     std::to_string(high));
  }
  return value;
}

Options parse_options(const std::string& verb, const std::vector<std::string>& args,
                      const std::set<std::string>& allowed) {
  Options options;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::optional<std::string> value;
    if (auto eq = name.find('='); name.starts_with("--") && eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (!allowed.contains(name)) {
      throw UsageError(name.starts_with("-") ? "'" + verb + "' has no option " + name
                                             : "'" + verb + "' takes no argument '" + name + "'");
    }
    if (!value) {
      if (i + 1 >= args.size()) {
        throw UsageError(name + " needs a value");
      }
      value = args[++i];
    }
    if (name == "--budget-ms") {
      options.budget = std::chrono::milliseconds(parse_count(name, *value, 1, 600000));
    } else if (name == "--timeout-s") {
      options.timeout_s = static_cast<int>(parse_count(name, *value, 0, 86400));
    } else if (name == "--stable-polls") {
      options.stable_polls = static_cast<int>(parse_count(name, *value, 1, 100000));
    }
  }
  return options;
}

// ---- running sccache ----------------------------------------------------------------------

struct Version {
  int major = 0;
  int minor = 0;
  int patch = 0;
  auto operator<=>(const Version&) const = default;
};

// The server address moved off the fixed TCP port with SCCACHE_SERVER_UDS in 0.10.0 (#2206);
// multi-level chains came in 0.15.0; --show-stats stopped spawning a server in 0.7.7.
constexpr Version k_uds_since{0, 10, 0};
constexpr Version k_multilevel_since{0, 15, 0};
constexpr Version k_show_stats_quiet_since{0, 7, 7};

/// "sccache 0.4.0-pre.6" -> 0.4.0.
std::optional<Version> parse_version(std::string_view text) {
  auto start = text.find_first_of("0123456789");
  if (start == std::string_view::npos) {
    return std::nullopt;
  }
  Version version;
  int* parts[] = {&version.major, &version.minor, &version.patch};
  size_t pos = start;
  for (int i = 0; i < 3; ++i) {
    if (pos >= text.size() || !std::isdigit(static_cast<unsigned char>(text[pos]))) {
      return i >= 2 ? std::optional(version) : std::nullopt;
    }
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      *parts[i] = *parts[i] * 10 + (text[pos] - '0');
      ++pos;
    }
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
    } else {
      return i >= 1 ? std::optional(version) : std::nullopt;
    }
  }
  return version;
}

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

std::string read_all(int fd) {
  std::string text;
  char buffer[8192];
  off_t offset = 0;
  ssize_t n;
  while ((n = ::pread(fd, buffer, sizeof buffer, offset)) > 0) {
    text.append(buffer, static_cast<size_t>(n));
    offset += n;
  }
  return text;
}

/// Run `program` with exactly `env`. Output goes to memory files rather than pipes: a server
/// that sccache forks keeps whatever descriptors it inherited until it daemonizes, and a pipe
/// would then never see its end. That is also why this is not kiln_base's run_process: it
/// reads a pipe to its end and kills the process group the command leaves behind, and it
/// merges stdout and stderr, which sccache's answers need apart.
CommandResult run_command(const std::string& program, const std::vector<std::string>& args,
                          const Environment& env, std::chrono::milliseconds timeout) {
  CommandResult result;
  int out_fd = ::memfd_create("kiln-cc-out", MFD_CLOEXEC);
  int err_fd = ::memfd_create("kiln-cc-err", MFD_CLOEXEC);
  if (out_fd < 0 || err_fd < 0) {
    result.spawn_error = std::string("memfd_create: ") + std::strerror(errno);
    if (out_fd >= 0) {
      ::close(out_fd);
    }
    if (err_fd >= 0) {
      ::close(err_fd);
    }
    return result;
  }
  std::vector<std::string> argv_strings = {program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv = c_strings(argv_strings);
  std::vector<std::string> env_strings = environment_strings(env);
  std::vector<char*> envp = c_strings(env_strings);

  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  ::posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  // sccache, and the server it starts, begin with the signal state of a fresh process: the
  // watchdog runs this with signals blocked and SIGPIPE ignored.
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int signal : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) {
    sigaddset(&defaults, signal);
  }
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, program.c_str(), &actions, &attr, argv.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    result.spawn_error = "cannot run " + program + ": " + std::strerror(rc);
  } else {
    const auto deadline = Clock::now() + timeout;
    int status = 0;
    while (true) {
      pid_t done = ::waitpid(pid, &status, WNOHANG);
      if (done == pid || (done < 0 && errno != EINTR)) {
        break;
      }
      if (Clock::now() >= deadline) {
        result.timed_out = true;
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    if (!result.timed_out) {
      result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    result.out = read_all(out_fd);
    result.err = read_all(err_fd);
  }
  ::close(out_fd);
  ::close(err_fd);
  return result;
}

void apply_changes(Environment& env, const std::vector<EnvironmentChange>& changes) {
  for (const EnvironmentChange& change : changes) {
    if (change.value) {
      env[change.name] = *change.value;
    } else {
      env.erase(change.name);
    }
  }
}

// ---- the session folder ---------------------------------------------------------------------

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

bool save(const Session& session) {
  nlohmann::ordered_json doc;
  doc["sccache"] = session.sccache;
  doc["version"] = session.version_text;
  doc["server"] = session.server;
  doc["address"] = {{"name", session.address_name}, {"value", session.address_value}};
  auto changes = nlohmann::ordered_json::array();
  for (const EnvironmentChange& change : session.changes) {
    changes.push_back({{"name", change.name},
                       {"value", change.value ? nlohmann::ordered_json(*change.value)
                                              : nlohmann::ordered_json()}});
  }
  doc["environment"] = changes;
  auto levels = nlohmann::ordered_json::array();
  for (const auto& [name, read_only] : session.levels) {
    levels.push_back({{"name", name}, {"read_only", read_only}});
  }
  doc["levels"] = levels;
  doc["level0_failures_start_uploads"] = session.level0_failures_start_uploads;
  doc["error_log"] = session.error_log;
  doc["ccache_stats_log"] = session.ccache_stats_log;
  doc["ccache_stats_offset"] = session.ccache_stats_offset;
  return write_file_atomic(session.dir / k_session_file, doc.dump(2) + "\n").has_value();
}

/// The session `start` left in `dir`; nullopt when there is none.
std::optional<Session> load_session_at(const fs::path& dir) {
  Session session;
  session.dir = dir;
  auto text = read_file(session.dir / k_session_file);
  auto doc = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  if (!doc.is_object()) {
    return std::nullopt;
  }
  session.sccache = doc.value("sccache", "");
  session.version_text = doc.value("version", "");
  session.version = parse_version(session.version_text).value_or(Version{});
  session.server = doc.value("server", "absent");
  if (auto address = doc.find("address"); address != doc.end() && address->is_object()) {
    session.address_name = address->value("name", "");
    session.address_value = address->value("value", "");
  }
  for (const auto& change : doc.value("environment", nlohmann::json::array())) {
    auto value = change.find("value");
    session.changes.push_back(
        {change.value("name", ""), value != change.end() && value->is_string()
                                       ? std::optional(value->get<std::string>())
                                       : std::nullopt});
  }
  for (const auto& level : doc.value("levels", nlohmann::json::array())) {
    session.levels.emplace_back(level.value("name", ""), level.value("read_only", false));
  }
  session.level0_failures_start_uploads = doc.value("level0_failures_start_uploads", false);
  session.error_log = doc.value("error_log", "");
  session.ccache_stats_log = doc.value("ccache_stats_log", "");
  session.ccache_stats_offset = doc.value("ccache_stats_offset", 0L);
  return session;
}

/// The session `start` left, from $KILN_CC_SESSION. Throws UsageError: a verb run without a
/// session is a mistake in the build script, not a cache failure.
Session load_session(const Environment& env) {
  auto it = env.find(k_session_env);
  if (it == env.end() || it->second.empty()) {
    throw UsageError(std::string(k_session_env) +
                     " is not set: run eval \"$(kiln-cc session start)\" first, in the same "
                     "shell");
  }
  auto session = load_session_at(it->second);
  if (!session) {
    throw UsageError(std::string(k_session_env) + "=" + it->second +
                     " is not a kiln-cc session folder (no readable " + k_session_file + ")");
  }
  return *session;
}

/// The environment the session's sccache calls run with.
Environment session_environment(const Session& session) {
  Environment env = environment_of_process();
  apply_changes(env, session.changes);
  if (session.version < k_show_stats_quiet_since) {
    // An sccache this old starts a server for --show-stats when none answers. Should the
    // step's server be gone, such a stray one must not outlive the step on the exported
    // SCCACHE_IDLE_TIMEOUT=0.
    env["SCCACHE_IDLE_TIMEOUT"] = "10";
  }
  return env;
}

std::optional<SccacheStats> parse_stats_file(const fs::path& path) {
  auto text = read_file(path);
  std::string error;
  return text ? parse_sccache_stats(*text, error) : std::nullopt;
}

/// The server's stats now, and their raw JSON; nullopt with `failure` saying why.
std::optional<std::pair<SccacheStats, std::string>> query_stats(const Session& session,
                                                                std::string& failure) {
  CommandResult r = run_command(session.sccache, {"--show-stats", "--stats-format", "json"},
                                session_environment(session), k_sccache_timeout);
  if (!r.ok()) {
    failure = "sccache --show-stats failed: " + r.what();
    return std::nullopt;
  }
  std::string error;
  auto stats = parse_sccache_stats(r.out, error);
  if (!stats) {
    failure = "sccache --show-stats printed no stats JSON (" + error + "): " + first_line(r.out);
    return std::nullopt;
  }
  return std::pair(*stats, r.out);
}

SccacheStats baseline_of(const Session& session) {
  return parse_stats_file(session.dir / k_baseline_file).value_or(SccacheStats{});
}

// ---- probe ------------------------------------------------------------------------------------

struct LevelProbe {
  CacheLevel level;
  std::optional<ProbeResult> result; // nullopt: nothing to probe
};

std::string describe_endpoints(const CacheLevel& level, const Environment& env) {
  std::string out;
  std::set<std::string> seen;
  for (const LevelEndpoint& endpoint : level.endpoints) {
    if (!seen.insert(endpoint.variable).second) {
      continue;
    }
    auto it = env.find(endpoint.variable);
    std::string value = it == env.end() ? endpoint.url : it->second;
    out += (out.empty() ? "" : " ") + endpoint.variable + "=" + redact_url(value);
  }
  return out;
}

/// Probe every level that has an endpoint, all at once: the budget is the step's, not each
/// level's.
std::vector<LevelProbe> probe_levels(const std::vector<CacheLevel>& levels,
                                     std::chrono::milliseconds budget) {
  std::vector<LevelProbe> probes;
  for (const CacheLevel& level : levels) {
    probes.push_back({level, std::nullopt});
  }
  std::vector<std::thread> threads;
  for (LevelProbe& probe : probes) {
    if (probe.level.endpoints.empty()) {
      continue;
    }
    std::vector<Endpoint> endpoints;
    std::string not_urls;
    for (const LevelEndpoint& setting : probe.level.endpoints) {
      if (auto endpoint = parse_endpoint(setting.url, setting.default_scheme)) {
        endpoints.push_back(*endpoint);
      } else {
        not_urls += (not_urls.empty() ? "" : ", ") + redact_url(setting.url);
      }
    }
    if (endpoints.empty()) {
      probe.result = ProbeResult{false, "not a URL with a host: " + not_urls, 0ms};
      continue;
    }
    threads.emplace_back([&probe, endpoints, budget] {
      ProbeOptions options;
      options.budget = budget;
      probe.result = probe_endpoints(endpoints, options);
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  return probes;
}

int run_probe(const Options& options) {
  Environment env = environment_of_process();
  std::vector<LevelProbe> probes = probe_levels(configured_levels(env), options.budget);
  if (probes.empty()) {
    print(stdout, "no sccache cache level beyond the local disk is configured\n");
    return 0;
  }
  for (const LevelProbe& probe : probes) {
    std::string line = probe.level.name + ": ";
    if (!probe.result) {
      line += probe.level.name == "disk" ? "local, not probed" : "not probed: no endpoint variable";
    } else {
      line += std::string(probe.result->reachable ? "reachable: " : "unreachable: ") +
              describe_endpoints(probe.level, env) + " (" + probe.result->detail + ")";
    }
    print(stdout, line + "\n");
  }
  return 0;
}

// ---- start ------------------------------------------------------------------------------------

/// The level a refusing server's message names: by endpoint host first, then by name (or the
/// opendal scheme the server prints: azblob, ghac) at the start of a word.
std::optional<std::string> level_named_in(const std::string& message,
                                          const std::vector<CacheLevel>& levels) {
  std::string text = lower(message);
  for (const CacheLevel& level : levels) {
    for (const LevelEndpoint& setting : level.endpoints) {
      auto endpoint = parse_endpoint(setting.url, setting.default_scheme);
      if (endpoint && text.find(lower(endpoint->host)) != std::string::npos) {
        return level.name;
      }
    }
  }
  for (const CacheLevel& level : levels) {
    std::vector<std::string> words = {level.name};
    if (level.name == "azure") {
      words.push_back("azblob");
    } else if (level.name == "gha") {
      words.push_back("ghac");
    }
    for (const std::string& word : words) {
      for (size_t pos = text.find(word); pos != std::string::npos; pos = text.find(word, pos + 1)) {
        if (pos == 0 || !std::isalnum(static_cast<unsigned char>(text[pos - 1]))) {
          return level.name;
        }
      }
    }
  }
  return std::nullopt;
}

/// A server address no other build step shares: the fixed default port is host-wide, and
/// concurrent steps then reach each other's servers, which cannot see their files.
std::vector<EnvironmentChange> private_address(const Session& session, int attempt,
                                               const Environment& env) {
  if (session.version >= k_uds_since) {
    fs::path socket = session.dir / ("sccache-" + std::to_string(attempt) + ".sock");
    if (socket.string().size() < sizeof(sockaddr_un::sun_path)) {
      return {{"SCCACHE_SERVER_UDS", socket.string()}};
    }
  }
  std::vector<EnvironmentChange> changes;
  if (env.contains("SCCACHE_SERVER_UDS")) {
    // A socket path set for every step would take precedence over the private port.
    changes.push_back({"SCCACHE_SERVER_UDS", std::nullopt});
  }
  changes.push_back({"SCCACHE_SERVER_PORT", std::to_string(free_loopback_port())});
  return changes;
}

void truncate_error_log(const std::string& path) {
  // The log only ever grows, often on a mount shared by every build: what a previous step
  // wrote there would read as this step's failures.
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
  } else if (errno != ENOENT) {
    warn("cannot truncate SCCACHE_ERROR_LOG=" + path + ": " + std::strerror(errno));
  }
}

/// The changes in the order first made, each with its final value; an unset of a variable
/// the caller never had is no change.
std::vector<EnvironmentChange> net_changes(const std::vector<EnvironmentChange>& changes,
                                           const Environment& original) {
  std::vector<EnvironmentChange> out;
  for (const EnvironmentChange& change : changes) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const EnvironmentChange& c) { return c.name == change.name; });
    if (it != out.end()) {
      it->value = change.value;
    } else {
      out.push_back(change);
    }
  }
  std::erase_if(out, [&](const EnvironmentChange& c) {
    auto was = original.find(c.name);
    return (!c.value && was == original.end()) ||
           (c.value && was != original.end() && was->second == *c.value);
  });
  return out;
}

/// Everything `start` does but print the exports: the session folder, the levels kept, the
/// server. A session without a folder when none could be made.
Session start_session(const Options& options) {
  const Environment original = environment_of_process();
  Environment env = original;
  Session session;

  auto tmp = env.find("TMPDIR");
  std::string base = tmp != env.end() && !tmp->second.empty() ? tmp->second : "/tmp";
  std::string dir_template = (fs::path(base) / "kiln-cc.XXXXXX").string();
  if (::mkdtemp(dir_template.data()) == nullptr) {
    warn("cannot create a session folder in " + base + ": " + std::strerror(errno) +
         "; compiles run without a kiln-cc session");
    return session;
  }
  session.dir = dir_template;
  write_file_atomic(session.dir / k_launch_log, "");
  std::vector<EnvironmentChange> changes = {{k_session_env, session.dir.string()}};
  if (auto log = env.find("CCACHE_STATSLOG"); log != env.end() && !log->second.empty()) {
    // The step's own log, kept: this step's part of it is what was added after this point.
    std::error_code ec;
    auto size = fs::file_size(log->second, ec);
    session.ccache_stats_log = log->second;
    session.ccache_stats_offset = ec ? 0 : static_cast<long>(size);
  } else {
    session.ccache_stats_log = (session.dir / k_ccache_stats_log).string();
    changes.push_back({"CCACHE_STATSLOG", session.ccache_stats_log});
  }

  auto finish = [&]() {
    session.changes = net_changes(changes, original);
    if (!save(session)) {
      warn("cannot write " + (session.dir / k_session_file).string());
    }
    return session;
  };

  auto path = env.find("PATH");
  std::string sccache = find_on_path("sccache", path == env.end() ? k_default_path : path->second);
  if (sccache.empty()) {
    warn("no sccache on PATH: the compiles of this step go to ccache or run uncached");
    return finish();
  }
  session.sccache = sccache;
  CommandResult version = run_command(session.sccache, {"--version"}, env, k_sccache_timeout);
  session.version_text = first_line(version.out);
  auto parsed = version.ok() ? parse_version(session.version_text) : std::nullopt;
  if (!parsed) {
    warn("cannot tell the version of " + session.sccache + " (" + version.what() +
         "): assuming one without private sockets or multi-level chains");
  }
  session.version = parsed.value_or(Version{});

  bool chain_honoured = session.version >= k_multilevel_since;
  if (!chain_honoured && !chain_entries(env).empty()) {
    warn(std::string(k_chain_variable) + " is set, but " + session.version_text +
         " predates multi-level caches (0.15.0) and ignores it: it uses one level only");
  }
  std::vector<CacheLevel> levels = configured_levels(env, chain_honoured);
  for (const LevelProbe& probe : probe_levels(levels, options.budget)) {
    if (!probe.result || probe.result->reachable) {
      continue;
    }
    std::string endpoints = describe_endpoints(probe.level, env);
    auto dropped = drop_level(env, probe.level.name);
    changes.insert(changes.end(), dropped.begin(), dropped.end());
    std::erase_if(levels, [&](const CacheLevel& l) { return l.name == probe.level.name; });
    warn("sccache level " + probe.level.name + " is unreachable: " + endpoints + " (" +
         probe.result->detail + "); dropped for this step, which builds without it");
  }

  if (auto log = env.find("SCCACHE_ERROR_LOG"); log != env.end() && !log->second.empty()) {
    session.error_log = log->second;
    truncate_error_log(session.error_log);
  }
  if (!env.contains("SCCACHE_IDLE_TIMEOUT")) {
    // Bounded, never 0 (no idle timeout): should the watchdog be killed too, the server still
    // goes. The watchdog keeps it alive through a long link meanwhile.
    changes.push_back({"SCCACHE_IDLE_TIMEOUT", std::to_string(k_idle_timeout_s)});
    env["SCCACHE_IDLE_TIMEOUT"] = std::to_string(k_idle_timeout_s);
  }

  int address_retries = 0;
  for (int attempt = 0;; ++attempt) {
    std::vector<EnvironmentChange> address = private_address(session, attempt, env);
    apply_changes(env, address);
    changes.insert(changes.end(), address.begin(), address.end());
    session.address_name = address.back().name;
    session.address_value = *address.back().value;
    CommandResult r = run_command(session.sccache, {"--start-server"}, env, k_sccache_timeout);
    if (r.ok()) {
      session.server = "running";
      break;
    }
    // A server still checking its storage may bind the address later; stop it there.
    run_command(session.sccache, {"--stop-server"}, env, 5000ms);
    std::string said = r.what();
    if (lower(said).find("address in use") != std::string::npos && address_retries++ < 2) {
      continue;
    }
    auto culprit = level_named_in(said, levels);
    if (!culprit) {
      auto remote = std::find_if(levels.rbegin(), levels.rend(),
                                 [](const CacheLevel& l) { return l.name != "disk"; });
      if (remote != levels.rend()) {
        culprit = remote->name;
      }
    }
    if (!culprit) {
      session.server = "failed";
      warn("the sccache server did not start (" + said +
           "); the compiles of this step go to ccache or run uncached");
      break;
    }
    auto dropped = drop_level(env, *culprit);
    changes.insert(changes.end(), dropped.begin(), dropped.end());
    std::erase_if(levels, [&](const CacheLevel& l) { return l.name == *culprit; });
    warn("sccache would not start with level " + *culprit + " (" + said +
         "); dropped it for this step and started again without it");
  }

  for (const std::string& name : chain_entries(env)) {
    session.levels.emplace_back(name, level_read_only(name, env));
  }
  session.level0_failures_start_uploads = level0_failures_start_uploads(env);
  if (session.server == "running") {
    // Saved before the baseline so the stats query runs with the session's environment.
    session.changes = net_changes(changes, original);
    std::string failure;
    if (auto baseline = query_stats(session, failure)) {
      write_file_atomic(session.dir / k_baseline_file, baseline->second);
    } else {
      warn(failure);
    }
    note(session.version_text + " serves this step on " + session.address_name + "=" +
         session.address_value);
  }
  return finish();
}

bool server_running(const Session& session) {
  return session.server == "running" && !session.sccache.empty();
}

/// Whether the session's server accepts connections: a connect, no sccache process and no
/// request (so it keeps no idle server alive).
bool answers(const Session& session) {
  bool uds = session.address_name == "SCCACHE_SERVER_UDS";
  return server_answers(sccache_server_address(uds ? session.address_value.c_str() : nullptr,
                                               uds ? nullptr : session.address_value.c_str()));
}

/// How often the watchdog sends the server a request, so that it does not idle out while the
/// step's shell lives: four times per idle timeout. Zero when the server never idles out.
std::chrono::milliseconds keep_alive_interval(const Environment& env) {
  long idle_s = k_idle_timeout_s;
  if (auto it = env.find("SCCACHE_IDLE_TIMEOUT"); it != env.end()) {
    char* end = nullptr;
    long value = std::strtol(it->second.c_str(), &end, 10);
    idle_s = !it->second.empty() && *end == '\0' && value >= 0 ? value
                                                               : k_sccache_default_idle_timeout_s;
  }
  idle_s = std::min(idle_s, 24L * 3600); // a request a few hours apart keeps any server alive
  return idle_s == 0 ? 0ms : std::max<std::chrono::milliseconds>(1000ms, idle_s * 1000ms / 4);
}

/// Start a session in a watchdog that stops its sccache server once `owner` has ended. Returns
/// the session folder, or "" when there is none.
std::string start_watched(const Options& options, pid_t owner) {
  Session session; // filled in the watchdog, where the plan's steps run
  WatchdogPlan plan;
  plan.start = [&] {
    session = start_session(options);
    return session.dir.string();
  };
  plan.keep_alive = [&] {
    if (server_running(session) && answers(session)) {
      run_command(session.sccache, {"--show-stats", "--stats-format", "json"},
                  session_environment(session), k_sccache_timeout);
    }
  };
  plan.keep_alive_every = keep_alive_interval(environment_of_process());
  plan.stop = [&] {
    if (!session.sccache.empty()) {
      run_command(session.sccache, {"--stop-server"}, session_environment(session),
                  k_sccache_timeout);
    }
  };
  plan.stop_grace = k_stop_grace;
  std::string error;
  std::string dir = run_watched(owner, plan, error);
  if (!error.empty()) {
    warn("no watchdog for this session (" + error +
         "): should the step end before kiln-cc session stop, its sccache server idles out "
         "instead");
  }
  return dir;
}

int run_start(const Options& options) {
  std::string dir = start_watched(options, calling_shell());
  if (dir.empty()) {
    return 0;
  }
  std::optional<Session> session = load_session_at(dir);
  if (!session) {
    warn("the session folder " + dir + " holds no readable " + k_session_file +
         ": compiles run without a kiln-cc session");
    return 0;
  }
  for (const EnvironmentChange& change : session->changes) {
    if (change.value) {
      print(stdout, "export " + change.name + "=" + shell_quote(*change.value) + "\n");
    } else {
      print(stdout, "unset " + change.name + "\n");
    }
  }
  return 0;
}

// ---- drain, stats, stop -----------------------------------------------------------------

/// The running server's stats now, and their raw JSON; nullopt after a WARN. A server that no
/// longer answers makes the session `lost` (said once, and kept in its folder): its counters
/// went with it, and no verb asks it again.
std::optional<std::pair<SccacheStats, std::string>> server_stats(Session& session) {
  // An sccache before 0.7.7 would start a server of its own to answer --show-stats, one whose
  // counters would pass for the step's: its address is tried first.
  const bool starts_servers = session.version < k_show_stats_quiet_since;
  std::string failure;
  std::optional<std::pair<SccacheStats, std::string>> stats;
  if (!starts_servers || answers(session)) {
    stats = query_stats(session, failure);
  }
  if (stats) {
    return stats;
  }
  if (starts_servers || !answers(session)) {
    session.server = "lost";
    save(session);
    warn("the sccache server of this step is gone (nothing answers at " + session.address_name +
         "=" + session.address_value +
         "): the compiles since went to ccache or ran uncached, and its counters are lost");
  } else {
    warn(failure);
  }
  return std::nullopt;
}

/// Wait for the slower levels (see the usage). `cancel` cuts the wait short.
void drain(Session& session, const Options& options, const CancelToken& cancel) {
  if (!server_running(session)) {
    note("drain: no sccache server is running in this session: nothing to drain");
    return;
  }
  const SccacheStats baseline = baseline_of(session);
  auto read_only = [&](size_t i) { return i < session.levels.size() && session.levels[i].second; };
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(options.timeout_s);
  std::optional<std::vector<long>> last_counters;
  int still_polls = 0;
  while (true) {
    auto stats = server_stats(session);
    if (!stats) {
      note("drain: stopped waiting, the uploads left are unknown");
      return;
    }
    SccacheStats since = stats_since(stats->first, baseline);
    std::vector<UploadBacklog> backlog =
        upload_backlog(since, session.level0_failures_start_uploads, read_only);
    auto waited = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start);
    if (backlog.empty()) {
      note(since.levels.size() < 2 ? "drain: no slower cache level: nothing to drain"
                                   : "drain: no slower cache level takes writes: nothing to drain");
      return;
    }
    long left = 0;
    for (const UploadBacklog& level : backlog) {
      left += level.left();
    }
    if (left == 0) {
      note("drain: every upload done after " + std::to_string(waited.count()) + " s (" +
           describe_backlog(backlog) + ")");
      return;
    }
    std::vector<long> counters;
    for (const LevelCounters& level : since.levels) {
      counters.push_back(level.writes);
      counters.push_back(level.write_failures);
    }
    still_polls = last_counters && *last_counters == counters ? still_polls + 1 : 0;
    last_counters = counters;
    std::string report = std::to_string(left) + " uploads left (" + describe_backlog(backlog) +
                         "); a later build uploads them again";
    if (still_polls >= options.stable_polls) {
      warn("drain: the counters stopped moving for " + std::to_string(still_polls) +
           " polls after " + std::to_string(waited.count()) + " s: " + report);
      return;
    }
    auto now = Clock::now();
    if (now >= deadline) {
      warn("drain: gave up after " + std::to_string(waited.count()) + " s: " + report);
      return;
    }
    // The last poll lands on the deadline, so a drain that finishes just then counts.
    if (!cancel.sleep_for(std::chrono::duration_cast<std::chrono::milliseconds>(
            std::min<Clock::duration>(k_poll_interval, deadline - now)))) {
      warn("drain: interrupted after " + std::to_string(waited.count()) + " s: " + report);
      return;
    }
  }
}

/// Which way the compiles kiln-cc launched went, from the launch log (session_dir.h).
struct LaunchCounts {
  long sccache = 0;
  long ccache = 0;
  long direct = 0; // the bare compiler, bypasses included
  long bypasses = 0;
};

LaunchCounts count_launches(const fs::path& file) {
  LaunchCounts counts;
  for (const std::string& line : split(read_file(file).value_or(""), '\n')) {
    std::vector<std::string> fields = split(line, ' ');
    if (fields.size() != 2) {
      continue;
    }
    const std::string& cache = fields[0];
    bool bypass = fields[1] == "bypass";
    counts.sccache += cache == "sccache" && !bypass ? 1 : 0;
    counts.ccache += cache == "ccache" ? 1 : 0;
    counts.direct += cache == "direct" || bypass ? 1 : 0;
    counts.bypasses += bypass ? 1 : 0;
  }
  return counts;
}

/// ccache's hits and misses in its stats log after `offset`: one "# <input>" line per
/// compile, then one line per counter it raised (ccache's StatsLog; the names are its
/// statistics' ids, as `ccache --print-stats` prints them).
std::pair<long, long> ccache_hits_and_misses(const std::string& log, long offset) {
  // A stream from the offset, not read_file: a log the step set itself may hold months of
  // other builds before this step's lines.
  std::ifstream in(log, std::ios::binary);
  if (!in || !in.seekg(offset)) {
    return {0, 0};
  }
  long hits = 0;
  long misses = 0;
  for (std::string line; std::getline(in, line);) {
    hits += line == "direct_cache_hit" || line == "preprocessed_cache_hit" ? 1 : 0;
    misses += line == "cache_miss" ? 1 : 0;
  }
  return {hits, misses};
}

/// This step's numbers since `start`, as the stats line carries them.
CompileStats step_stats(Session& session) {
  CompileStats line;
  std::optional<SccacheStats> now;
  if (server_running(session)) {
    if (auto stats = server_stats(session)) {
      now = stats->first;
    }
  } else if (session.server == "stopped") {
    now = parse_stats_file(session.dir / k_final_file);
  }
  line.sccache = session.server == "running" || session.server == "stopped" ? SccacheServer::up
                 : session.server == "lost"                                 ? SccacheServer::lost
                 : session.server == "failed"                               ? SccacheServer::failed
                                                                            : SccacheServer::absent;
  if (now) {
    SccacheStats since = stats_since(*now, baseline_of(session));
    line.compile_requests = since.compile_requests;
    line.hits = since.hits;
    line.misses = since.misses;
    line.errors = since.errors();
  }
  LaunchCounts launches = count_launches(session.dir / k_launch_log);
  // Compiles kiln-cc handed to ccache were cached too, if not by sccache: a floor on compile
  // requests is there to catch the ones that never reached a cache.
  line.compile_requests += launches.ccache;
  line.bypasses = launches.bypasses;
  line.via_sccache = launches.sccache;
  line.via_ccache = launches.ccache;
  line.via_direct = launches.direct;
  if (!session.ccache_stats_log.empty()) {
    std::tie(line.ccache_hits, line.ccache_misses) =
        ccache_hits_and_misses(session.ccache_stats_log, session.ccache_stats_offset);
  }
  line.hits += line.ccache_hits;
  line.misses += line.ccache_misses;
  return line;
}

void print_error_log_tail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return;
  }
  // The tail, never the head: the last lines are the ones the step ended on.
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  std::streamoff from = std::max<std::streamoff>(0, size - 65536);
  in.seekg(from);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines = split(text, '\n');
  if (!lines.empty() && lines.back().empty()) {
    lines.pop_back(); // after the last newline
  }
  if (from > 0 && !lines.empty()) {
    lines.erase(lines.begin()); // cut mid-line
  }
  if (lines.empty()) {
    return;
  }
  size_t first = lines.size() > k_error_log_tail_lines ? lines.size() - k_error_log_tail_lines : 0;
  note("the last " + std::to_string(lines.size() - first) + " lines of SCCACHE_ERROR_LOG=" + path +
       ":");
  for (size_t i = first; i < lines.size(); ++i) {
    print(stderr, "  " + lines[i] + "\n");
  }
}

/// Save the final stats, stop the server and print its error log's tail (see the usage).
void stop(Session& session) {
  if (!server_running(session)) {
    note("stop: " + std::string(session.server == "stopped" ? "the sccache server of this "
                                                              "session is stopped already"
                                : session.server == "lost"
                                    ? "the sccache server of this session is gone already"
                                    : "no sccache server was started in this session"));
    return;
  }
  auto stats = server_stats(session);
  if (session.server == "lost") {
    return; // nothing left to stop
  }
  if (stats) {
    write_file_atomic(session.dir / k_final_file, stats->second);
    SccacheStats since = stats_since(stats->first, baseline_of(session));
    print(stderr, "kiln-cc: sccache stats for this step (" + session.version_text + "):\n" +
                      describe_stats(since));
    auto read_only = [&](size_t i) {
      return i < session.levels.size() && session.levels[i].second;
    };
    long left = 0;
    auto backlog = upload_backlog(since, session.level0_failures_start_uploads, read_only);
    for (const UploadBacklog& level : backlog) {
      left += level.left();
    }
    if (left > 0) {
      warn(std::to_string(left) +
           " uploads to slower levels are unfinished and die with the "
           "server (" +
           describe_backlog(backlog) + "): run kiln-cc session drain before stop");
    }
  }
  CommandResult r = run_command(session.sccache, {"--stop-server"}, session_environment(session),
                                k_sccache_timeout);
  if (!r.ok()) {
    warn("sccache --stop-server failed: " + r.what());
  }
  session.server = "stopped";
  save(session);
  if (!session.error_log.empty()) {
    print_error_log_tail(session.error_log);
  }
}

// ---- run ------------------------------------------------------------------------------------

CancelToken* g_interrupted = nullptr;

void note_interrupt(int) {
  if (g_interrupted != nullptr) {
    g_interrupted->cancel();
  }
}

/// `command` with the session's environment, kiln-cc standing in for it (child_process.h).
/// Returns its wait status, or nullopt with errno set when it could not start. Not kiln_base's
/// run_process: the command keeps the step's terminal, streams and process group, as if the
/// shell had run it.
std::optional<int> run_in_session(const std::vector<std::string>& command, const Environment& env) {
  std::vector<std::string> env_strings = environment_strings(env);
  std::vector<char*> envp = c_strings(env_strings);
  std::vector<std::string> argv_strings = command;
  std::vector<char*> argv = c_strings(argv_strings);
  // posix_spawnp looks the command up on the PATH of kiln-cc, not of envp: the session
  // changes no PATH, so the two agree.
  sigset_t blocked;
  sigset_t original;
  sigemptyset(&blocked);
  for (int signal : k_forwarded_signals) {
    sigaddset(&blocked, signal);
  }
  ::sigprocmask(SIG_BLOCK, &blocked, &original);
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  ::posix_spawnattr_setsigmask(&attr, &original);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), envp.data());
  ::posix_spawnattr_destroy(&attr);
  set_child(rc == 0 ? pid : 0);
  ::sigprocmask(SIG_SETMASK, &original, nullptr);
  if (rc != 0) {
    errno = rc;
    return std::nullopt;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  set_child(0);
  return status;
}

/// `run`: the whole compile step in one session that ends whatever the command does.
int run_with_session(const Options& options, const std::vector<std::string>& command) {
  // The watchdog watches this process: should run die, even of SIGKILL, and even before the
  // command starts, the server still stops.
  std::string dir = start_watched(options, ::getpid());
  static CancelToken interrupted;
  g_interrupted = &interrupted;
  forward_stop_signals(note_interrupt);
  std::optional<Session> session = dir.empty() ? std::nullopt : load_session_at(dir);
  if (!dir.empty() && !session) {
    warn("the session folder " + dir + " holds no readable " + k_session_file +
         ": the command runs without a kiln-cc session");
  }
  Environment env = environment_of_process();
  if (session) {
    apply_changes(env, session->changes);
  }
  std::optional<int> status = run_in_session(command, env);
  int start_error = status ? 0 : errno;
  if (!status) {
    print(stderr,
          "kiln-cc: cannot run " + command.front() + ": " + std::strerror(start_error) + "\n");
  }
  if (session) {
    if (interrupted.cancelled()) {
      note("interrupted: not waiting for uploads to slower levels; a later build uploads them "
           "again");
    } else {
      drain(*session, options, interrupted);
    }
    print(stdout, format_stats_line(step_stats(*session)) + "\n");
    std::fflush(stdout);
    stop(*session);
    // Nothing reads the folder once the command is over, and it would stay in the image.
    std::error_code ignored;
    fs::remove_all(session->dir, ignored);
  }
  if (!status) {
    return cannot_start_exit_code(start_error);
  }
  return exit_code_of(*status);
}

} // namespace

int run_session(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  try {
    if (args.empty()) {
      throw UsageError("no verb given");
    }
    std::string verb = args.front();
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (verb == "--help" || verb == "-h" || verb == "help") {
      print(stdout, k_usage);
      return 0;
    }
    if (verb == "probe") {
      return run_probe(parse_options(verb, rest, {"--budget-ms"}));
    }
    if (verb == "start") {
      return run_start(parse_options(verb, rest, {"--budget-ms"}));
    }
    if (verb == "drain") {
      Options options = parse_options(verb, rest, {"--timeout-s", "--stable-polls"});
      Session session = load_session(environment_of_process());
      CancelToken never;
      drain(session, options, never);
      return 0;
    }
    if (verb == "stats") {
      parse_options(verb, rest, {});
      Session session = load_session(environment_of_process());
      print(stdout, format_stats_line(step_stats(session)) + "\n");
      return 0;
    }
    if (verb == "stop") {
      parse_options(verb, rest, {});
      Session session = load_session(environment_of_process());
      stop(session);
      return 0;
    }
    if (verb == "run") {
      auto dashes = std::find(rest.begin(), rest.end(), "--");
      if (dashes == rest.end() || dashes + 1 == rest.end()) {
        throw UsageError("'run' needs the command after --: kiln-cc session run -- CMD [ARGS...]");
      }
      Options options = parse_options(verb, std::vector<std::string>(rest.begin(), dashes),
                                      {"--budget-ms", "--timeout-s", "--stable-polls"});
      return run_with_session(options, std::vector<std::string>(dashes + 1, rest.end()));
    }
    throw UsageError("unknown verb '" + verb + "'");
  } catch (const UsageError& error) {
    print(stderr, std::string("kiln-cc session: ") + error.what() +
                      " (verbs: probe, start, drain, stats, stop, run; see kiln-cc session "
                      "--help)\n");
    return k_usage_exit;
  }
}

} // namespace kiln::cc
