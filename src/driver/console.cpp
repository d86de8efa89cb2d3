#include "driver/console.h"

#include <algorithm>

#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>

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

/// The first 12 hex digits, as `docker images` shows ids; a digest loses its `sha256:`.
std::string short_id(std::string_view id) {
  if (id.starts_with("sha256:")) {
    id.remove_prefix(7);
  }
  return std::string(id.substr(0, 12));
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
  if (m_live) {
    m_ticker = std::thread([this] { tick(); });
  }
}

Console::~Console() {
  {
    std::lock_guard lock(m_mutex);
    m_stopping = true;
  }
  m_wake.notify_all();
  if (m_ticker.joinable()) {
    m_ticker.join();
  }
}

void Console::tick() {
  std::unique_lock lock(m_mutex);
  while (!m_stopping) {
    m_wake.wait_for(lock, std::chrono::seconds(1));
    if (!m_stopping && m_stage) {
      redraw_locked();
    }
  }
}

std::string Console::status_line_locked() const {
  const StageView& s = *m_stage;
  double elapsed = std::chrono::duration<double>(Clock::now() - m_stage_start).count();
  std::string line = fmt::format("kiln: [{}/{}] {}", s.index, s.count, s.name);
  if (s.attempt > 1) {
    line += fmt::format("  attempt {}/{}", s.attempt, s.attempts);
  }
  line += "  " + step_text(m_progress) + "  " + human_duration(elapsed);
  if (s.eta_seconds) {
    line += *s.eta_seconds > elapsed
                ? fmt::format("  ETA {}", human_duration(*s.eta_seconds - elapsed))
                : fmt::format("  (last ok run: {})", human_duration(*s.eta_seconds));
  }
  // A step that has said nothing for a minute is worth a look (a hung download once held a
  // chain for two hours); below that, silence is normal.
  auto silent = Clock::now() - Clock::time_point(Clock::duration(m_last_output.load()));
  if (silent >= k_silence_shown) {
    line += "  silent " + human_duration(std::chrono::duration<double>(silent).count());
  }
  if (!m_progress.instruction.empty()) {
    line += "  " + m_progress.instruction;
  }
  return line;
}

void Console::clear_line_locked() {
  std::fputs("\r\033[K", m_out);
}

void Console::redraw_locked() {
  std::string line = status_line_locked();
  size_t width = terminal_width(m_out);
  if (line.size() >= width) {
    line.resize(width - 1);
  }
  clear_line_locked();
  std::fputs(line.c_str(), m_out);
  std::fflush(m_out);
}

void Console::note(const std::string& message) {
  std::lock_guard lock(m_mutex);
  if (m_live && m_stage) {
    clear_line_locked();
  }
  fmt::print(m_out, "kiln: {}\n", message);
  if (m_live && m_stage) {
    redraw_locked();
  }
  std::fflush(m_out);
}

void Console::stage_output() {
  m_last_output.store(Clock::now().time_since_epoch().count());
}

void Console::stage_started(const StageView& view) {
  std::lock_guard lock(m_mutex);
  m_stage = view;
  m_progress = {};
  m_stage_start = Clock::now();
  m_last_output.store(m_stage_start.time_since_epoch().count());
  if (m_live) {
    redraw_locked();
    return;
  }
  std::string attempt =
      view.attempt > 1 ? fmt::format(" (attempt {}/{})", view.attempt, view.attempts) : "";
  fmt::print(m_out, "kiln: [{}/{}] {}: building{}\n", view.index, view.count, view.name, attempt);
  std::fflush(m_out);
}

void Console::stage_progress(const BuildProgress& progress) {
  std::lock_guard lock(m_mutex);
  if (!m_stage) {
    return;
  }
  bool new_step = progress.step != m_progress.step ||
                  progress.build_stage != m_progress.build_stage ||
                  progress.build_stage_name != m_progress.build_stage_name;
  m_progress = progress;
  if (m_live) {
    redraw_locked();
  } else if (new_step) {
    fmt::print(m_out, "kiln: [{}/{}] {}: {}: {}\n", m_stage->index, m_stage->count, m_stage->name,
               step_text(progress), progress.instruction);
    std::fflush(m_out);
  }
}

void Console::stage_finished(const std::string& outcome) {
  std::lock_guard lock(m_mutex);
  if (m_live) {
    clear_line_locked();
  }
  if (m_stage) {
    fmt::print(m_out, "kiln: [{}/{}] {}: {}\n", m_stage->index, m_stage->count, m_stage->name,
               outcome);
  }
  m_stage.reset();
  std::fflush(m_out);
}

void Console::failure_tail(const std::vector<std::string>& lines, const std::string& log_path) {
  std::lock_guard lock(m_mutex);
  fmt::print(m_out, "kiln: last {} lines of the engine output (all of it: {}):\n", lines.size(),
             log_path);
  for (const auto& line : lines) {
    fmt::print(m_out, "    {}\n", line);
  }
  std::fflush(m_out);
}

void Console::summary(const RunRecord& run, const std::filesystem::path& run_dir) {
  std::vector<std::vector<std::string>> rows = {
      {"stage", "status", "attempts", "seconds", "image"}};
  for (const auto& s : run.stages) {
    rows.push_back({s.name, s.status, std::to_string(s.attempts.size()),
                    fmt::format("{:.1f}", s.seconds),
                    s.image_id.empty() ? "-" : short_id(s.image_id)});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  std::lock_guard lock(m_mutex);
  fmt::print(m_out, "\n");
  for (const auto& row : rows) {
    std::string line = "  ";
    for (size_t c = 0; c < row.size(); ++c) {
      // Numbers right-aligned, words left-aligned.
      bool numeric = c == 2 || c == 3;
      line += numeric ? fmt::format("{:>{}}", row[c], widths[c])
                      : fmt::format("{:<{}}", row[c], widths[c]);
      line += c + 1 < row.size() ? "  " : "";
    }
    while (!line.empty() && line.back() == ' ') {
      line.pop_back();
    }
    fmt::print(m_out, "{}\n", line);
  }
  fmt::print(m_out, "\nkiln: run {} {}; record: {}\n", run.run_id, run.status, run_dir.string());
  std::fflush(m_out);
}

} // namespace kiln
