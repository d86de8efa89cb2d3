// `probe` and `start`: reaching every remote level, dropping the unreachable ones, and starting
// a private sccache server in a watchdog that stops it once the step's shell is gone.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "compilecache/endpoint_probe.h"
#include "compilecache/server_address.h"
#include "compilecache/session_control.h"
#include "compilecache/session_dir.h"
#include "compilecache/watchdog.h"
#include "util/fs.h"
#include "util/loopback.h"
#include "util/process.h"
#include "util/strings.h"

namespace kiln::cc::session_control {

namespace {

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

} // namespace

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

namespace {

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

} // namespace

bool server_running(const Session& session) {
  return session.server == "running" && !session.sccache.empty();
}

bool answers(const Session& session) {
  bool uds = session.address_name == "SCCACHE_SERVER_UDS";
  return server_answers(sccache_server_address(uds ? session.address_value.c_str() : nullptr,
                                               uds ? nullptr : session.address_value.c_str()));
}

namespace {

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

} // namespace

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

} // namespace kiln::cc::session_control
