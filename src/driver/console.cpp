#include "driver/console.h"

#include <algorithm>

#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "util/image_ref.h"
#include "util/strings.h"
#include "util/time.h"

namespace kiln {

namespace {

constexpr auto k_silence_shown = std::chrono::minutes(1);

size_t terminal_width(std::FILE* out) {
  winsize size{};
  if (::ioctl(::fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return 100;
}

/// The compile cache's hit rate over the compiles of the stage's last build, "-" without any.
std::string compile_hits(const StageRecord& stage) {
  for (auto a = stage.attempts.rbegin(); a != stage.attempts.rend(); ++a) {
    if (a->compile) {
      const auto& totals = a->compile->totals;
      long seen = totals.hits + totals.misses;
      return seen > 0 ? fmt::format("{:.0f}% of {}", 100.0 * totals.hits / seen, seen) : "-";
    }
  }
  return "-";
}

/// A smoke stage's counts: passed/failed/skipped.
std::string smoke_counts(const StageRecord& stage) {
  if (!stage.smoke) {
    return "-";
  }
  return fmt::format("{}/{}/{}", stage.smoke->passed, stage.smoke->failed, stage.smoke->skipped);
}

/// An instruction as one console line: its first line, clipped; the log has all of it.
std::string one_line(const std::string& instruction) {
  constexpr size_t k_shown = 100;
  std::string line = instruction.substr(0, instruction.find('\n'));
  if (line.size() > k_shown) {
    line = line.substr(0, k_shown) + "...";
  }
  return line;
}

std::string step_text(const BuildProgress& p) {
  if (p.steps == 0) {
    return "starting";
  }
  std::string text;
  if (!p.build_stage_name.empty()) {
    text = fmt::format("[{}] ", p.build_stage_name); // BuildKit names the Dockerfile stage
  } else if (p.build_stages > 0) {
    text = fmt::format("stage {}/{} ", p.build_stage, p.build_stages);
  }
  text += fmt::format("step {}/{}", p.step, p.steps);
  if (p.vertices > 0) {
    text += fmt::format(", {} cached", p.steps_cached);
  }
  return text;
}

} // namespace

Console::Console(std::FILE* out, bool live) : m_out(out), m_live(live) {
  m_writer = std::thread([this] { write_frames(); });
}

Console::~Console() {
  {
    std::lock_guard lock(m_mutex);
    m_stopping = true;
  }
  m_wake.notify_all();
  m_writer.join();
}

void Console::write_frames() {
  std::unique_lock lock(m_mutex);
  for (;;) {
    // Live, the block ticks its elapsed times once a second; plain, only text wakes it.
    auto wanted = [&] { return m_stopping || !m_queued.empty() || m_redraw; };
    if (m_live) {
      m_wake.wait_for(lock, std::chrono::seconds(1), wanted);
      m_redraw = m_redraw || !m_running.empty();
    } else {
      m_wake.wait(lock, wanted);
    }
    bool last = m_stopping;
    std::string frame;
    try {
      frame = next_frame_locked();
    } catch (const std::exception&) {
      // A frame that could not be made (out of memory) is not worth the run: the next one
      // draws the block again, and the record has every line.
      m_queued.clear();
    }
    m_writing = true;
    lock.unlock();
    write_out(frame); // may block for as long as nobody reads: no lock is held
    lock.lock();
    m_writing = false;
    m_written.notify_all();
    if (last && m_queued.empty()) {
      return;
    }
  }
}

void Console::flush() {
  std::unique_lock lock(m_mutex);
  m_written.wait(lock, [&] { return m_queued.empty() && !m_redraw && !m_writing; });
}

std::string Console::next_frame_locked() {
  std::string frame;
  if (m_live && m_drawn > 0 && (m_redraw || m_stopping || !m_queued.empty() || m_dropped > 0)) {
    // Up to the block's first line, then clear to the end of the screen.
    frame = fmt::format("\033[{}A\r\033[J", m_drawn);
    m_drawn = 0;
  }
  if (m_dropped > 0) {
    frame += fmt::format("kiln: {} line(s) of kiln's output were dropped while nothing read it; "
                         "the run's record has all of them\n",
                         m_dropped);
    m_dropped = 0;
  }
  frame += m_queued;
  m_queued.clear();
  if (m_live && !m_stopping) {
    size_t width = terminal_width(m_out);
    for (const auto& stage : m_running) {
      std::string line = status_line_locked(stage);
      if (line.size() >= width) {
        line.resize(width - 1); // a wrapped line would break the count of lines to go up
      }
      frame += line + "\n";
    }
    m_drawn = m_running.size();
  }
  m_redraw = false;
  return frame;
}

std::string Console::status_line_locked(const Running& stage) const {
  const StageView& s = stage.view;
  double elapsed = std::chrono::duration<double>(Clock::now() - stage.start).count();
  std::string line = fmt::format("kiln: {}", s.name);
  if (s.action != "building") {
    line += "  " + s.action;
  }
  if (s.attempt > 1) {
    line += fmt::format("  attempt {}/{}", s.attempt, s.attempts);
  }
  line += "  " + step_text(stage.progress) + "  " + human_duration(elapsed);
  if (s.eta_seconds) {
    line += *s.eta_seconds > elapsed
                ? fmt::format("  ETA {}", human_duration(*s.eta_seconds - elapsed))
                : fmt::format("  (last ok run: {})", human_duration(*s.eta_seconds));
  }
  // A step that has said nothing for a minute is worth a look (a hung download once held a
  // chain for two hours); below that, silence is normal.
  auto silent = Clock::now() - stage.last_output;
  if (silent >= k_silence_shown) {
    line += "  silent " + human_duration(std::chrono::duration<double>(silent).count());
  }
  if (!stage.progress.instruction.empty()) {
    line += "  " + one_line(stage.progress.instruction);
  }
  return line;
}

Console::Running* Console::find_locked(const std::string& stage) {
  for (auto& running : m_running) {
    if (running.view.name == stage) {
      return &running;
    }
  }
  return nullptr;
}

void Console::write_out(const std::string& text) {
  if (text.empty()) {
    return;
  }
  // Never throws: a terminal that went away (EPIPE; SIGPIPE is ignored) must not end the run.
  if (std::fwrite(text.data(), 1, text.size(), m_out) != text.size()) {
    std::clearerr(m_out);
  }
  std::fflush(m_out);
}

void Console::redraw_locked() {
  if (m_live) {
    m_redraw = true;
    m_wake.notify_one();
  }
}

void Console::print_locked(const std::string& text, bool keep) {
  if (!keep && m_queued.size() + text.size() > k_queue_limit) {
    m_dropped += std::max<size_t>(1, std::count(text.begin(), text.end(), '\n'));
    return;
  }
  m_queued += text;
  m_wake.notify_one();
}

void Console::note(const std::string& message) {
  std::lock_guard lock(m_mutex);
  print_locked(fmt::format("kiln: {}\n", message));
}

void Console::raw(const std::string& lines) {
  std::lock_guard lock(m_mutex);
  print_locked(lines, true);
}

void Console::stage_output(const std::string& stage) {
  std::lock_guard lock(m_mutex);
  if (Running* running = find_locked(stage)) {
    running->last_output = Clock::now();
  }
}

void Console::stage_started(const StageView& view) {
  std::lock_guard lock(m_mutex);
  Clock::time_point now = Clock::now();
  if (Running* running = find_locked(view.name)) {
    *running = {view, {}, now, now}; // the next attempt
  } else {
    m_running.push_back({view, {}, now, now});
  }
  if (m_live) {
    redraw_locked();
    return;
  }
  std::string attempt =
      view.attempt > 1 ? fmt::format(" (attempt {}/{})", view.attempt, view.attempts) : "";
  print_locked(fmt::format("kiln: [{}] {}{}, stage {} of {}\n", view.name, view.action, attempt,
                           view.index, view.count));
}

void Console::stage_progress(const std::string& stage, const BuildProgress& progress) {
  std::lock_guard lock(m_mutex);
  Running* running = find_locked(stage);
  if (running == nullptr) {
    return;
  }
  bool new_step = progress.step != running->progress.step ||
                  progress.build_stage != running->progress.build_stage ||
                  progress.build_stage_name != running->progress.build_stage_name;
  running->progress = progress;
  if (m_live) {
    redraw_locked();
  } else if (new_step) {
    print_locked(fmt::format("kiln: [{}] {}: {}\n", stage, step_text(progress),
                             one_line(progress.instruction)));
  }
}

void Console::stage_finished(const std::string& stage, const std::string& outcome) {
  std::lock_guard lock(m_mutex);
  std::erase_if(m_running, [&](const Running& running) { return running.view.name == stage; });
  print_locked(fmt::format("kiln: [{}] {}\n", stage, outcome));
}

void Console::failure_tail(const std::vector<std::string>& lines, const std::string& log_path) {
  std::string text = fmt::format("kiln: last {} lines of the engine output (all of it: {}):\n",
                                 lines.size(), log_path);
  for (const auto& line : lines) {
    text += fmt::format("    {}\n", line);
  }
  std::lock_guard lock(m_mutex);
  print_locked(text);
}

void Console::failure_errors(const std::string& stage, const std::string& step,
                             const std::vector<std::string>& lines, long total) {
  // More than were kept: the kept ones are the first half and the last half, both full.
  const bool cut = total > static_cast<long>(lines.size());
  const size_t half = lines.size() / 2;
  std::string text = fmt::format(
      "kiln: [{}] the failing step ({}) printed {} error line(s){}:\n", stage, one_line(step),
      total, cut ? fmt::format(", the first {} and the last {}", half, half) : "");
  for (size_t i = 0; i < lines.size(); ++i) {
    if (cut && i == half) {
      text += fmt::format("    ... {} more ...\n", total - static_cast<long>(lines.size()));
    }
    text += fmt::format("    {}\n", lines[i]);
  }
  std::lock_guard lock(m_mutex);
  print_locked(text);
}

void Console::summary(const RunRecord& run, const std::filesystem::path& run_dir) {
  std::vector<std::vector<std::string>> rows = {
      {"stage", "outcome", "attempts", "seconds", "jobs", "cache hits", "smoke", "image"}};
  // With worker pools, where each stage built and why there (the last column: it can be long).
  const bool placed = !run.workers.empty();
  if (placed) {
    rows[0].push_back("worker");
  }
  for (const auto& s : run.stages) {
    bool critical = std::find(run.critical_path.begin(), run.critical_path.end(), s.name) !=
                    run.critical_path.end();
    rows.push_back({s.name + (critical ? " *" : ""), s.outcome.empty() ? s.status : s.outcome,
                    std::to_string(s.attempts.size()), fmt::format("{:.1f}", s.seconds),
                    s.jobs > 0 ? std::to_string(s.jobs) : "-", compile_hits(s), smoke_counts(s),
                    s.image_id.empty() ? "-" : short_image_id(s.image_id)});
    if (placed) {
      rows.back().push_back(s.worker.empty() ? "-" : fmt::format("{} ({})", s.worker, s.placement));
    }
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  std::string text = "\n";
  for (const auto& row : rows) {
    std::string line = "  ";
    for (size_t c = 0; c < row.size(); ++c) {
      // Numbers right-aligned, words left-aligned.
      bool numeric = c >= 2 && c <= 5;
      line += numeric ? fmt::format("{:>{}}", row[c], widths[c])
                      : fmt::format("{:<{}}", row[c], widths[c]);
      line += c + 1 < row.size() ? "  " : "";
    }
    while (!line.empty() && line.back() == ' ') {
      line.pop_back();
    }
    text += line + "\n";
  }
  std::string causes;
  for (const auto& s : run.stages) {
    if (s.cause.is_object()) {
      causes += fmt::format("  {}: {}\n", s.name, s.cause.value("summary", ""));
    }
  }
  if (!causes.empty()) {
    text += "\nkiln: why each stage that built was not reused (kiln explain " + run.run_id +
            "):\n" + causes;
  }
  if (!run.critical_path.empty()) {
    text += fmt::format(
        "\nkiln: wall time {}; critical path (*) {}: {} of builds, so {:.2f}x of it\n",
        human_duration(run.wall_seconds), join(run.critical_path, " -> "),
        human_duration(run.critical_path_seconds),
        run.critical_path_seconds > 0 ? run.wall_seconds / run.critical_path_seconds : 0.0);
  }
  for (const auto& published : run.published) {
    text += "\n" + publish_line(published) + "\n";
  }
  text += fmt::format("\nkiln: run {} {}; record: {}\n", run.run_id, run.status, run_dir.string());
  std::lock_guard lock(m_mutex);
  print_locked(text, true);
}

std::string publish_line(const PublishRecord& published) {
  std::vector<std::string> lanes;
  for (const auto& lane : published.lanes) {
    lanes.push_back(fmt::format("{} {}", lane.lane.empty() ? lane.stage : lane.lane, lane.image));
  }
  std::string status =
      published.status == "published" ? "published " + published.digest : published.status;
  std::string line = fmt::format("kiln: publish {}: {}", published.ref, status);
  if (!lanes.empty()) {
    line += "; " + join(lanes, ", ");
  }
  if (!published.gates_not_run.empty()) {
    line += fmt::format("; not run: {}", join(published.gates_not_run, ", "));
  }
  return line;
}

} // namespace kiln
