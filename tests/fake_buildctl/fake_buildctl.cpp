// A stand-in for BuildKit v0.11.6's `buildctl`, for kiln's tests: no buildkitd can run where they
// run. It answers with output recorded from the real v0.11.6 (tests/fixtures/buildkit-v0.11.6),
// byte for byte, and leaves on disk what a successful build leaves: an OCI layout, the metadata
// file, a local cache export. It never makes up an output shape. Contract: README.md here.

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/sha256.h"

namespace fs = std::filesystem;
// Ordered: the files written here keep the key order BuildKit writes.
using json = nlohmann::ordered_json;

const char* const k_recordings = KILN_FAKE_RECORDINGS;
const char* const k_revision = "2951a28cd7085eb18979b1f710678623d94ed578";
const char* const k_default_addr = "unix:///run/buildkit/buildkitd.sock";
// The cache folder named in build-import-missing's recorded warning line.
const char* const k_recorded_missing_import = "/srv/kiln-fixtures/empty-nonexistent";
const char* const k_manifest_type = "application/vnd.oci.image.manifest.v1+json";
const char* const k_index_type = "application/vnd.oci.image.index.v1+json";
const char* const k_config_type = "application/vnd.oci.image.config.v1+json";
const char* const k_cache_config_type = "application/vnd.buildkit.cacheconfig.v0";

const std::vector<std::string> k_plan_cases = {"build-fresh",
                                               "build-cached",
                                               "build-fail-run",
                                               "build-fail-target",
                                               "build-import-missing",
                                               "build-import-registry-unreachable",
                                               "build-export-registry-unreachable",
                                               "build-clipped",
                                               "import-flake",
                                               "build-daemon-killed",
                                               "build-daemon-terminated",
                                               "auto"};

// Exit status of a request no recording covers: a mistake in the test or in kiln's argv, not an
// outcome BuildKit could have, so it must not look like one (BuildKit fails with 1).
constexpr int k_rc_unrecorded = 2;

/// Ends the run: `message` goes to stderr as one line, `rc` becomes the exit status.
struct Exit {
  int rc;
  std::string message;
};

/// What the log line tells about this invocation.
struct Invocation {
  std::vector<std::string> args; // everything after argv[0]
  std::string command;
  std::string case_name;
  std::string addr;
  int64_t started_ns = 0; // CLOCK_MONOTONIC, one clock for every process on the host
};

int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void usage_error(const std::string& what) {
  // urfave/cli's wording for a flag the command does not define.
  throw Exit{1, "Incorrect Usage: " + what};
}

[[noreturn]] void solve_error(const std::string& what) {
  throw Exit{1, "error: failed to solve: " + what};
}

[[noreturn]] void unrecorded(const std::string& what) {
  throw Exit{k_rc_unrecorded, "fake buildctl: " + what};
}

// ---------------------------------------------------------------------------------------------
// Small helpers

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    unrecorded("cannot read " + path.string());
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

/// Writes all of `bytes` to `fd` now, unbuffered: the reader sees each line as it is "printed".
void write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return; // the reader went away; nothing left to tell it
    }
    done += static_cast<size_t>(n);
  }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so no reader sees half.
void write_file_atomic(const fs::path& path, const std::string& bytes) {
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out.flush()) {
      throw Exit{1, "error: open " + path.string() + ": " + std::strerror(errno)};
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    throw Exit{1, "error: rename " + path.string() + ": " + ec.message()};
  }
}

/// Splits after each newline; a last piece without one is kept as is.
std::vector<std::string> split_lines(const std::string& bytes) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < bytes.size()) {
    size_t end = bytes.find('\n', start);
    end = end == std::string::npos ? bytes.size() : end + 1;
    lines.push_back(bytes.substr(start, end - start));
    start = end;
  }
  return lines;
}

/// `key=value,key="a,b"` as buildctl reads --output, --secret and the cache flags (Go's csv).
std::map<std::string, std::string> csv_attrs(const std::string& value) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (char c : value) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  std::map<std::string, std::string> attrs;
  for (const std::string& field : fields) {
    size_t eq = field.find('=');
    attrs[field.substr(0, eq)] = eq == std::string::npos ? "" : field.substr(eq + 1);
  }
  return attrs;
}

/// `name=value` as --local, --oci-layout and --opt take it; no `=` gives an empty value.
std::pair<std::string, std::string> split_pair(const std::string& value) {
  size_t eq = value.find('=');
  if (eq == std::string::npos) {
    return {value, ""};
  }
  return {value.substr(0, eq), value.substr(eq + 1)};
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

/// The hex SHA-256 of `data`: blob names and digests must be the real hash of the bytes.
std::string sha256_hex(const std::string& data) {
  return kiln::sha256_digest(data).substr(7);
}

// ---------------------------------------------------------------------------------------------
// Flag parsing, with the rules of Go's flag package (urfave/cli v1 uses it): `-name` or
// `--name`, `--name=value` or `--name value`; parsing stops at the first non-flag argument.

struct FlagSpec {
  std::string canonical; // the long name the flag is known by
  bool takes_value;
};

struct ParsedFlags {
  std::vector<std::pair<std::string, std::string>> flags; // canonical name, value ("true")
  size_t rest = 0;                                        // index of the first non-flag
};

ParsedFlags parse_flags(const std::vector<std::string>& args, size_t from,
                        const std::map<std::string, FlagSpec>& spec) {
  ParsedFlags parsed;
  size_t i = from;
  while (i < args.size()) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      break;
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    size_t eq = body.find('=');
    std::string name = body.substr(0, eq);
    auto it = spec.find(name);
    if (it == spec.end()) {
      usage_error("flag provided but not defined: -" + name);
    }
    std::string value = "true";
    if (eq != std::string::npos) {
      value = body.substr(eq + 1);
    } else if (it->second.takes_value) {
      if (i + 1 >= args.size()) {
        usage_error("flag needs an argument: -" + name);
      }
      value = args[++i];
    }
    parsed.flags.emplace_back(it->second.canonical, value);
    ++i;
  }
  parsed.rest = i;
  return parsed;
}

std::vector<std::string> values_of(const ParsedFlags& parsed, const std::string& name) {
  std::vector<std::string> values;
  for (const auto& [flag, value] : parsed.flags) {
    if (flag == name) {
      values.push_back(value);
    }
  }
  return values;
}

bool is_set(const ParsedFlags& parsed, const std::string& name) {
  std::vector<std::string> values = values_of(parsed, name);
  return !values.empty() && values.back() != "false" && values.back() != "0";
}

// ---------------------------------------------------------------------------------------------
// Recordings, replay and the invocation log

/// A recording by file name; the composed ones live in `composed/`.
fs::path recording_path(const std::string& name) {
  fs::path recorded = fs::path(k_recordings) / name;
  if (fs::exists(recorded)) {
    return recorded;
  }
  return fs::path(k_recordings) / "composed" / name;
}

/// A recording printed whole on stdout: the du and prune listings.
void print_recording(const std::string& file) {
  write_all(STDOUT_FILENO, read_file(recording_path(file)));
}

struct Recording {
  std::string err;
  std::string out;
  int rc = 0;
};

Recording load_build_recording(const std::string& case_name) {
  Recording rec;
  rec.err = read_file(recording_path(case_name + ".stderr"));
  // A composed case has no .stdout file; every recorded build's stdout is empty too.
  fs::path out = recording_path(case_name + ".stdout");
  rec.out = fs::exists(out) ? read_file(out) : "";
  std::string rc = read_file(recording_path(case_name + ".rc"));
  if (!starts_with(rc, "rc=")) {
    unrecorded(case_name + ".rc does not read rc=N");
  }
  rec.rc = std::stoi(rc.substr(3));
  return rec;
}

/// Whether `line` is a log line printed under a numbered vertex: `#6 0.262 hi line 2`.
bool is_vertex_log_line(const std::string& line) {
  size_t space = line.find(' ');
  if (line.size() < 4 || line[0] != '#' || line[1] == '0' || space == std::string::npos ||
      line.find_first_not_of("0123456789", 1) != space) {
    return false;
  }
  size_t second = line.find(' ', space + 1);
  return second != std::string::npos && line.find_first_not_of("0123456789.", space + 1) == second;
}

/// With KILN_FAKE_BUILDCTL_LOG_MB=N, the recording's first vertex log line is printed again
/// and again until N MiB of it are out: a step of a recorded shape that prints for gigabytes.
void print_repeated(int fd, const std::string& line) {
  long mib = 0;
  try {
    mib = std::stol(env_or("KILN_FAKE_BUILDCTL_LOG_MB", "0"));
  } catch (const std::exception&) {
    unrecorded("KILN_FAKE_BUILDCTL_LOG_MB is not a number");
  }
  if (mib <= 0 || line.empty()) {
    return;
  }
  std::string block;
  while (block.size() + line.size() <= (1 << 20)) {
    block += line;
  }
  const auto total = static_cast<unsigned long long>(mib) << 20;
  for (unsigned long long written = 0; written < total; written += block.size()) {
    write_all(fd, block);
  }
}

/// Prints `pieces` (fd, line) one at a time with the configured pause between them, so kiln
/// sees output arrive over time and a test can interrupt a build halfway.
void replay(const std::vector<std::pair<int, std::string>>& pieces) {
  int delay_ms = 0;
  try {
    delay_ms = std::stoi(env_or("KILN_FAKE_BUILDCTL_DELAY_MS", "0"));
  } catch (const std::exception&) {
    unrecorded("KILN_FAKE_BUILDCTL_DELAY_MS is not a number");
  }
  bool repeated = false;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i > 0 && delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    }
    write_all(pieces[i].first, pieces[i].second);
    if (!repeated && is_vertex_log_line(pieces[i].second)) {
      repeated = true;
      print_repeated(pieces[i].first, pieces[i].second);
    }
  }
}

/// One JSON line per invocation, appended in one write so concurrent fakes do not interleave.
void append_log(const Invocation& inv, int rc) {
  std::string path = env_or("KILN_FAKE_BUILDCTL_LOG", "");
  if (path.empty()) {
    return;
  }
  json line = {{"argv", inv.args},
               {"command", inv.command},
               {"case", inv.case_name},
               {"addr", inv.addr},
               {"rc", rc},
               {"started_ns", inv.started_ns},
               {"ended_ns", monotonic_ns()}};
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    write_all(fd, line.dump() + "\n");
    ::close(fd);
  }
}

// ---------------------------------------------------------------------------------------------
// Plan and state: which recording a build replays, and what earlier invocations changed

fs::path plan_path() {
  return env_or("KILN_FAKE_BUILDCTL_PLAN", "");
}

/// Reads `<plan>.state` under an exclusive lock, lets `change` edit it and writes it back:
/// a chain's stages build in parallel, and each build advances a counter here.
json with_state(const std::function<void(json&)>& change) {
  fs::path path = plan_path();
  path += ".state";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || ::flock(fd, LOCK_EX) != 0) {
    unrecorded("cannot lock " + path.string() + ": " + std::strerror(errno));
  }
  std::string text;
  char buffer[4096];
  ssize_t n;
  while ((n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(text.size()))) > 0) {
    text.append(buffer, static_cast<size_t>(n));
  }
  json state = text.empty() ? json::object() : json::parse(text, nullptr, false);
  if (!state.is_object()) {
    ::close(fd);
    unrecorded(path.string() + " is not a JSON object");
  }
  change(state);
  std::string bytes = state.dump(2) + "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    ::close(fd);
    unrecorded("cannot write " + path.string() + ": " + std::strerror(errno));
  }
  ::close(fd); // releases the lock
  return state;
}

bool prune_happened() {
  if (plan_path().empty()) {
    return false; // no plan, no state: every `du` sees the store as it was before any prune
  }
  return with_state([](json&) {}).value("pruned", false);
}

void record_prune() {
  if (!plan_path().empty()) {
    with_state([](json& state) { state["pruned"] = true; });
  }
}

/// The plan's lines, key -> cases, every case name checked.
std::map<std::string, std::vector<std::string>> read_plan() {
  std::map<std::string, std::vector<std::string>> plan;
  std::istringstream lines(read_file(plan_path()));
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    std::string where = plan_path().string() + ":" + std::to_string(number) + ": ";
    std::istringstream words(line);
    std::string key;
    if (!(words >> key) || key[0] == '#') {
      continue;
    }
    std::vector<std::string> cases;
    for (std::string name; words >> name;) {
      if (std::find(k_plan_cases.begin(), k_plan_cases.end(), name) == k_plan_cases.end()) {
        unrecorded(where + "unknown case '" + name + "'");
      }
      cases.push_back(name);
    }
    if (cases.empty()) {
      unrecorded(where + "no case for " + key);
    }
    plan[key] = cases;
  }
  return plan;
}

/// The plan's next case for a Dockerfile name built on daemon `addr`: the line
/// `<name>@<addr>`, else `<name>`, else the `*` line, else `auto`. Each plan key counts the
/// builds it served; once its cases run out, the last one repeats.
std::string next_planned_case(const std::string& dockerfile_name, const std::string& addr) {
  std::map<std::string, std::vector<std::string>> plan = read_plan();
  std::string key = dockerfile_name + "@" + addr;
  if (plan.count(key) == 0) {
    key = plan.count(dockerfile_name) != 0 ? dockerfile_name : "*";
  }
  auto line = plan.find(key);
  if (line == plan.end()) {
    return "auto";
  }
  size_t taken = 0;
  with_state([&](json& state) {
    if (!state["counters"].is_object()) {
      state["counters"] = json::object();
    }
    taken = state["counters"].value(key, size_t{0});
    state["counters"][key] = taken + 1;
  });
  return line->second[std::min(taken, line->second.size() - 1)];
}

// ---------------------------------------------------------------------------------------------
// The daemon

std::string version() {
  return env_or("KILN_FAKE_BUILDKIT_VERSION", "v0.11.6");
}

/// The `<package> <version> <revision>` both version probes print. A build without -ldflags
/// stamps neither version nor revision: "0.0.0+unknown" and an empty revision, as recorded in
/// unstamped-version.txt and unstamped-debug-info.txt.
std::string version_words() {
  std::string v = version();
  return "github.com/moby/buildkit " + v + " " + (v == "0.0.0+unknown" ? "" : k_revision);
}

/// A real probe takes time (a Go program's start; for `debug info` a round trip to the daemon
/// too): KILN_FAKE_BUILDCTL_PROBE_MS, so a test can see whether two probes overlap.
void probe_pause() {
  int ms = 0;
  try {
    ms = std::stoi(env_or("KILN_FAKE_BUILDCTL_PROBE_MS", "0"));
  } catch (const std::exception&) {
    unrecorded("KILN_FAKE_BUILDCTL_PROBE_MS is not a number");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

/// Whether the daemon at `addr` is one KILN_FAKE_BUILDCTL_FROZEN names (comma-separated).
bool frozen_daemon(const std::string& addr) {
  std::string frozen = env_or("KILN_FAKE_BUILDCTL_FROZEN", "");
  return !frozen.empty() && ("," + frozen + ",").find("," + addr + ",") != std::string::npos;
}

/// Marks that a build found the daemon at `addr` frozen: from then on it answers nothing.
fs::path frozen_marker(const std::string& addr) {
  std::string name = addr;
  for (char& c : name) {
    c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  }
  return fs::path(env_or("KILN_FAKE_BUILDCTL_LOG", "buildctl.log") + ".frozen-" + name);
}

/// As buildctl waits on a daemon that was stopped (SIGSTOP): nothing more, until it is killed.
[[noreturn]] void wait_forever() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::hours(1));
  }
}

/// With KILN_FAKE_BUILDCTL_UNREACHABLE=1, fails the way buildctl does when no daemon listens.
/// With KILN_FAKE_BUILDCTL_UNREACHABLE=1 no daemon listens (with a comma-separated list of
/// addresses, none at those): the command fails at once as
/// recorded (build-no-daemon, build-tcp-refused, debug-workers-no-daemon, du-no-daemon), each
/// command with its own words before the dial error, the address the invocation's.
void require_daemon(const Invocation& inv) {
  std::string down = env_or("KILN_FAKE_BUILDCTL_UNREACHABLE", "");
  if (down != "1" && ("," + down + ",").find("," + inv.addr + ",") == std::string::npos) {
    return;
  }
  std::string dial;
  if (starts_with(inv.addr, "tcp://")) {
    dial = "dial tcp " + inv.addr.substr(6) + ": connect: connection refused";
  } else {
    std::string socket = starts_with(inv.addr, "unix://") ? inv.addr.substr(7) : inv.addr;
    dial = "dial unix " + socket + ": connect: no such file or directory";
  }
  std::string call = inv.command == "build" ? "listing workers for Build: failed to list workers"
                     : inv.command == "debug workers" ? "failed to list workers"
                     : inv.command == "du"            ? "failed to call diskusage"
                                                      : "failed to call info";
  throw Exit{1, "error: " + call +
                    ": Unavailable: connection error: desc = \"transport: error "
                    "while dialing: " +
                    dial + "\""};
}

// ---------------------------------------------------------------------------------------------
// du, prune, debug info

int run_du(const Invocation& inv, size_t from) {
  ParsedFlags parsed = parse_flags(inv.args, from,
                                   {{"verbose", {"verbose", false}},
                                    {"v", {"verbose", false}},
                                    {"filter", {"filter", true}},
                                    {"f", {"filter", true}}});
  require_daemon(inv);
  bool verbose = is_set(parsed, "verbose");
  std::vector<std::string> filters = values_of(parsed, "filter");
  if (filters == std::vector<std::string>{"type==exec.cachemount"} && verbose) {
    print_recording("du-cachemount-verbose.txt");
  } else if (!filters.empty()) {
    unrecorded("no recording of du with these filters (recorded: --verbose with "
               "--filter type==exec.cachemount)");
  } else if (verbose) {
    print_recording(prune_happened() ? "du-verbose-after-prune.txt" : "du-verbose.txt");
  } else if (prune_happened()) {
    unrecorded("no recording of du without --verbose after a prune");
  } else {
    print_recording("du-table.txt");
  }
  return 0;
}

/// The one recorded prune. One without --filter is done as asked too, and logged like every
/// invocation, so a test can assert kiln never sends it.
int run_prune(const Invocation& inv, size_t from) {
  ParsedFlags parsed = parse_flags(inv.args, from,
                                   {{"verbose", {"verbose", false}},
                                    {"v", {"verbose", false}},
                                    {"filter", {"filter", true}},
                                    {"f", {"filter", true}},
                                    {"keep-storage", {"keep-storage", true}},
                                    {"keep-duration", {"keep-duration", true}},
                                    {"all", {"all", false}}});
  require_daemon(inv);
  std::vector<std::string> filters = values_of(parsed, "filter");
  if (!filters.empty() && filters != std::vector<std::string>{"type==regular"}) {
    unrecorded("no recording of prune with these filters (recorded: --filter type==regular)");
  }
  if (!is_set(parsed, "verbose") || is_set(parsed, "all")) {
    unrecorded("no recording of prune without --verbose or with --all");
  }
  print_recording("prune-regular-keep1.txt");
  record_prune();
  return 0;
}

/// The recorded `debug workers` table or its `-v` form, with KILN_FAKE_BUILDKIT_PLATFORMS (a
/// comma-separated list) in place of the recorded daemon's platforms when set.
void print_workers(bool verbose) {
  // KILN_FAKE_BUILDKIT_GC=custom: the daemon started with the two-rule GC policy of
  // debug-workers-verbose-gc.buildkitd.toml.
  bool custom_gc = env_or("KILN_FAKE_BUILDKIT_GC", "") == "custom";
  std::string text = read_file(recording_path(
      !verbose    ? "debug-workers.stdout"
      : custom_gc ? "debug-workers-verbose-gc.stdout"
                  : "debug-workers-verbose.stdout"));
  const std::string recorded = "linux/amd64,linux/amd64/v2,linux/amd64/v3,linux/amd64/v4";
  std::string platforms = env_or("KILN_FAKE_BUILDKIT_PLATFORMS", "");
  if (!platforms.empty()) {
    size_t at = text.find(recorded);
    if (at == std::string::npos) {
      unrecorded("the debug workers recording lists other platforms");
    }
    text.replace(at, recorded.size(), platforms);
  }
  write_all(STDOUT_FILENO, text);
}

int run_debug(Invocation& inv, size_t from) {
  std::string what = from < inv.args.size() ? inv.args[from] : "";
  if (what != "info" && what != "workers") {
    unrecorded("no recording of debug " + what);
  }
  inv.command = "debug " + what;
  ParsedFlags parsed = parse_flags(
      inv.args, from + 1,
      what == "workers" ? std::map<std::string, FlagSpec>{{"verbose", {"verbose", false}},
                                                          {"v", {"verbose", false}}}
                        : std::map<std::string, FlagSpec>{});
  probe_pause();
  require_daemon(inv);
  if (frozen_daemon(inv.addr) && fs::exists(frozen_marker(inv.addr))) {
    wait_forever(); // a stopped daemon answers no call either
  }
  if (what == "workers") {
    print_workers(is_set(parsed, "verbose"));
    return 0;
  }
  // v0.11.6 cmd/buildctl/debug/info.go: a tabwriter line "BuildKit:\t%s %s %s", padding 1.
  write_all(STDOUT_FILENO, "BuildKit: " + version_words() + "\n");
  return 0;
}

// ---------------------------------------------------------------------------------------------
// build: the request and its checks

struct BuildRequest {
  std::string frontend;
  std::string progress;
  std::string metadata_file;
  std::map<std::string, std::string> opts;        // --opt; a later key wins, as in buildctl
  std::map<std::string, std::string> locals;      // --local name=dir
  std::map<std::string, std::string> oci_layouts; // --oci-layout store=dir
  std::vector<std::string> secrets;
  std::vector<std::string> imports;
  std::vector<std::string> exports;
  std::vector<std::string> outputs;
};

BuildRequest parse_build(const std::vector<std::string>& args, size_t from) {
  std::map<std::string, FlagSpec> spec = {{"no-cache", {"no-cache", false}}};
  for (const char* name :
       {"frontend", "local", "oci-layout", "opt", "progress", "export-cache", "import-cache",
        "secret", "output", "metadata-file", "allow", "ssh", "trace", "ref-file"}) {
    spec[name] = {name, true};
  }
  ParsedFlags parsed = parse_flags(args, from, spec);
  if (parsed.rest < args.size()) {
    unrecorded("build takes no arguments, got '" + args[parsed.rest] + "'");
  }
  BuildRequest req;
  for (const auto& [flag, value] : parsed.flags) {
    auto [name, setting] = split_pair(value);
    if (flag == "frontend") {
      req.frontend = value;
    } else if (flag == "progress") {
      req.progress = value;
    } else if (flag == "metadata-file") {
      req.metadata_file = value;
    } else if (flag == "opt") {
      req.opts[name] = setting;
    } else if (flag == "local") {
      req.locals[name] = setting;
    } else if (flag == "oci-layout") {
      req.oci_layouts[name] = setting;
    } else if (flag == "secret") {
      req.secrets.push_back(value);
    } else if (flag == "import-cache") {
      req.imports.push_back(value);
    } else if (flag == "export-cache") {
      req.exports.push_back(value);
    } else if (flag == "output") {
      req.outputs.push_back(value);
    }
  }
  return req;
}

std::string dockerfile_name(const BuildRequest& req) {
  auto it = req.opts.find("filename");
  return it == req.opts.end() ? "Dockerfile" : it->second;
}

/// Refuses, before anything is printed, a request whose output no recording shows.
void check_recorded(const BuildRequest& req) {
  if (req.progress != "plain") {
    unrecorded("--progress=" + req.progress + ": only --progress=plain is recorded");
  }
  if (req.frontend != "dockerfile.v0") {
    unrecorded("--frontend=" + req.frontend + ": only dockerfile.v0 is recorded");
  }
  if (req.outputs.size() > 1) {
    // v0.11 client/solve.go: one exporter per build; several came with v0.13.
    throw Exit{1, "error: currently only single Exports can be specified"};
  }
  for (const std::string& output : req.outputs) {
    std::map<std::string, std::string> attrs = csv_attrs(output);
    bool oci_dir = attrs["type"] == "oci" && !attrs["dest"].empty() && attrs["tar"] == "false";
    bool image = attrs["type"] == "image" && !attrs["name"].empty();
    if (!oci_dir && !image) {
      unrecorded("--output " + output + ": only type=oci,dest=D,tar=false and type=image,name=R");
    }
  }
  for (const std::string& import : req.imports) {
    std::map<std::string, std::string> attrs = csv_attrs(import);
    bool local = attrs["type"] == "local" && !attrs["src"].empty();
    bool registry = attrs["type"] == "registry" && !attrs["ref"].empty();
    if (!local && !registry) {
      unrecorded("--import-cache " + import + ": only type=local,src=S and type=registry,ref=R");
    }
  }
  for (const std::string& exported : req.exports) {
    std::map<std::string, std::string> attrs = csv_attrs(exported);
    bool local = attrs["type"] == "local" && !attrs["dest"].empty();
    bool registry = attrs["type"] == "registry" && !attrs["ref"].empty();
    if (!local && !registry && attrs["type"] != "inline") {
      unrecorded("--export-cache " + exported +
                 ": only type=local,dest=E, type=registry,ref=R and type=inline");
    }
  }
}

/// The folder of `--local <name>=<dir>`, which must exist.
fs::path local_dir(const BuildRequest& req, const std::string& name, const std::string& user) {
  auto it = req.locals.find(name);
  if (it == req.locals.end()) {
    solve_error(user + " needs --local " + name + "=<dir>, none given");
  }
  if (!fs::is_directory(it->second)) {
    solve_error("--local " + name + "=" + it->second + ": no such directory");
  }
  return it->second;
}

/// `--opt context:<name>=oci-layout://<store>@<digest>` needs that store's index to list it.
void check_oci_context(const BuildRequest& req, const std::string& opt, const std::string& ref) {
  size_t at = ref.find('@');
  if (at == std::string::npos) {
    solve_error(opt + ": no @<digest> (only oci-layout://<store>@<digest> is handled)");
  }
  std::string store = ref.substr(0, at);
  std::string digest = ref.substr(at + 1);
  auto layout = req.oci_layouts.find(store);
  if (layout == req.oci_layouts.end()) {
    solve_error(opt + " needs --oci-layout " + store + "=<dir>, none given");
  }
  std::string flag = "--oci-layout " + store + "=" + layout->second;
  fs::path index_path = fs::path(layout->second) / "index.json";
  json index = fs::exists(index_path) ? json::parse(read_file(index_path), nullptr, false) : json();
  if (!index.is_object() || !index["manifests"].is_array()) {
    solve_error(opt + ": " + flag + " has no readable index.json");
  }
  for (const json& manifest : index["manifests"]) {
    if (manifest.is_object() && manifest.value("digest", "") == digest) {
      return;
    }
  }
  solve_error(opt + ": " + flag + ": its index.json lists no manifest " + digest);
}

void check_secret(const std::string& value) {
  std::map<std::string, std::string> attrs = csv_attrs(value);
  std::string src = attrs.count("src") != 0 ? attrs["src"] : attrs["source"];
  std::string env = attrs["env"];
  if (src.empty() && env.empty()) {
    // secretsprovider.NewStore: an environment variable named like the id, else a file.
    (std::getenv(attrs["id"].c_str()) != nullptr ? env : src) = attrs["id"];
  }
  if (!env.empty() && std::getenv(env.c_str()) == nullptr) {
    throw Exit{1, "error: --secret " + value + ": " + env + " is not set in the environment"};
  }
  if (!src.empty() && !fs::exists(src)) {
    // secretsprovider.NewStore's wording for a missing file.
    throw Exit{1, "error: failed to stat " + src + ": stat " + src + ": no such file or directory"};
  }
}

/// Everything the build reads must be there, or BuildKit would fail the solve.
void check_inputs(const BuildRequest& req) {
  local_dir(req, "context", "--frontend dockerfile.v0");
  fs::path dockerfile_dir = local_dir(req, "dockerfile", "--frontend dockerfile.v0");
  if (!fs::is_regular_file(dockerfile_dir / dockerfile_name(req))) {
    solve_error("--opt filename=" + dockerfile_name(req) +
                ": no such file in --local dockerfile=" + dockerfile_dir.string());
  }
  for (const auto& [key, value] : req.opts) {
    if (!starts_with(key, "context:")) {
      continue;
    }
    std::string opt = "--opt " + key + "=" + value;
    if (starts_with(value, "oci-layout://")) {
      check_oci_context(req, opt, value.substr(13));
    } else if (starts_with(value, "local:")) {
      local_dir(req, value.substr(6), opt);
    }
  }
  for (const std::string& secret : req.secrets) {
    check_secret(secret);
  }
}

// ---------------------------------------------------------------------------------------------
// build: what it prints

/// The `src` of every `--import-cache type=local`.
std::vector<std::string> local_imports(const BuildRequest& req) {
  std::vector<std::string> sources;
  for (const std::string& import : req.imports) {
    std::map<std::string, std::string> attrs = csv_attrs(import);
    if (attrs["type"] == "local") {
      sources.push_back(attrs["src"]);
    }
  }
  return sources;
}

bool has_local_cache(const BuildRequest& req) {
  for (const std::string& src : local_imports(req)) {
    std::error_code ec;
    uintmax_t size = fs::file_size(fs::path(src) / "index.json", ec);
    if (!ec && size > 0) {
      return true;
    }
  }
  return false;
}

std::string choose_case(const BuildRequest& req, const std::string& addr) {
  std::string picked = plan_path().empty() ? "auto" : next_planned_case(dockerfile_name(req), addr);
  if (picked == "auto") {
    return has_local_cache(req) ? "build-cached" : "build-fresh";
  }
  return picked;
}

/// buildctl's warning for each local cache import without an index.json: the recorded line of
/// build-import-missing.stderr, with its folder replaced by the import's.
std::vector<std::string> missing_import_warnings(const BuildRequest& req) {
  std::string recorded =
      split_lines(read_file(recording_path("build-import-missing.stderr"))).at(0);
  const std::string from = k_recorded_missing_import;
  std::vector<std::string> warnings;
  for (const std::string& src : local_imports(req)) {
    if (fs::exists(fs::path(src) / "index.json")) {
      continue;
    }
    std::string line = recorded;
    for (size_t at = line.find(from); at != std::string::npos; at = line.find(from, at)) {
      line.replace(at, from.size(), src);
      at += src.size();
    }
    warnings.push_back(line);
  }
  return warnings;
}

/// The lines a build prints, in order: warnings, then the recording's stderr and stdout.
std::vector<std::pair<int, std::string>>
build_output(const BuildRequest& req, const std::string& case_name, const Recording& rec) {
  std::vector<std::pair<int, std::string>> pieces;
  std::vector<std::string> warnings = missing_import_warnings(req);
  for (const std::string& warning : warnings) {
    pieces.emplace_back(STDERR_FILENO, warning);
  }
  std::vector<std::string> err = split_lines(rec.err);
  // That recording opens with its own warning; the ones above, for this request, replace it.
  if (case_name == "build-import-missing" && !warnings.empty() && !err.empty()) {
    err.erase(err.begin());
  }
  for (const std::string& line : err) {
    pieces.emplace_back(STDERR_FILENO, line);
  }
  for (const std::string& line : split_lines(rec.out)) {
    pieces.emplace_back(STDOUT_FILENO, line);
  }
  return pieces;
}

// ---------------------------------------------------------------------------------------------
// build: what it leaves on disk

/// Content and its digest, `sha256:<hex>`.
struct Blob {
  std::string bytes;
  std::string digest;
};

Blob blob_of(std::string bytes) {
  std::string digest = "sha256:" + sha256_hex(bytes);
  return {std::move(bytes), digest};
}

json descriptor(const char* media_type, const Blob& blob) {
  return {{"mediaType", media_type}, {"digest", blob.digest}, {"size", blob.bytes.size()}};
}

void write_blob(const fs::path& root, const Blob& blob) {
  fs::path dir = root / "blobs" / "sha256";
  fs::create_directories(dir);
  write_file_atomic(dir / blob.digest.substr(7), blob.bytes);
}

struct Image {
  Blob config;
  Blob manifest;
};

/// The platform a build is for, as BuildKit's dockerfile frontend reads `--opt platform=`:
/// os/arch[/variant]; without the option, the daemon's own (amd64 on the recording host).
json platform_of(const BuildRequest& req) {
  json platform = {{"architecture", "amd64"}, {"os", "linux"}};
  auto it = req.opts.find("platform");
  if (it != req.opts.end()) {
    std::istringstream parts(it->second);
    std::string os, arch, variant;
    std::getline(parts, os, '/');
    std::getline(parts, arch, '/');
    std::getline(parts, variant, '/');
    platform = {{"architecture", arch}, {"os", os}};
    if (!variant.empty()) {
      platform["variant"] = variant;
    }
  }
  return platform;
}

/// An empty image for the build's platform whose config records the build's --opt values and
/// Dockerfile, so each stage, and each change to a stage, gets its own digest; the same build
/// gets the same one. `--opt label:K=V` become the config's Labels, as the frontend makes them.
Image make_image(const BuildRequest& req) {
  fs::path dockerfile = fs::path(req.locals.at("dockerfile")) / dockerfile_name(req);
  json recorded = {{"opts", req.opts},
                   {"dockerfile", "sha256:" + sha256_hex(read_file(dockerfile))}};
  json labels = json::object();
  for (const auto& [key, value] : req.opts) {
    if (key.rfind("label:", 0) == 0) {
      labels[key.substr(6)] = value;
    }
  }
  json image_config = json::object();
  if (!labels.empty()) {
    image_config["Labels"] = labels;
  }
  json config = platform_of(req);
  config.update({{"config", image_config},
                 {"rootfs", {{"type", "layers"}, {"diff_ids", json::array()}}},
                 {"kiln-fake-buildctl", recorded}});
  Blob config_blob = blob_of(config.dump());
  json manifest = {{"schemaVersion", 2},
                   {"mediaType", k_manifest_type},
                   {"config", descriptor(k_config_type, config_blob)},
                   {"layers", json::array()}};
  return {config_blob, blob_of(manifest.dump())};
}

/// The cache manifest a cache export writes: an index naming one cache config blob.
struct CacheManifest {
  Blob config;
  Blob manifest;
};

CacheManifest make_cache_manifest(const Image& image) {
  json config = {{"layers", json::array()},
                 {"records", json::array()},
                 {"kiln-fake-buildctl", {{"image", image.manifest.digest}}}};
  Blob config_blob = blob_of(config.dump());
  json manifest = {{"schemaVersion", 2},
                   {"mediaType", k_index_type},
                   {"manifests", json::array({descriptor(k_cache_config_type, config_blob)})}};
  return {config_blob, blob_of(manifest.dump())};
}

/// `--output type=oci,dest=D,tar=false`: an OCI image layout in D.
void write_oci_layout(const fs::path& dest, const Image& image, const std::string& created) {
  fs::create_directories(dest);
  write_file_atomic(dest / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  write_blob(dest, image.config);
  write_blob(dest, image.manifest);
  json entry = descriptor(k_manifest_type, image.manifest);
  entry["annotations"] = json::object({{"org.opencontainers.image.created", created}});
  json index = {
      {"schemaVersion", 2}, {"mediaType", k_index_type}, {"manifests", json::array({entry})}};
  write_file_atomic(dest / "index.json", index.dump());
}

/// `--export-cache type=local,dest=E`: E's index.json names the cache manifest, as BuildKit's.
void write_cache_export(const fs::path& dest, const CacheManifest& cache) {
  fs::create_directories(dest);
  write_blob(dest, cache.config);
  write_blob(dest, cache.manifest);
  json entry = descriptor(k_index_type, cache.manifest);
  entry["annotations"] = json::object({{"org.opencontainers.image.ref.name", "latest"}});
  json index = {
      {"schemaVersion", 2}, {"mediaType", k_index_type}, {"manifests", json::array({entry})}};
  write_file_atomic(dest / "index.json", index.dump());
}

/// `--metadata-file`: the keys of metadata-work.json, in its order and indentation, plus
/// `image.name` for a push.
void write_metadata(const BuildRequest& req, const Image& image, const CacheManifest& cache,
                    const std::string& created, const std::string& pushed) {
  json entry = descriptor(k_manifest_type, image.manifest);
  entry["annotations"] = json::object({{"org.opencontainers.image.created", created}});
  entry["platform"] = platform_of(req);
  json metadata = {{"cache.manifest", descriptor(k_index_type, cache.manifest).dump()},
                   {"containerimage.buildinfo", {{"frontend", req.frontend}, {"attrs", req.opts}}},
                   {"containerimage.config.digest", image.config.digest},
                   {"containerimage.descriptor", entry},
                   {"containerimage.digest", image.manifest.digest}};
  if (!pushed.empty()) {
    metadata["image.name"] = pushed;
  }
  write_file_atomic(req.metadata_file, metadata.dump(2));
}

void write_results(const BuildRequest& req) {
  std::string created = utc_now();
  Image image = make_image(req);
  CacheManifest cache = make_cache_manifest(image);
  std::string pushed;
  for (const std::string& output : req.outputs) {
    std::map<std::string, std::string> attrs = csv_attrs(output);
    if (attrs["type"] == "oci") {
      write_oci_layout(attrs["dest"], image, created);
    } else if (attrs["push"] == "true" || attrs["push"] == "1") {
      pushed = attrs["name"]; // a push leaves nothing local
    }
  }
  for (const std::string& exported : req.exports) {
    std::map<std::string, std::string> attrs = csv_attrs(exported);
    if (attrs["type"] == "local") {
      write_cache_export(attrs["dest"], cache); // registry and inline leave nothing local
    }
  }
  if (!req.metadata_file.empty()) {
    write_metadata(req, image, cache, created, pushed);
  }
}

int run_build(Invocation& inv, size_t from) {
  BuildRequest req = parse_build(inv.args, from);
  require_daemon(inv);
  check_recorded(req);
  check_inputs(req);
  if (frozen_daemon(inv.addr)) {
    // build-daemon-stopped as it was before buildctl's own cancel: its last line is what the
    // client printed when it was stopped, which kiln's stop of this process stands in for.
    inv.case_name = "build-daemon-stopped";
    Recording rec = load_build_recording(inv.case_name);
    std::vector<std::pair<int, std::string>> pieces = build_output(req, inv.case_name, rec);
    pieces.pop_back();
    write_file_atomic(frozen_marker(inv.addr), "");
    append_log(inv, 0); // logged now: it is never going to end by itself
    replay(pieces);
    wait_forever();
  }
  inv.case_name = choose_case(req, inv.addr);
  Recording rec = load_build_recording(inv.case_name);
  replay(build_output(req, inv.case_name, rec));
  if (rec.rc == 0) {
    write_results(req);
  }
  return rec.rc;
}

// ---------------------------------------------------------------------------------------------

int dispatch(Invocation& inv) {
  ParsedFlags global = parse_flags(
      inv.args, 0,
      {{"addr", {"addr", true}}, {"version", {"version", false}}, {"v", {"version", false}}});
  std::vector<std::string> addrs = values_of(global, "addr");
  if (!addrs.empty()) {
    inv.addr = addrs.back();
  }
  if (is_set(global, "version")) {
    inv.command = "--version";
    probe_pause();
    // cmd/buildctl/main.go: fmt.Println(name, version.Package, version, version.Revision).
    write_all(STDOUT_FILENO, "buildctl " + version_words() + "\n");
    return 0;
  }
  if (global.rest >= inv.args.size()) {
    unrecorded("no command given");
  }
  inv.command = inv.args[global.rest];
  size_t from = global.rest + 1;
  if (inv.command == "build") {
    return run_build(inv, from);
  }
  if (inv.command == "du") {
    return run_du(inv, from);
  }
  if (inv.command == "prune") {
    return run_prune(inv, from);
  }
  if (inv.command == "debug") {
    return run_debug(inv, from);
  }
  unrecorded("no recording of command '" + inv.command + "'");
}

int main(int argc, char** argv) {
  // kiln's tests interrupt builds and expect death by that signal; a disposition inherited as
  // "ignore" would let the fake outlive it.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);

  Invocation inv;
  inv.started_ns = monotonic_ns();
  inv.args.assign(argv + 1, argv + argc);
  inv.addr = env_or("BUILDKIT_HOST", k_default_addr);
  int rc = 0;
  try {
    rc = dispatch(inv);
  } catch (const Exit& exit) {
    write_all(STDERR_FILENO, exit.message + "\n");
    rc = exit.rc;
  } catch (const std::exception& error) {
    write_all(STDERR_FILENO, std::string("fake buildctl: ") + error.what() + "\n");
    rc = k_rc_unrecorded;
  }
  append_log(inv, rc);
  return rc;
}
