// format_tty(): the analysis as a person reads it in a terminal.
#include <algorithm>

#include <fmt/format.h>

#include "forensics/log_analysis.h"
#include "util/strings.h"

namespace kiln::forensics {

namespace {

std::string seconds_text(const std::optional<double>& seconds) {
  return seconds ? fmt::format("{:.3f}", *seconds) : std::string("-");
}

std::string compile_text(const std::optional<CompileCounts>& counts) {
  if (!counts) {
    return {};
  }
  return fmt::format("{} requests, {} hits, {} misses", counts->requests, counts->hits,
                     counts->misses);
}

/// A step's name in at most 80 columns. A RUN's flags (`--mount=...`, `--network=...`) go first:
/// cut at 80, every compile step of a chain would read the same run of cache mounts.
std::string step_label(const std::string& name) {
  constexpr size_t k_columns = 80;
  std::string label = name;
  if (size_t run = name.find("RUN --"); run != std::string::npos) {
    size_t at = run + 4;
    size_t flags = 0;
    while (name.compare(at, 2, "--") == 0) {
      size_t end = name.find(' ', at);
      at = end == std::string::npos ? name.size() : end + 1;
      ++flags;
    }
    label = name.substr(0, run + 4) + name.substr(at) +
            fmt::format(" ({} flag{})", flags, flags == 1 ? "" : "s");
  }
  if (label.size() <= k_columns) {
    return label;
  }
  return label.substr(0, utf8_cut(label, k_columns - 3)) + "...";
}

std::string where(const LogResult& log) {
  std::string text = log.stage.empty() ? log.path : log.stage;
  if (!log.lane.empty()) {
    text = log.lane + "/" + text;
  }
  if (log.attempt > 0) {
    text += fmt::format(" attempt {}", log.attempt);
  }
  return text;
}

} // namespace

std::string format_tty(const RunAnalysis& run) {
  std::string out;
  auto line = [&](const std::string& text) {
    out += text;
    out += '\n';
  };
  if (run.run_id) {
    line(fmt::format("run {}: {} log(s)", *run.run_id, run.logs.size()));
  }
  struct Ranked {
    const LogResult* log;
    const StepResult* step;
  };
  std::vector<Ranked> timed, idle, findings;
  WarningCounts warnings;
  long fetches = 0;
  for (const auto& log : run.logs) {
    line("");
    line(fmt::format("{}: {}, {} lines, {} bytes{}{}{}", log.path, log.format, log.lines, log.bytes,
                     log.timed ? "" : ", untimed", log.line_times ? ", line times" : "",
                     log.failed ? ", FAILED" : ""));
    if (log.steps.empty()) {
      line("  no steps");
      continue;
    }
    line(fmt::format("  {:<16} {:<8} {:>9} {:>9} {:>8}  {}", "step", "state", "seconds", "idle",
                     "lines", "name"));
    for (const auto& step : log.steps) {
      line(fmt::format("  {:<16} {:<8} {:>9} {:>9} {:>8}  {}", step.id, state_name(step.state),
                       seconds_text(step.seconds), seconds_text(step.idle_tail_seconds),
                       step.output_lines, step_label(step.name)));
      if (step.seconds) {
        timed.push_back({&log, &step});
      }
      if (step.idle_tail_seconds && *step.idle_tail_seconds >= run.options.idle_threshold_seconds) {
        idle.push_back({&log, &step});
      }
      if (step.compile || step.compile_bypass || step.flood || step.clipped ||
          step.warnings.signal > 0 || step.replayed_lines > 0) {
        findings.push_back({&log, &step});
      }
      warnings += step.warnings;
      fetches += step.fetches_without_progress;
    }
  }
  line("");
  std::stable_sort(timed.begin(), timed.end(), [](const Ranked& a, const Ranked& b) {
    return *a.step->seconds > *b.step->seconds;
  });
  line(fmt::format("Slowest steps (top {}):", run.options.top));
  for (size_t i = 0; i < timed.size() && i < run.options.top; ++i) {
    line(fmt::format("  {:>9}s  {} {} {}", seconds_text(timed[i].step->seconds),
                     where(*timed[i].log), timed[i].step->id, step_label(timed[i].step->name)));
  }
  if (timed.empty()) {
    line("  none timed");
  }
  line(fmt::format("Idle tails of {}s or more: {}", run.options.idle_threshold_seconds,
                   idle.empty() ? "none" : std::to_string(idle.size())));
  for (const auto& entry : idle) {
    line(fmt::format("  {:>9}s  {} {} {}", seconds_text(entry.step->idle_tail_seconds),
                     where(*entry.log), entry.step->id, step_label(entry.step->name)));
  }
  for (const auto& entry : findings) {
    const StepResult& step = *entry.step;
    std::string head = fmt::format("{} {}", where(*entry.log), step.id);
    if (step.clipped) {
      line(fmt::format("Clipped: {} lost output to BuildKit's log limit", head));
    }
    if (step.compile) {
      line(fmt::format("Compile cache: {}: {} ({})", head, compile_text(step.compile),
                       step.compile->source));
    }
    if (step.compile_bypass) {
      line(fmt::format("Compile cache bypassed: {}: {} compiler invocation(s), no cache request",
                       head, step.compiler_invocations));
    }
    if (step.flood) {
      line(fmt::format("Flood: {} printed {} lines", head, step.output_lines));
    }
    if (step.replayed_lines > 0) {
      line(fmt::format("Replayed: {} (cached) replayed {} line(s)", head, step.replayed_lines));
    }
    if (step.warnings.signal > 0) {
      line(fmt::format("Signal warnings: {}: {}", head, step.warnings.signal));
    }
  }
  for (const auto& retry : run.retries) {
    line(fmt::format("{}: {}{}: {}", retry.kind, retry.lane.empty() ? "" : retry.lane + "/",
                     retry.stage, retry.detail));
  }
  for (const auto& stage : run.stages) {
    if (stage.over_share) {
      line(fmt::format("Over its share: {}{} ran -j{} where the run's budget offered it {} "
                       "job(s): its compile does not read kiln-budget's JOBS",
                       stage.lane.empty() ? "" : stage.lane + "/", stage.stage, *stage.jobs_seen,
                       *stage.jobs_share));
    }
  }
  std::vector<std::pair<std::string, long>> classes(warnings.classes.begin(),
                                                    warnings.classes.end());
  std::stable_sort(classes.begin(), classes.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string top_classes;
  for (size_t i = 0; i < classes.size() && i < 5; ++i) {
    top_classes +=
        fmt::format("{}{} {}", i == 0 ? "; " : ", ", classes[i].first, classes[i].second);
  }
  line(fmt::format("Warnings: {} ({} noise, {} signal){}", warnings.total, warnings.noise,
                   warnings.signal, top_classes));
  line(fmt::format("Network fetches without progress control: {}", fetches));
  for (const auto& log : run.logs) {
    for (const auto& step : log.steps) {
      if (step.state != StepState::error) {
        continue;
      }
      line(fmt::format("Error in {} {} {}{}:", where(log), step.id, step_label(step.name),
                       step.errors_from_tail ? " (no error line matched; its last lines)" : ""));
      for (const auto& text : step.errors) {
        line("  " + text);
      }
    }
  }
  for (const auto& p : run.publish_failures) {
    line(fmt::format("Publish {} {}{}:", p.ref, p.status, p.log.empty() ? "" : " (" + p.log + ")"));
    line("  " + p.failure);
  }
  return out;
}

} // namespace kiln::forensics
