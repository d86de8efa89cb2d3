#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

namespace kiln {

struct ProcessSpec {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env; // added to the inherited environment
  std::filesystem::path cwd;                            // empty: kiln's own
  /// Stop it like an interrupt once this much time has passed; zero: no limit.
  std::chrono::milliseconds timeout{0};
};

/// How a process ended.
struct ProcessExit {
  int exit_code = -1;       // when it exited
  int term_signal = 0;      // when a signal killed it
  bool interrupted = false; // stopped because the interrupt fd became readable
  bool timed_out = false;   // stopped because the spec's timeout passed
  std::string spawn_error;  // set when it never started

  bool ok() const { return spawn_error.empty() && term_signal == 0 && exit_code == 0; }
  /// One number for records: the exit code, or 128 + signal like a shell.
  int status_code() const { return term_signal != 0 ? 128 + term_signal : exit_code; }
};

/// Receives output as it arrives, in chunks that need not end at a line boundary.
using OutputSink = std::function<void(std::string_view chunk)>;

/// Run argv in a process group of its own, stdin from /dev/null, stdout and stderr merged into
/// one pipe so the sink sees them in the order they were written.
/// Returns once the leader has exited and every process still in its group has been killed:
/// engines leave grandchildren behind (buildah's RUN survives SIGINT to the group), and a
/// leftover would hold build state and the output pipe.
/// When `interrupt_fd` becomes readable the group gets SIGINT so the engine can clean up, and
/// SIGKILL once `grace` has passed.
ProcessExit run_process(const ProcessSpec& spec, const OutputSink& sink, int interrupt_fd = -1,
                        std::chrono::milliseconds grace = std::chrono::seconds(10));

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
class LineSplitter {
public:
  explicit LineSplitter(std::function<void(std::string_view line)> on_line)
      : m_on_line(std::move(on_line)) {}
  void feed(std::string_view chunk);
  void finish();

private:
  std::function<void(std::string_view)> m_on_line;
  std::string m_partial;
};

} // namespace kiln
