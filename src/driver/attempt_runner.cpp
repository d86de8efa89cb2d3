#include "driver/attempt_runner.h"

#include <deque>

#include "compilecache/stats_line.h"
#include "util/cancel.h"

namespace kiln {

namespace {

// BuildKit's note where it stopped keeping a step's output (util/progress/logs in v0.11.6):
// `#5 0.073 [output clipped, log limit 2KiB reached]`.
constexpr std::string_view k_clip_note = "[output clipped, log limit ";
constexpr size_t k_clip_lines_kept = 20;

void keep_last(std::deque<std::string>& lines, std::string_view line, size_t count) {
  lines.emplace_back(line);
  if (lines.size() > count) {
    lines.pop_front();
  }
}

} // namespace

AttemptOutcome run_attempt(const Engine& engine, const BuildRequest& request, RecordLog& log,
                           const ProgressListener& on_progress, const BuildLimits& limits,
                           const OutputListener& on_output) {
  AttemptOutcome outcome;
  if (!request.metadata.empty()) {
    // buildctl writes its metadata file but does not create the folder for it.
    std::error_code ignored;
    std::filesystem::create_directories(request.metadata.parent_path(), ignored);
  }
  std::unique_ptr<BuildOutput> output = engine.read_output();
  std::deque<std::string> tail;
  LineSplitter lines([&](std::string_view line) {
    keep_last(tail, line, k_console_tail_lines);
    if (output->feed(line) && on_progress) {
      on_progress(output->progress());
    }
    if (line.find(k_clip_note) != std::string_view::npos &&
        outcome.clip_lines.size() < k_clip_lines_kept) {
      outcome.clip_lines.emplace_back(line.substr(0, 500));
    }
    // Found anywhere in the line: an engine may prefix what a RUN printed.
    if (size_t at = line.find(cc::k_stats_prefix); at != std::string_view::npos) {
      if (auto stats = cc::parse_stats_line(line.substr(at))) {
        outcome.compile = outcome.compile.value_or(CompileReport{});
        outcome.compile->add(*stats);
      }
    }
  });
  BuildLimits stoppable = limits;
  stoppable.on_stop = [&] {
    outcome.last_line_at_stop = tail.empty() ? std::string() : tail.back();
    if (limits.on_stop) {
      limits.on_stop();
    }
  };
  outcome.exit = engine.build(
      request,
      [&](std::string_view chunk) {
        log.write(chunk); // the whole output, byte for byte, before anything interprets it
        lines.feed(chunk);
        if (on_output) {
          on_output();
        }
      },
      stoppable);
  lines.finish();
  outcome.progress = output->progress();
  outcome.evidence = output->evidence();
  outcome.engine_evidence = output->engine_evidence();
  outcome.finished_build_stages = output->finished_build_stages();
  outcome.steps = output->steps();
  if (!outcome.exit.spawn_error.empty()) {
    log.write("kiln: " + outcome.exit.spawn_error + "\n");
    keep_last(tail, outcome.exit.spawn_error, k_console_tail_lines);
    outcome.evidence.push_back(outcome.exit.spawn_error);
    outcome.engine_evidence.push_back(outcome.exit.spawn_error);
  }
  outcome.tail.assign(tail.begin(), tail.end());
  outcome.output = std::move(output);
  return outcome;
}

} // namespace kiln
