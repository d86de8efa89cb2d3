#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

#include "util/cancel.h"

namespace kiln {

struct ProcessSpec {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env{}; // added to the inherited environment
  std::filesystem::path cwd{};                            // empty: kiln's own
  /// Stop it like an interrupt once this much time has passed; zero: no limit.
  std::chrono::milliseconds timeout{0};
  /// Stop it like an interrupt once it has printed nothing for this long; zero: no limit.
  std::chrono::milliseconds stall_timeout{0};
  /// What cancels it; nullptr: interrupt_token(), so Ctrl-C reaches every process kiln starts.
  const CancelToken* cancel = nullptr;
  /// After SIGINT to the group, how long before SIGKILL.
  std::chrono::milliseconds grace{std::chrono::seconds(10)};
  /// Told when a cancel, the timeout or a stall starts stopping it, before the SIGINT: what the
  /// process prints after that is its shutdown, not its work.
  std::function<void()> on_stop{};
  /// Where stdout goes instead of the pipe (created or truncated): output whose bytes matter,
  /// such as a manifest a digest is checked against, kept apart from the tool's stderr.
  std::filesystem::path stdout_file{};
};

/// How a process ended.
struct ProcessExit {
  int exit_code = -1;       // when it exited
  int term_signal = 0;      // when a signal killed it
  bool interrupted = false; // stopped because its cancel token was cancelled
  bool timed_out = false;   // stopped because the spec's timeout passed
  bool stalled = false;     // stopped because it printed nothing for the spec's stall_timeout
  /// Since its last output: when it was stopped, or else when it ended.
  std::chrono::milliseconds silent_for{0};
  std::string spawn_error; // set when it never started

  bool ok() const { return spawn_error.empty() && term_signal == 0 && exit_code == 0; }
  /// One number for records: the exit code, or 128 + signal like a shell.
  int status_code() const { return term_signal != 0 ? 128 + term_signal : exit_code; }
};

/// Receives output as it arrives, in chunks that need not end at a line boundary.
using OutputSink = std::function<void(std::string_view chunk)>;

/// `strings` as exec takes them: a pointer to each, then a null. The pointers are valid while
/// `strings` lives unchanged.
std::vector<char*> c_strings(std::vector<std::string>& strings);

/// Run argv in a process group of its own, stdin from /dev/null, stdout and stderr merged into
/// one pipe so the sink sees them in the order they were written.
/// Returns once the leader has exited and every process still in its group has been killed:
/// engines leave grandchildren behind (buildah's RUN survives SIGINT to the group), and a
/// leftover would hold build state and the output pipe.
/// A cancel, the timeout or a stall sends the group SIGINT so the engine can clean up, and
/// SIGKILL once `grace` has passed, or at once when the token escalates to CancelLevel::kill.
/// A token already cancelled starts nothing. Should kiln itself die, even by SIGKILL, a
/// sentinel process kills every group it still had running.
ProcessExit run_process(const ProcessSpec& spec, const OutputSink& sink);

/// Run argv to completion and return what it printed (stdout and stderr); an error when it
/// could not start or exited non-zero, naming the command and quoting its output.
tl::expected<std::string, std::string> capture_output(const std::vector<std::string>& argv);

/// A finished command and everything it printed, stdout and stderr merged.
struct CapturedRun {
  ProcessExit exit;
  std::string output;

  /// Why it failed, in one line: the command's own last words when it printed any, and how it
  /// ended.
  std::string failure() const;
};

/// Run argv to completion (stopped after `timeout` when it is not zero), keeping its output.
CapturedRun run_captured(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

/// Splits a stream of chunks into lines (without the newline); call finish() for the last one.
/// A line longer than `max_line` bytes is handed on cut to its first `max_line` bytes: what
/// reads lines looks at their start, and a 1 GB line must not take 1 GB of memory.
class LineSplitter {
public:
  static constexpr size_t k_default_max_line = 256 * 1024;

  explicit LineSplitter(std::function<void(std::string_view line)> on_line,
                        size_t max_line = k_default_max_line)
      : m_on_line(std::move(on_line)), m_max_line(max_line) {}
  void feed(std::string_view chunk);
  void finish();

private:
  void append(std::string_view part);

  std::function<void(std::string_view)> m_on_line;
  size_t m_max_line;
  std::string m_partial;
};

} // namespace kiln
