// `kiln-cc session`'s command line: the usage, the options each verb takes, and the verb it
// names; and the messages kiln-cc prints.
#include "compilecache/session.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "compilecache/session_control.h"
#include "compilecache/stats_line.h"
#include "util/cancel.h"
#include "util/strings.h"

namespace kiln::cc {

namespace session_control {

namespace {

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

// ---- options ----------------------------------------------------------------------------

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

} // namespace

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

std::string first_line(std::string_view text) {
  std::vector<std::string> lines = said_lines(text);
  return lines.empty() ? "" : lines.front();
}

std::string one_line(std::string_view text) {
  return join(said_lines(text), " | ");
}

} // namespace session_control

int run_session(int argc, char** argv) {
  using namespace session_control; // the verbs (session_control.h)
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
