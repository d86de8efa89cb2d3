#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "driver/records.h"
#include "driver/run_folder.h"
#include "engine/engine.h"

namespace kiln {

/// How many lines of a failed attempt the console shows; the log keeps all of them.
constexpr size_t k_console_tail_lines = 20;

/// How much of an engine's output may wait for its log and readers, and how long the read loop
/// waits for room before it drops what it read (the log says where and how much): a reader
/// that keeps up slows the engine as a pipe would, a stuck one never holds the loop's clock.
constexpr size_t k_output_queue_bytes = 4u << 20;
constexpr std::chrono::milliseconds k_output_queue_wait{250};

/// What one engine invocation left behind, read from its output.
struct AttemptOutcome {
  ProcessExit exit;
  BuildProgress progress;
  Tail evidence;                        // the failing step's own output: what classification reads
  Tail engine_evidence;                 // of it, the lines the engine printed itself
  Tail tail;                            // the last lines as printed, for the console
  std::string last_line_at_stop;        // the last line before a limit or the token stopped it
  std::vector<std::string> clip_lines;  // the engine's notes that it dropped a step's output
  std::optional<CompileReport> compile; // what the stage's kiln-cc steps reported, summed
  std::vector<std::string> finished_build_stages;
  std::vector<StepSeen> steps;         // the layer-producing steps it reported, cached or run
  std::unique_ptr<BuildOutput> output; // the reader, for what only one engine reports
  uint64_t dropped_bytes = 0;          // of output the log and readers fell too far behind for
};

/// Told about every change of a build's progress.
using ProgressListener = std::function<void(const BuildProgress&)>;

/// Told when the build printed something: the live console counts silence from it.
using OutputListener = std::function<void()>;

/// One engine invocation: the whole output, byte for byte, to `log` (unless the record ran out
/// of room: then the log says where it was cut; or the log and readers fell
/// k_output_queue_bytes behind: then it says how much was dropped where); progress to
/// `on_progress` when given, from a thread of its own; stopped by its cancel token or its
/// limits.
AttemptOutcome run_attempt(const Engine& engine, const BuildRequest& request, RecordLog& log,
                           const ProgressListener& on_progress, const BuildLimits& limits = {},
                           const OutputListener& on_output = {});

} // namespace kiln
