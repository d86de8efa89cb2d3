#include "forensics/report.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <iterator>
#include <map>
#include <set>

#include <fmt/format.h>

#include "driver/records.h" // the manifest schema: the report reads the one kiln writes
#include "explain/run_explain.h"
#include "forensics/history.h"
#include "forensics/log_analysis.h"
#include "util/fs.h"
#include "util/json_field.h"
#include "util/strings.h"
#include "util/time.h"

namespace kiln {

namespace {

using Json = nlohmann::json;

// One geometry for both charts, so a stage's boundary in the resource chart sits under its bar.
constexpr double k_width = 960;
constexpr double k_label_width = 160;
constexpr double k_plot_width = k_width - k_label_width - 24;
constexpr double k_axis_height = 22;
constexpr double k_row_height = 24;
constexpr double k_bar_height = 16;
constexpr double k_panel_height = 80;
constexpr double k_panel_gap = 22;

// A week-long run sampled every 20 s is 30000 rows; more points than pixels only weighs.
constexpr size_t k_max_points = 2000;
// Record strings are user data of any length (a minified line matched as a failure): a page
// must stay small enough to open.
constexpr size_t k_max_text = 1000;
constexpr size_t k_max_rows = 50;
constexpr size_t k_max_error_lines = 20;

std::string text_field(const Json& object, const char* key) {
  const Json& value = json_member(object, key);
  return value.is_string() ? value.get<std::string>() : std::string();
}

std::optional<double> number_field(const Json& object, const char* key) {
  const Json& value = json_member(object, key);
  if (!value.is_number()) {
    return std::nullopt;
  }
  return value.get<double>();
}

/// A scalar as the record has it: strings as they are, numbers and booleans printed, else "".
std::string scalar_text(const Json& value) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  if (value.is_number_integer() || value.is_number_unsigned() || value.is_boolean()) {
    return value.dump();
  }
  if (value.is_number_float()) {
    return fmt::format("{:.3f}", value.get<double>());
  }
  return "";
}

/// At most `limit` bytes of `text`, cut before a UTF-8 continuation byte, with an ellipsis.
std::string clipped(std::string_view text, size_t limit = k_max_text) {
  if (text.size() <= limit) {
    return std::string(text);
  }
  return fmt::format("{}… ({} bytes in all)", text.substr(0, utf8_cut(text, limit)), text.size());
}

std::string esc(std::string_view text) {
  return html_escape(text);
}

/// A word safe in a class name: letters, digits and `-`; anything else becomes `-`.
std::string css_token(std::string_view text) {
  std::string token;
  for (char c : text) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    token += plain ? c : '-';
  }
  return token.empty() ? "none" : token;
}

std::string seconds_text(double seconds) {
  if (seconds < 60) {
    return fmt::format("{:.1f}s", seconds);
  }
  return human_duration(seconds);
}

/// One stage on the time axis: its whole span, and each attempt inside it.
struct Bar {
  const Json* stage = nullptr;
  std::string name;
  std::string lane;
  std::string worker; // the pool worker it was placed on; "" when it was not
  std::string
      group; // the rows it shares: its worker's in a run that placed stages, else its lane's
  std::string outcome; // the manifest's outcome, else its status
  bool started = false;
  bool critical = false;
  double start = 0; // seconds from the start of the run
  double end = 0;
  struct Attempt {
    int number = 0;
    std::string purpose;
    std::string verdict;
    double start = 0;
    double seconds = 0;
  };
  std::vector<Attempt> attempts;
  size_t row = 0;
};

/// A publish target on the time axis: its gates, push, read-back, signature and tag.
struct PublishSpan {
  std::string ref;
  std::string status;
  double start = 0;
  double end = 0;
};

struct Timeline {
  double origin = 0; // the run's start, seconds since the epoch
  double span = 1;   // seconds the x axis covers
  std::vector<Bar> bars;
  std::vector<PublishSpan> publishes; // drawn on a row of their own, the last
  size_t publish_row = 0;
  std::vector<std::string> row_labels;
  std::vector<bool> row_on_path;
  bool lanes = false;     // rows are groups of stages (a lane's, a worker's), not one per stage
  bool by_worker = false; // the groups are the workers the run placed stages on
};

void add_publish_row(Timeline& t) {
  if (!t.publishes.empty()) {
    t.publish_row = t.row_labels.size();
    t.row_labels.push_back("publish");
    t.row_on_path.push_back(false);
  }
}

double x_of(const Timeline& t, double seconds) {
  return k_label_width + std::clamp(seconds, 0.0, t.span) / t.span * k_plot_width;
}

/// The manifest's times are whole seconds. A stage really started within the second it names,
/// and not before the stages it needs ended: the later of the two places it, so a chain of
/// needs does not overlap on the chart by rounding.
Timeline lay_out(const Json& manifest, const std::vector<ResourceRow>& resources) {
  Timeline t;
  std::set<std::string> on_path;
  for (const Json& name : json_array(json_member(manifest, "critical_path"), "stages")) {
    if (name.is_string()) {
      on_path.insert(name.get<std::string>());
    }
  }
  std::optional<double> origin = parse_utc(text_field(manifest, "started"));
  if (!origin) {
    for (const Json& stage : json_array(manifest, "stages")) {
      for (const Json& attempt : json_array(stage, "attempts")) {
        if (auto at = parse_utc(text_field(attempt, "started")); at && (!origin || *at < *origin)) {
          origin = at;
        }
      }
    }
  }
  t.origin = origin.value_or(0);
  std::map<std::string, double> ends;
  double last = std::max(0.0, number_field(manifest, "wall_seconds").value_or(0));
  for (const Json& stage : json_array(manifest, "stages")) {
    Bar bar;
    bar.stage = &stage;
    bar.name = text_field(stage, "name");
    bar.lane = text_field(stage, "lane");
    bar.worker = text_field(stage, "worker");
    bar.outcome = text_field(stage, "outcome");
    if (bar.outcome.empty()) {
      bar.outcome = text_field(stage, "status");
    }
    bar.critical = on_path.count(bar.name) > 0;
    double previous_end = 0;
    for (const Json& attempt : json_array(stage, "attempts")) {
      std::optional<double> at = parse_utc(text_field(attempt, "started"));
      if (!at) {
        continue;
      }
      double raw = *at - t.origin;
      double start = raw;
      if (!bar.started) {
        for (const Json& need : json_array(stage, "needs")) {
          if (auto found = ends.find(need.is_string() ? need.get<std::string>() : "");
              found != ends.end()) {
            start = std::max(start, found->second);
          }
        }
      } else {
        start = std::max(start, previous_end);
      }
      start = std::max(0.0, std::min(start, raw + 0.999));
      Bar::Attempt a;
      a.number = static_cast<int>(number_field(attempt, "number").value_or(0));
      a.purpose = text_field(attempt, "purpose");
      a.verdict = text_field(attempt, "verdict");
      a.start = start;
      a.seconds = std::max(0.0, number_field(attempt, "seconds").value_or(0));
      previous_end = a.start + a.seconds;
      if (!bar.started) {
        bar.started = true;
        bar.start = start;
      }
      bar.attempts.push_back(a);
    }
    if (bar.started) {
      double seconds = std::max(0.0, number_field(stage, "seconds").value_or(0));
      bar.end = std::max(bar.start + seconds, previous_end);
      ends[bar.name] = bar.end;
      last = std::max(last, bar.end);
    }
    t.bars.push_back(std::move(bar));
  }
  for (const Json& target : json_array(manifest, "publish")) {
    if (auto at = parse_utc(text_field(target, "started"))) {
      PublishSpan span{text_field(target, "ref"), text_field(target, "status"), *at - t.origin, 0};
      // Whole seconds again: it began once the last stage ended, not before.
      for (const Bar& bar : t.bars) {
        span.start = std::max(span.start, std::min(bar.end, *at - t.origin + 0.999));
      }
      span.end = span.start + std::max(0.0, number_field(target, "seconds").value_or(0));
      last = std::max(last, span.end);
      t.publishes.push_back(span);
    }
  }
  if (!resources.empty()) {
    if (auto at = parse_utc(resources.back().time)) {
      last = std::max(last, *at - t.origin);
    }
  }
  t.span = std::max(last, 1.0);
  // A run that placed stages on a pool's workers draws a row per worker: where each stage
  // built, and what else that worker built meanwhile.
  t.by_worker =
      std::any_of(t.bars.begin(), t.bars.end(), [](const Bar& bar) { return !bar.worker.empty(); });
  for (Bar& bar : t.bars) {
    bar.group = !t.by_worker         ? bar.lane
                : bar.worker.empty() ? std::string("(no worker)")
                                     : "worker " + bar.worker;
    t.lanes = t.lanes || !bar.group.empty();
  }
  if (!t.lanes) {
    for (size_t i = 0; i < t.bars.size(); ++i) {
      t.bars[i].row = i;
      t.row_labels.push_back(t.bars[i].name);
      t.row_on_path.push_back(t.bars[i].critical);
    }
    add_publish_row(t);
    return t;
  }
  // A row per group; stages of one group that overlap in time take a row each, packed greedily.
  std::vector<std::string> groups;
  for (const Bar& bar : t.bars) {
    if (std::find(groups.begin(), groups.end(), bar.group) == groups.end()) {
      groups.push_back(bar.group);
    }
  }
  if (t.by_worker) {
    std::sort(groups.begin(), groups.end()); // worker bk1, bk2, ... whatever built first
  }
  for (const auto& group : groups) {
    std::vector<Bar*> in_lane;
    for (Bar& bar : t.bars) {
      if (bar.group == group) {
        in_lane.push_back(&bar);
      }
    }
    std::stable_sort(in_lane.begin(), in_lane.end(), [](const Bar* a, const Bar* b) {
      return a->started && (!b->started || a->start < b->start);
    });
    size_t first = t.row_labels.size();
    std::vector<double> row_ends;
    for (Bar* bar : in_lane) {
      size_t row = 0;
      if (bar->started) {
        while (row < row_ends.size() && row_ends[row] > bar->start + 1e-6) {
          ++row;
        }
        if (row == row_ends.size()) {
          row_ends.push_back(0);
        }
        row_ends[row] = bar->end;
      } else if (row_ends.empty()) {
        row_ends.push_back(0); // a lane none of whose stages started still gets its row
      }
      bar->row = first + row;
    }
    for (size_t i = 0; i < row_ends.size(); ++i) {
      t.row_labels.push_back(i == 0 ? (group.empty() ? "(no lane)" : group) : "");
      t.row_on_path.push_back(false);
    }
  }
  add_publish_row(t);
  return t;
}

/// A step for the time axis that gives at most about ten ticks.
double tick_step(double span) {
  for (double step : {1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0,
                      3600.0, 7200.0, 14400.0, 21600.0, 43200.0}) {
    if (span / step <= 10) {
      return step;
    }
  }
  return 86400.0 * std::ceil(span / 86400.0 / 10);
}

void time_axis(std::string& out, const Timeline& t, double top, double bottom) {
  out += "<g class=\"axis\">";
  double step = tick_step(t.span);
  for (double at = 0; at <= t.span + 1e-9; at += step) {
    double x = x_of(t, at);
    fmt::format_to(std::back_inserter(out),
                   "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" "
                   "y2=\"{2:.1f}\"/><text class=\"tick\" x=\"{0:.1f}\" y=\"{3:.1f}\">{4}</text>",
                   x, top, bottom, top - 6, esc(seconds_text(at)));
  }
  out += "</g>";
}

/// A bar's name on a row its group labels: without the lane, which a lane's row says.
std::string short_name(const Bar& bar) {
  std::string prefix = bar.lane + "/";
  if (bar.group == bar.lane && !bar.lane.empty() && bar.name.starts_with(prefix)) {
    return bar.name.substr(prefix.size());
  }
  return bar.name;
}

std::string outcome_class(const std::string& outcome) {
  return "outcome-" + css_token(outcome.substr(0, outcome.find(':')));
}

/// A bar's label: after the bar when it fits before `room_end` (the next bar on its row, or the
/// chart's edge), else inside the bar when it fits there, else none (the bar's title says it).
void bar_label(std::string& out, const std::string& text, double x, double width, double y,
               double room_end) {
  std::string label = clipped(text, 60);
  double needed = 7.0 * static_cast<double>(label.size());
  bool after = x + width + 4 + needed <= room_end;
  if (!after && needed + 8 > width) {
    return;
  }
  fmt::format_to(std::back_inserter(out),
                 "<text class=\"bar-label{}\" x=\"{:.1f}\" y=\"{:.1f}\"{}>{}</text>",
                 after ? "" : " inside", after ? x + width + 4 : x + width - 4,
                 y + k_bar_height - 4, after ? "" : " text-anchor=\"end\"", esc(label));
}

void gantt(std::string& out, const Timeline& t, const Json& manifest) {
  out += "<section id=\"timeline\"><h2>Stages over time</h2>\n";
  if (t.bars.empty()) {
    out += "<p class=\"note\">The manifest lists no stages.</p></section>\n";
    return;
  }
  double top = k_axis_height;
  double height = top + static_cast<double>(t.row_labels.size()) * k_row_height + 8;
  fmt::format_to(std::back_inserter(out),
                 "<svg class=\"gantt-chart\" "
                 "viewBox=\"0 0 {0} {1:.0f}\" width=\"{0}\" height=\"{1:.0f}\" role=\"img\" "
                 "aria-label=\"stages over time\">",
                 k_width, height);
  time_axis(out, t, top, height - 4);
  out += "<g class=\"rows\">";
  for (size_t row = 0; row < t.row_labels.size(); ++row) {
    double y = top + static_cast<double>(row) * k_row_height;
    fmt::format_to(std::back_inserter(out),
                   "<text class=\"row-label{}\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>",
                   t.row_on_path[row] ? " on-path" : "", k_label_width - 8,
                   y + k_row_height / 2 + 4, esc(clipped(t.row_labels[row], 40)));
  }
  out += "</g>";
  fmt::format_to(std::back_inserter(out), "<g class=\"gantt\" data-rows=\"{}\">",
                 t.row_labels.size());
  for (const Bar& bar : t.bars) {
    double y =
        top + static_cast<double>(bar.row) * k_row_height + (k_row_height - k_bar_height) / 2;
    double x = x_of(t, bar.started ? bar.start : 0);
    double width = bar.started ? std::max(x_of(t, bar.end) - x, 2.0) : 0;
    std::string verdicts;
    for (const auto& a : bar.attempts) {
      verdicts += fmt::format("{}{}{} {}", verdicts.empty() ? "" : ", ",
                              a.purpose == "publish" ? "publish " : "#", a.number, a.verdict);
    }
    size_t builds = 0;
    for (const auto& a : bar.attempts) {
      builds += a.purpose != "publish" ? 1 : 0;
    }
    std::string title =
        bar.started
            ? fmt::format("{}{}{}: {}, {:.3f} s, {} attempt{} ({}), from {:.1f}s to {:.1f}s{}",
                          bar.name, bar.lane.empty() ? "" : " (lane " + bar.lane + ")",
                          bar.worker.empty() ? "" : " on worker " + bar.worker,
                          bar.outcome.empty() ? "unfinished" : bar.outcome, bar.end - bar.start,
                          builds, builds == 1 ? "" : "s", verdicts, bar.start, bar.end,
                          bar.critical ? "; on the critical path" : "")
            : fmt::format("{}: not started ({})", bar.name,
                          bar.outcome.empty() ? "no outcome recorded" : bar.outcome);
    if (std::string failure = text_field(*bar.stage, "failure"); !failure.empty()) {
      title += "\n" + clipped(failure, 300);
    }
    fmt::format_to(std::back_inserter(out),
                   "<rect class=\"bar {}{}{}\" data-stage=\"{}\" data-lane=\"{}\" "
                   "data-worker=\"{}\" data-group=\"{}\" data-outcome=\"{}\" "
                   "data-start=\"{:.3f}\" data-seconds=\"{:.3f}\" data-attempts=\"{}\" "
                   "x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" rx=\"2\"><title>{}"
                   "</title></rect>",
                   outcome_class(bar.outcome), bar.critical ? " critical" : "",
                   bar.started ? "" : " unstarted", esc(bar.name), esc(bar.lane), esc(bar.worker),
                   esc(bar.group), esc(bar.outcome), bar.start, bar.end - bar.start, builds, x, y,
                   width, k_bar_height, esc(title));
    for (const auto& a : bar.attempts) {
      double ax = x_of(t, a.start);
      fmt::format_to(std::back_inserter(out),
                     "<rect class=\"attempt verdict-{}\" data-stage=\"{}\" data-attempt=\"{}\" "
                     "data-purpose=\"{}\" data-verdict=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" "
                     "width=\"{:.1f}\" height=\"4\"><title>{} {} {}: {}, {:.3f} s</title></rect>",
                     css_token(a.verdict), esc(bar.name), a.number, esc(a.purpose), esc(a.verdict),
                     ax, y + k_bar_height - 4, std::max(x_of(t, a.start + a.seconds) - ax, 1.0),
                     esc(bar.name), esc(a.purpose), a.number, esc(a.verdict), a.seconds);
    }
    if (!bar.started && t.lanes) {
      continue; // a lane's row holds several stages: the note below the chart names these
    }
    std::string label =
        bar.started ? (t.lanes ? short_name(bar) + " " : "") + seconds_text(bar.end - bar.start)
                    : "not started: " + bar.outcome;
    double room_end = k_width;
    for (const Bar& next : t.bars) {
      if (&next != &bar && next.started && next.row == bar.row && next.start >= bar.end - 1e-6) {
        room_end = std::min(room_end, x_of(t, next.start));
      }
    }
    bar_label(out, label, x, width, y, room_end);
  }
  for (size_t i = 0; i < t.publishes.size(); ++i) {
    const PublishSpan& p = t.publishes[i];
    double y =
        top + static_cast<double>(t.publish_row) * k_row_height + (k_row_height - k_bar_height) / 2;
    double x = x_of(t, p.start);
    double width = std::max(x_of(t, p.end) - x, 2.0);
    fmt::format_to(std::back_inserter(out),
                   "<rect class=\"publish-bar {}\" data-publish=\"{}\" data-status=\"{}\" "
                   "data-start=\"{:.3f}\" data-seconds=\"{:.3f}\" x=\"{:.1f}\" y=\"{:.1f}\" "
                   "width=\"{:.1f}\" height=\"{}\" rx=\"2\"><title>publish {}: {}, {:.3f} s, from "
                   "{:.1f}s to {:.1f}s</title></rect>",
                   outcome_class(p.status), esc(p.ref), esc(p.status), p.start, p.end - p.start, x,
                   y, width, k_bar_height, esc(p.ref), esc(p.status), p.end - p.start, p.start,
                   p.end);
    double room_end = i + 1 < t.publishes.size() ? x_of(t, t.publishes[i + 1].start) : k_width;
    bar_label(out, p.status + " " + seconds_text(p.end - p.start), x, width, y, room_end);
  }
  out += "</g></svg>\n";
  // The legend: what a bar's colour and outline say.
  std::set<std::string> outcomes;
  for (const Bar& bar : t.bars) {
    outcomes.insert(bar.outcome.substr(0, bar.outcome.find(':')));
  }
  std::vector<std::string> path;
  for (const Json& name : json_array(json_member(manifest, "critical_path"), "stages")) {
    path.push_back(scalar_text(name));
  }
  std::string joined;
  for (const auto& name : path) {
    joined += (joined.empty() ? "" : " → ") + name;
  }
  fmt::format_to(
      std::back_inserter(out),
      "<ul class=\"legend\"><li class=\"legend-critical\"><svg width=\"26\" "
      "height=\"14\"><rect class=\"swatch critical-swatch outcome-built\" x=\"2\" y=\"2\" "
      "width=\"22\" height=\"10\" rx=\"2\"/></svg> critical path: {} ({})</li>",
      path.empty() ? "none recorded" : esc(joined),
      esc(seconds_text(
          number_field(json_member(manifest, "critical_path"), "seconds").value_or(0))));
  for (const auto& outcome : outcomes) {
    fmt::format_to(std::back_inserter(out),
                   "<li><svg width=\"26\" height=\"14\"><rect class=\"swatch {}\" x=\"2\" y=\"2\" "
                   "width=\"22\" height=\"10\" rx=\"2\"/></svg> {}</li>",
                   outcome_class(outcome), esc(outcome.empty() ? "unfinished" : outcome));
  }
  out += "<li>thin strip under a bar: one attempt, coloured by its verdict</li></ul>\n";
  std::string unstarted;
  for (const Bar& bar : t.bars) {
    if (!bar.started) {
      unstarted += fmt::format("{}{} ({})", unstarted.empty() ? "" : ", ", bar.name,
                               bar.outcome.empty() ? "no outcome recorded" : bar.outcome);
    }
  }
  if (t.lanes && !unstarted.empty()) {
    fmt::format_to(std::back_inserter(out), "<p class=\"note unstarted\">Not started: {}.</p>\n",
                   esc(unstarted));
  }
  out += "<p class=\"note\">The manifest records start times to the second: a bar starts in "
         "that second, and not before the stages it needs ended.</p>\n</section>\n";
}

struct Series {
  const char* name;
  const char* label;
  double ResourceRow::*value;
};

void resource_chart(std::string& out, const Timeline& t, const ReportInput& in) {
  out += "<section id=\"resources\"><h2>Host resources</h2>\n";
  if (in.resources.empty()) {
    fmt::format_to(
        std::back_inserter(out), "<p class=\"note\">{}</p></section>\n",
        esc(in.resources_note.empty() ? "resources.csv holds no samples" : in.resources_note));
    return;
  }
  std::vector<size_t> kept;
  size_t stride = (in.resources.size() + k_max_points - 1) / k_max_points;
  for (size_t i = 0; i < in.resources.size(); ++i) {
    if (i % stride == 0 || i + 1 == in.resources.size()) {
      kept.push_back(i);
    }
  }
  struct Panel {
    const char* name;
    const char* title;
    std::vector<Series> series;
    double max;
  };
  double ram_max = 1;
  double disk_max = 1;
  for (const auto& row : in.resources) {
    ram_max = std::max({ram_max, row.free_ram_gb, row.committed_gb});
    disk_max = std::max(disk_max, row.free_disk_gb);
  }
  std::vector<Panel> panels = {
      {"cpu", "CPU %", {{"cpu", "CPU use, %", &ResourceRow::cpu_pct}}, 100},
      {"memory",
       "RAM GiB",
       {{"ram", "free RAM, GiB", &ResourceRow::free_ram_gb},
        {"committed", "committed memory, GiB", &ResourceRow::committed_gb}},
       ram_max * 1.1},
      {"disk",
       "free disk GiB",
       {{"disk", "free disk, GiB", &ResourceRow::free_disk_gb}},
       disk_max * 1.1},
  };
  double top = k_axis_height;
  double height = top + static_cast<double>(panels.size()) * (k_panel_height + k_panel_gap);
  fmt::format_to(std::back_inserter(out),
                 "<svg class=\"resources\" data-samples=\"{0}\" "
                 "viewBox=\"0 0 {1} {2:.0f}\" width=\"{1}\" height=\"{2:.0f}\" role=\"img\" "
                 "aria-label=\"host resources over time\">",
                 in.resources.size(), k_width, height);
  time_axis(out, t, top, height - k_panel_gap + 4);
  for (size_t p = 0; p < panels.size(); ++p) {
    const Panel& panel = panels[p];
    double y0 = top + static_cast<double>(p) * (k_panel_height + k_panel_gap) + 6;
    double y1 = y0 + k_panel_height;
    fmt::format_to(std::back_inserter(out),
                   "<g class=\"panel {0}\"><rect class=\"frame\" x=\"{1:.1f}\" y=\"{2:.1f}\" "
                   "width=\"{3:.1f}\" height=\"{4:.1f}\"/><text class=\"row-label\" x=\"{5:.1f}\" "
                   "y=\"{6:.1f}\">{7}</text><text class=\"scale\" x=\"{5:.1f}\" y=\"{8:.1f}\">"
                   "{9:.1f}</text><text class=\"scale\" x=\"{5:.1f}\" y=\"{10:.1f}\">0</text>",
                   panel.name, k_label_width, y0, k_plot_width, k_panel_height, k_label_width - 8,
                   y0 + k_panel_height / 2 + 4, panel.title, y0 + 10, panel.max, y1);
    for (const Series& series : panel.series) {
      std::string points;
      size_t count = 0;
      for (size_t i : kept) {
        const ResourceRow& row = in.resources[i];
        std::optional<double> at = parse_utc(row.time);
        if (!at) {
          continue;
        }
        double value = std::clamp(row.*series.value, 0.0, panel.max);
        fmt::format_to(std::back_inserter(points), "{}{:.1f},{:.1f}", points.empty() ? "" : " ",
                       x_of(t, *at - t.origin), y1 - value / panel.max * k_panel_height);
        ++count;
      }
      fmt::format_to(std::back_inserter(out),
                     "<polyline class=\"series {}\" data-points=\"{}\" points=\"{}\"><title>{}"
                     "</title></polyline>",
                     series.name, count, points, series.label);
    }
    out += "</g>";
  }
  out += "<g class=\"boundaries\">";
  for (const Bar& bar : t.bars) {
    if (!bar.started) {
      continue;
    }
    for (auto [edge, at] : {std::pair<const char*, double>{"start", bar.start}, {"end", bar.end}}) {
      double x = x_of(t, at);
      fmt::format_to(std::back_inserter(out),
                     "<line class=\"boundary {0}\" data-stage=\"{1}\" data-edge=\"{0}\" "
                     "x1=\"{2:.1f}\" y1=\"{3:.1f}\" x2=\"{2:.1f}\" y2=\"{4:.1f}\"><title>{1} "
                     "{0}s at {5:.1f}s</title></line>",
                     edge, esc(bar.name), x, top, height - k_panel_gap + 4, at);
    }
  }
  out += "</g></svg>\n";
  fmt::format_to(
      std::back_inserter(out),
      "<ul class=\"legend\"><li><span class=\"key cpu\"></span> CPU use</li><li><span "
      "class=\"key ram\"></span> free RAM</li><li><span class=\"key committed\"></span> "
      "committed memory</li><li><span class=\"key disk\"></span> free disk</li><li><span "
      "class=\"key boundary\"></span> a stage starts or ends</li></ul>\n<p class=\"note\">{} "
      "sample{} from resources.csv{}.</p>\n",
      in.resources.size(), in.resources.size() == 1 ? "" : "s",
      kept.size() < in.resources.size() ? fmt::format(", {} of them drawn", kept.size()) : "");
  out += "</section>\n";
}

void header(std::string& out, const Json& m) {
  std::string status = text_field(m, "status");
  const Json& engine = json_member(m, "engine");
  const Json& path = json_member(m, "critical_path");
  std::string joined;
  for (const Json& name : json_array(path, "stages")) {
    joined += (joined.empty() ? "" : " → ") + scalar_text(name);
  }
  fmt::format_to(std::back_inserter(out),
                 "<header id=\"summary\"><h1>kiln run <span class=\"run-id\">{}</span> "
                 "<span class=\"status status-{}\">{}</span></h1>\n<dl class=\"facts\">",
                 esc(text_field(m, "run_id")), css_token(status.substr(0, status.find(':'))),
                 esc(status.empty() ? "unknown" : status));
  auto fact = [&out](const char* key, const char* term, const std::string& value) {
    fmt::format_to(std::back_inserter(out), "<div data-fact=\"{}\"><dt>{}</dt><dd>{}</dd></div>",
                   key, term, esc(value));
  };
  fact("chain", "chain", text_field(json_member(m, "chain"), "name"));
  fact("engine", "engine",
       fmt::format("{} {}", text_field(engine, "name"), text_field(engine, "version")));
  fact("host", "host", text_field(m, "host"));
  fact("started", "started", text_field(m, "started"));
  fact("ended", "ended", text_field(m, "ended").empty() ? "-" : text_field(m, "ended"));
  fact("wall-seconds", "wall time",
       fmt::format("{:.3f} s", number_field(m, "wall_seconds").value_or(0)));
  fact("critical-path", "critical path", joined.empty() ? "-" : joined);
  fact("critical-path-seconds", "critical path time",
       fmt::format("{:.3f} s", number_field(path, "seconds").value_or(0)));
  fact("max-parallel", "stages at once", scalar_text(json_member(m, "max_parallel")));
  if (std::string reason = text_field(m, "status_reason"); !reason.empty()) {
    fact("status-reason", "why", clipped(reason));
  }
  out += "</dl>\n";
  const Json& errors = json_array(m, "record_errors");
  if (!errors.empty()) {
    out += "<ul class=\"record-errors\">";
    for (const Json& error : errors) {
      fmt::format_to(std::back_inserter(out), "<li>{}</li>", esc(clipped(scalar_text(error))));
    }
    out += "</ul>\n";
  }
  if (auto schema = number_field(m, "schema"); !schema || *schema != k_manifest_schema) {
    fmt::format_to(std::back_inserter(out),
                   "<p class=\"note\">This manifest has schema {}; this report reads schema {} "
                   "and leaves out what it does not find.</p>\n",
                   schema ? esc(scalar_text(json_member(m, "schema"))) : "none", k_manifest_schema);
  }
  out += "</header>\n";
}

/// The attempt whose numbers describe the stage's build: its last build attempt (a schema 7
/// manifest also holds the pushes of a gated image, purpose `publish`).
const Json* last_build(const Json& stage) {
  const Json* found = nullptr;
  for (const Json& attempt : json_array(stage, "attempts")) {
    if (text_field(attempt, "purpose") != "publish" || found == nullptr) {
      found = &attempt;
    }
  }
  return found;
}

std::string count_pair(const Json& object, const char* part, const char* whole) {
  if (!number_field(object, whole)) {
    return "-";
  }
  return fmt::format("{}/{}", scalar_text(json_member(object, part)),
                     scalar_text(json_member(object, whole)));
}

void stages_table(std::string& out, const Timeline& t) {
  out += "<section id=\"stages\"><h2>Stages</h2>\n<table class=\"stages\"><thead><tr><th>stage"
         "</th><th>lane</th><th>status</th><th>outcome</th><th>seconds</th><th>attempts</th>"
         "<th>needs</th><th>image</th><th>failure</th></tr></thead><tbody>\n";
  for (const Bar& bar : t.bars) {
    const Json& s = *bar.stage;
    std::string needs;
    for (const Json& need : json_array(s, "needs")) {
      needs += (needs.empty() ? "" : ", ") + scalar_text(need);
    }
    std::string image = text_field(s, "image_id");
    fmt::format_to(std::back_inserter(out),
                   "<tr data-stage=\"{0}\"{1}><td>{0}{2}</td><td>{3}</td><td>{4}</td><td>{5}</td>"
                   "<td class=\"num\">{6:.3f}</td><td class=\"num\">{7}</td><td>{8}</td>"
                   "<td><code title=\"{9}\">{10}</code></td><td class=\"failure\">{11}</td></tr>\n",
                   esc(bar.name), bar.critical ? " class=\"on-path\"" : "",
                   bar.critical ? " <span class=\"mark\" title=\"on the critical path\">*</span>"
                                : "",
                   esc(bar.lane), esc(text_field(s, "status")), esc(text_field(s, "outcome")),
                   number_field(s, "seconds").value_or(0), json_array(s, "attempts").size(),
                   esc(needs), esc(image), esc(image.substr(0, image.rfind(':') + 1 + 12)),
                   esc(clipped(text_field(s, "failure"))));
  }
  out += "</tbody></table>\n</section>\n";
}

void cache_table(std::string& out, const Timeline& t) {
  out += "<section id=\"cache\"><h2>Layer and compile caches</h2>\n<p class=\"note\">Each stage's "
         "last build attempt.</p>\n<table class=\"cache\"><thead><tr><th>stage</th><th>steps "
         "cached</th><th>vertices cached</th><th>compiles</th><th>hits</th><th>misses</th>"
         "<th>errors</th><th>bypasses</th><th>served sccache/ccache/direct</th><th>compile "
         "floor</th></tr></thead><tbody>\n";
  for (const Bar& bar : t.bars) {
    const Json* attempt = last_build(*bar.stage);
    const Json& compile =
        attempt != nullptr ? json_member(*attempt, "compile") : json_member(Json(), "");
    std::string served = "-";
    if (const Json& s = json_member(compile, "served"); s.is_object()) {
      served =
          fmt::format("{}/{}/{}", scalar_text(json_member(s, "sccache")),
                      scalar_text(json_member(s, "ccache")), scalar_text(json_member(s, "direct")));
    }
    auto number = [&compile](const char* key) {
      std::string text = scalar_text(json_member(compile, key));
      return text.empty() ? std::string("-") : text;
    };
    bool buildkit = attempt != nullptr && number_field(*attempt, "vertices").value_or(0) > 0;
    fmt::format_to(std::back_inserter(out),
                   "<tr data-stage=\"{}\"><td>{}</td><td class=\"num steps\">{}</td><td "
                   "class=\"num\">{}</td><td class=\"num compiles\">{}</td><td class=\"num\">{}"
                   "</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}"
                   "</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
                   esc(bar.name), esc(bar.name),
                   attempt != nullptr ? count_pair(*attempt, "steps_cached", "steps_run") : "-",
                   buildkit ? count_pair(*attempt, "vertices_cached", "vertices") : "-",
                   number("compile_requests"), number("hits"), number("misses"), number("errors"),
                   number("bypasses"), served,
                   esc(clipped(text_field(*bar.stage, "compile_floor"))));
  }
  out += "</tbody></table>\n</section>\n";
}

void attempts_table(std::string& out, const Timeline& t) {
  out += "<section id=\"attempts\"><h2>Attempts</h2>\n<table class=\"attempts\"><thead><tr>"
         "<th>stage</th><th>attempt</th><th>started</th><th>seconds</th><th>exit</th>"
         "<th>verdict</th><th>steps cached</th><th>why</th><th>log</th></tr></thead><tbody>\n";
  size_t rows = 0;
  for (const Bar& bar : t.bars) {
    for (const Json& a : json_array(*bar.stage, "attempts")) {
      ++rows;
      std::string verdict = text_field(a, "verdict");
      std::string cls = text_field(a, "transient_class");
      std::string why;
      if (std::string reason = text_field(a, "reason"); !reason.empty()) {
        why += fmt::format("<div class=\"reason\">{}</div>", esc(clipped(reason)));
      }
      if (std::string line = text_field(a, "matched_line"); !line.empty()) {
        why += fmt::format("<code class=\"matched-line\">{}</code>", esc(clipped(line)));
      }
      if (std::string stopped = text_field(a, "stopped_by"); !stopped.empty()) {
        why += fmt::format("<div class=\"stopped\">stopped by {} after {:.1f} s of silence; last "
                           "line: <code>{}</code></div>",
                           esc(stopped), number_field(a, "silent_seconds").value_or(0),
                           esc(clipped(text_field(a, "last_line"))));
      }
      if (auto cut = number_field(a, "log_truncated_at_byte")) {
        why += fmt::format("<div class=\"cut\">log cut at byte {:.0f}</div>", *cut);
      }
      if (json_member(a, "registry_cache_dropped").is_boolean() &&
          json_member(a, "registry_cache_dropped").get<bool>()) {
        why += "<div>without the registry cache</div>";
      }
      std::string purpose = text_field(a, "purpose");
      fmt::format_to(
          std::back_inserter(out),
          "<tr data-stage=\"{0}\" data-attempt=\"{1}\" data-purpose=\"{2}\"><td>{0}</td>"
          "<td class=\"num\">{3}{1}</td><td class=\"when\">{4}</td><td class=\"num\">{5:.3f}</td>"
          "<td class=\"num\">{6}</td><td class=\"verdict verdict-{7}\">{8}{9}</td>"
          "<td class=\"num\">{10}</td><td class=\"why\">{11}</td><td "
          "class=\"log\"><code>{12}</code>"
          "</td></tr>\n",
          esc(bar.name), esc(scalar_text(json_member(a, "number"))), esc(purpose),
          purpose == "publish" ? "publish " : "", esc(text_field(a, "started")),
          number_field(a, "seconds").value_or(0), esc(scalar_text(json_member(a, "exit_code"))),
          css_token(verdict), esc(verdict),
          cls.empty() ? "" : fmt::format(" <span class=\"class\">({})</span>", esc(cls)),
          count_pair(a, "steps_cached", "steps_run"), why, esc(text_field(a, "log")));
    }
  }
  if (rows == 0) {
    out += "<tr><td colspan=\"9\">No attempt started.</td></tr>\n";
  }
  out += "</tbody></table>\n</section>\n";
}

void gate_row(std::string& out, const std::string& stage, const Json& g) {
  std::string detail;
  for (const Json& finding : json_array(g, "findings")) {
    detail += fmt::format("<div class=\"finding\">{}</div>", esc(clipped(scalar_text(finding))));
  }
  if (std::string reason = text_field(g, "reason"); !reason.empty()) {
    detail += fmt::format("<div class=\"reason\">{}</div>", esc(clipped(reason)));
  }
  std::string verdict = text_field(g, "verdict");
  fmt::format_to(std::back_inserter(out),
                 "<tr data-stage=\"{0}\" data-gate=\"{1}\" data-verdict=\"{2}\"><td>{0}</td>"
                 "<td>{1}</td><td>{3}</td><td class=\"verdict verdict-{4}\">{2}</td><td>{5}</td>"
                 "</tr>\n",
                 esc(stage), esc(text_field(g, "gate")), esc(verdict),
                 esc(clipped(text_field(g, "subject"))), css_token(verdict), detail);
}

void gates_table(std::string& out, const Json& m, const Timeline& t) {
  out += "<section id=\"gates\"><h2>Gates</h2>\n<table class=\"gates\"><thead><tr><th>stage</th>"
         "<th>gate</th><th>subject</th><th>verdict</th><th>findings</th></tr></thead><tbody>\n";
  size_t rows = 0;
  for (const Bar& bar : t.bars) {
    for (const Json& g : json_array(*bar.stage, "gates")) {
      gate_row(out, bar.name, g);
      ++rows;
    }
    const Json& smoke = json_member(*bar.stage, "smoke");
    if (smoke.is_object()) {
      Json g = {{"gate", "smoke"},
                {"subject", fmt::format("{} passed, {} failed, {} skipped (floors: at least {} "
                                        "passed, at most {} skipped)",
                                        scalar_text(json_member(smoke, "passed")),
                                        scalar_text(json_member(smoke, "failed")),
                                        scalar_text(json_member(smoke, "skipped")),
                                        scalar_text(json_member(smoke, "min_passed")),
                                        scalar_text(json_member(smoke, "max_skipped")))},
                {"verdict", text_field(smoke, "verdict")},
                {"findings", json_array(smoke, "summaries")},
                {"reason", text_field(smoke, "reason")}};
      gate_row(out, bar.name, g);
      ++rows;
    }
    std::string not_run;
    for (const Json& gate : json_array(*bar.stage, "gates_not_run")) {
      not_run += (not_run.empty() ? "" : ", ") + scalar_text(gate);
    }
    if (!not_run.empty()) {
      gate_row(out, bar.name,
               Json{{"gate", not_run}, {"subject", "not run"}, {"verdict", "not-run"}});
      ++rows;
    }
  }
  const Json& published = json_array(m, "publish");
  for (const Json& target : published) {
    for (const Json& g : json_array(target, "gates")) {
      gate_row(out, "publish " + text_field(target, "ref"), g);
      ++rows;
    }
  }
  if (rows == 0) {
    out += "<tr><td colspan=\"5\">No gate graded an image in this run.</td></tr>\n";
  }
  out += "</tbody></table>\n";
  for (const Json& target : published) {
    fmt::format_to(std::back_inserter(out),
                   "<p class=\"publish\">Published <code>{}</code>: {} {}{}</p>\n",
                   esc(text_field(target, "ref")), esc(text_field(target, "status")),
                   esc(text_field(target, "digest")),
                   text_field(target, "failure").empty()
                       ? ""
                       : " — " + esc(clipped(text_field(target, "failure"))));
  }
  out += "</section>\n";
}

/// Rows of `key` in the analysis, up to k_max_rows, as a table with `columns` (key, heading).
void analysis_table(std::string& out, const Json& rows, const char* css_class, const char* heading,
                    const std::vector<std::pair<const char*, const char*>>& columns) {
  fmt::format_to(std::back_inserter(out), "<h3>{}</h3>\n", heading);
  if (!rows.is_array() || rows.empty()) {
    fmt::format_to(std::back_inserter(out), "<p class=\"none {}\">None.</p>\n", css_class);
    return;
  }
  // A run with lanes names each row's lane: a stage name alone is in every lane.
  std::vector<std::pair<const char*, const char*>> shown_columns = columns;
  if (std::any_of(rows.begin(), rows.end(),
                  [](const Json& row) { return !scalar_text(json_member(row, "lane")).empty(); })) {
    shown_columns.insert(shown_columns.begin(), {"lane", "lane"});
  }
  fmt::format_to(std::back_inserter(out), "<table class=\"{}\"><thead><tr>", css_class);
  for (const auto& [key, title] : shown_columns) {
    fmt::format_to(std::back_inserter(out), "<th>{}</th>", title);
  }
  out += "</tr></thead><tbody>\n";
  size_t shown = 0;
  for (const Json& row : rows) {
    if (shown++ == k_max_rows) {
      break;
    }
    fmt::format_to(std::back_inserter(out), "<tr data-stage=\"{}\">",
                   esc(scalar_text(json_member(row, "stage"))));
    for (const auto& [key, title] : shown_columns) {
      fmt::format_to(std::back_inserter(out), "<td class=\"{}\">{}</td>", css_token(key),
                     esc(clipped(scalar_text(json_member(row, key)), 300)));
    }
    out += "</tr>\n";
  }
  out += "</tbody></table>\n";
  if (rows.size() > k_max_rows) {
    fmt::format_to(std::back_inserter(out), "<p class=\"note\">{} more not shown.</p>\n",
                   rows.size() - k_max_rows);
  }
}

void analysis_section(std::string& out, const Json& a) {
  out += "<section id=\"analysis\"><h2>Log analysis</h2>\n";
  const Json& warnings = json_member(a, "warnings");
  const Json& idle = json_member(a, "idle_tails");
  fmt::format_to(std::back_inserter(out),
                 "<p class=\"analysis-summary\">{} log{} read; compiler warnings: {} ({} noise, {} "
                 "signal); steps silent at their end: {} s in all, {} step(s) over {} s for {} "
                 "s; fetches without progress: {}.</p>\n",
                 json_array(a, "logs").size(), json_array(a, "logs").size() == 1 ? "" : "s",
                 esc(scalar_text(json_member(warnings, "total"))),
                 esc(scalar_text(json_member(warnings, "noise"))),
                 esc(scalar_text(json_member(warnings, "signal"))),
                 esc(scalar_text(json_member(idle, "total_seconds"))),
                 json_array(idle, "steps").size(),
                 esc(scalar_text(json_member(a, "idle_tail_threshold_seconds"))),
                 esc(scalar_text(json_member(idle, "over_threshold_seconds"))),
                 esc(scalar_text(json_member(a, "fetches_without_progress"))));
  analysis_table(out, json_member(a, "slowest_steps"), "slowest-steps", "Slowest steps",
                 {{"stage", "stage"},
                  {"attempt", "attempt"},
                  {"id", "step"},
                  {"name", "name"},
                  {"seconds", "seconds"}});
  analysis_table(out, json_member(idle, "steps"), "idle-tails",
                 "Idle tails (steps silent at their end)",
                 {{"stage", "stage"},
                  {"attempt", "attempt"},
                  {"id", "step"},
                  {"name", "name"},
                  {"idle_tail_seconds", "idle seconds"}});
  analysis_table(out, json_member(a, "clips"), "clips", "Clipped output",
                 {{"stage", "stage"}, {"attempt", "attempt"}, {"id", "step"}, {"line", "line"}});
  analysis_table(out, json_member(a, "retries"), "retries", "Retries",
                 {{"stage", "stage"}, {"kind", "kind"}, {"detail", "detail"}});
  out += "<h3>Warning classes</h3>\n";
  std::vector<std::pair<double, std::string>> classes;
  if (const Json& c = json_member(warnings, "classes"); c.is_object()) {
    for (auto it = c.begin(); it != c.end(); ++it) {
      classes.emplace_back(it.value().is_number() ? it.value().get<double>() : 0, it.key());
    }
  }
  std::stable_sort(classes.begin(), classes.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  if (classes.empty()) {
    out += "<p class=\"none warnings\">None.</p>\n";
  } else {
    out += "<table class=\"warnings\"><thead><tr><th>class</th><th>count</th></tr></thead>"
           "<tbody>\n";
    for (size_t i = 0; i < classes.size() && i < k_max_rows; ++i) {
      fmt::format_to(std::back_inserter(out),
                     "<tr data-class=\"{0}\"><td><code>{0}</code></td><td class=\"num\">{1:.0f}"
                     "</td></tr>\n",
                     esc(clipped(classes[i].second, 200)), classes[i].first);
    }
    out += "</tbody></table>\n";
  }
  out += "<h3>Errors</h3>\n";
  const Json& errors = json_array(a, "errors");
  if (errors.empty()) {
    out += "<p class=\"none errors\">None.</p>\n";
  } else {
    out += "<div class=\"errors\">\n";
    size_t shown = 0;
    for (const Json& error : errors) {
      if (shown++ == k_max_rows) {
        break;
      }
      const Json& lines = json_array(error, "lines");
      std::string text;
      size_t n = 0;
      for (const Json& line : lines) {
        if (n++ == k_max_error_lines) {
          text += fmt::format("… {} more line(s)\n", lines.size() - k_max_error_lines);
          break;
        }
        text += clipped(scalar_text(line), 500) + "\n";
      }
      fmt::format_to(std::back_inserter(out),
                     "<div class=\"error\" data-stage=\"{0}\"><div class=\"where\">{0} attempt {1} "
                     "step {2}</div><pre>{3}</pre></div>\n",
                     esc(scalar_text(json_member(error, "stage"))),
                     esc(scalar_text(json_member(error, "attempt"))),
                     esc(scalar_text(json_member(error, "id"))), esc(text));
    }
    out += "</div>\n";
  }
  out += "</section>\n";
}

void causes_section(std::string& out, const Json& ex) {
  out += "<section id=\"causes\"><h2>Why stages rebuilt</h2>\n";
  std::string rows;
  for (const Json& s : json_array(ex, "stages")) {
    if (text_field(s, "outcome") != "built") {
      continue;
    }
    // A run recorded before kiln kept causes has builds without one.
    const Json unrecorded = {{"kind", "unrecorded"}, {"summary", "the run recorded no cause"}};
    const Json& cause = json_member(s, "cause").is_object() ? json_member(s, "cause") : unrecorded;
    fmt::format_to(
        std::back_inserter(rows),
        "<tr data-stage=\"{0}\" data-cause=\"{1}\" data-root=\"{2}\" "
        "data-line=\"{3}\"><td>{0}</td><td class=\"num\">{4:.1f}</td><td>{1}</td>"
        "<td class=\"num\">{5}</td><td>{6}</td><td>{2}</td></tr>\n",
        esc(text_field(s, "stage")), esc(text_field(cause, "kind")), esc(text_field(s, "root")),
        esc(scalar_text(json_member(cause, "line"))), number_field(s, "seconds").value_or(0),
        number_field(cause, "line").value_or(0) > 0 ? esc(scalar_text(json_member(cause, "line")))
                                                    : std::string("-"),
        esc(clipped(text_field(cause, "summary"))));
  }
  if (rows.empty()) {
    out += "<p class=\"none causes\">No stage built: every stage that ended ok was served from "
           "the cache.</p>\n";
  } else {
    out += "<table class=\"causes\"><thead><tr><th>stage</th><th>seconds</th><th>cause</th>"
           "<th>line</th><th>first difference from its last good build</th><th>started by</th>"
           "</tr></thead><tbody>\n" +
           rows + "</tbody></table>\n<ul class=\"cause-costs\">";
    for (const Json& r : json_array(ex, "roots")) {
      fmt::format_to(std::back_inserter(out),
                     "<li data-root=\"{0}\" data-seconds=\"{1:.3f}\" data-builds=\"{2}\">"
                     "<b>{0}</b>: {3}: {1:.1f}s across {2} stage(s)</li>",
                     esc(text_field(r, "stage")), number_field(r, "seconds").value_or(0),
                     json_array(r, "stages").size(),
                     esc(clipped(text_field(json_member(r, "cause"), "summary"))));
    }
    out += "</ul>\n";
  }
  out += "</section>\n";
}

void regressions_section(std::string& out, const Json& h) {
  out += "<section id=\"regressions\"><h2>Against earlier runs</h2>\n";
  const Json& rows = json_array(h, "regressions");
  if (rows.empty()) {
    out += "<p class=\"none regressions\">No stage was slower than its history.</p>\n";
  } else {
    out += "<table class=\"regressions\"><thead><tr><th>stage</th><th>lane</th><th>seconds</th>"
           "<th>median of earlier runs</th><th>ratio</th><th>runs</th></tr></thead><tbody>\n";
    for (const Json& r : rows) {
      double seconds = number_field(r, "seconds").value_or(0);
      double median = number_field(r, "median_seconds").value_or(0);
      fmt::format_to(std::back_inserter(out),
                     "<tr data-stage=\"{0}\" data-lane=\"{1}\"><td>{0}</td><td>{1}</td><td "
                     "class=\"num\">{2:.1f}</td><td class=\"num\">{3:.1f}</td><td class=\"num\">"
                     "{4}</td><td class=\"num\">{5}</td></tr>\n",
                     esc(scalar_text(json_member(r, "stage"))),
                     esc(scalar_text(json_member(r, "lane"))), seconds, median,
                     median > 0 ? fmt::format("{:.2f}x", seconds / median) : std::string("-"),
                     esc(scalar_text(json_member(r, "runs"))));
    }
    out += "</tbody></table>\n";
  }
  const Json& eta = json_member(h, "eta_error");
  if (eta.is_object()) {
    out += "<dl class=\"facts eta-error\">";
    for (auto it = eta.begin(); it != eta.end(); ++it) {
      fmt::format_to(std::back_inserter(out), "<div><dt>ETA error, {}</dt><dd>{}</dd></div>",
                     esc(it.key()), esc(scalar_text(it.value())));
    }
    out += "</dl>\n";
  } else if (!eta.is_null()) {
    fmt::format_to(std::back_inserter(out), "<p class=\"eta-error\">ETA error: {}</p>\n",
                   esc(scalar_text(eta)));
  }
  out += "</section>\n";
}

constexpr const char* k_style = R"(
:root{color-scheme:light;--ink:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#fff;--band:#f6f8fa}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--ink);
background:var(--bg);margin:0 auto;padding:16px 24px 48px;max-width:1100px}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:28px 0 8px;padding-bottom:4px;
border-bottom:1px solid var(--line)}h3{font-size:14px;margin:16px 0 6px}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:var(--band);padding:8px;overflow:auto;white-space:pre-wrap;margin:4px 0 10px}
.run-id{font-family:ui-monospace,Menlo,Consolas,monospace}
.status{font-size:14px;padding:2px 8px;border-radius:10px;vertical-align:middle;
background:#e1e4e8}.status-ok{background:#dafbe1;color:#1a7f37}
.status-failed,.status-crashed,.status-record-incomplete{background:#ffebe9;color:#cf222e}
.status-refused,.status-interrupted,.status-abandoned{background:#fff1e5;color:#bc4c00}
.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:4px 16px;
margin:8px 0}.facts dt{color:var(--muted);font-size:12px}.facts dd{margin:0}
nav a{margin-right:12px}.note,.none{color:var(--muted);font-size:12px}
svg{display:block;max-width:100%;height:auto;font-size:11px}
.grid{stroke:#eaeef2}.tick{fill:var(--muted);text-anchor:middle}
.row-label{fill:var(--ink);text-anchor:end}.row-label.on-path{font-weight:600}
.scale{fill:var(--muted);text-anchor:end;font-size:10px}
.bar-label{fill:var(--ink);font-size:10px}.bar-label.inside{fill:#fff}
.outcome-built{fill:#4c78a8}.outcome-reused{fill:#9ecae9}.outcome-failed{fill:#e45756}
.outcome-refused{fill:#f58518}.outcome-interrupted{fill:#b279a2}
.outcome-skipped,.outcome-pending,.outcome-none{fill:#bab0ac}
.outcome-running{fill:#eeca3b}.outcome-crashed,.outcome-abandoned{fill:#79706e}
.outcome-published{fill:#54a24b}.outcome-held{fill:#bab0ac}.outcome-blocked{fill:#f58518}
.critical,.critical-swatch{stroke:#111;stroke-width:2.5}
.attempt{fill:#54a24b}.verdict-retry{fill:#f58518}.verdict-permanent,.verdict-exhausted,
.verdict-refused-identical,.verdict-crashed{fill:#b22222}.verdict-interrupted{fill:#7a4b94}
.verdict-running{fill:#eeca3b}
.legend{list-style:none;padding:0;margin:6px 0;display:flex;flex-wrap:wrap;gap:4px 18px;
font-size:12px}.legend li{display:flex;align-items:center;gap:4px}.legend svg{display:inline}
.key{display:inline-block;width:18px;height:3px}.key.cpu{background:#e45756}
.key.ram{background:#4c78a8}.key.committed{background:#9ecae9}.key.disk{background:#54a24b}
.key.boundary{background:#bbb;width:2px;height:12px}
.frame{fill:var(--band);stroke:var(--line)}.series{fill:none;stroke-width:1.6}
.series.cpu{stroke:#e45756}.series.ram{stroke:#4c78a8}
.series.committed{stroke:#9ecae9;stroke-dasharray:4 3}.series.disk{stroke:#54a24b}
.boundary{stroke:#bbb;stroke-width:1;stroke-dasharray:2 3}
table{border-collapse:collapse;width:100%;font-size:13px;margin:4px 0 8px}
th,td{border-bottom:1px solid var(--line);padding:4px 6px;text-align:left;vertical-align:top}
th{background:var(--band);font-weight:600}td.num{text-align:right;white-space:nowrap}
tr.on-path td:first-child{font-weight:600}.mark{color:#111}
td.verdict-ok,td.verdict-pass{color:#1a7f37}td.verdict-retry{color:#bc4c00}
td.verdict-permanent,td.verdict-exhausted,td.verdict-refused-identical,td.verdict-refused,
td.verdict-unreadable,td.verdict-failed{color:#cf222e}
.matched-line{display:block;background:var(--band);padding:2px 4px;white-space:pre-wrap;
word-break:break-all}.class{color:var(--muted)}.failure,.why{max-width:420px}
td.when,td.log{white-space:nowrap}.error .where{font-weight:600}.record-errors{color:#cf222e}
footer{margin-top:32px;color:var(--muted);font-size:12px}
)";

} // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

std::string render_report(const ReportInput& in) {
  const Json& m = in.manifest;
  Timeline t = lay_out(m, in.resources);
  std::string out;
  out.reserve(64 * 1024);
  std::string status = text_field(m, "status");
  fmt::format_to(std::back_inserter(out),
                 "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                 "<title>kiln run {} — {}</title>\n<style>{}</style>\n</head>\n"
                 "<body data-run-id=\"{}\" data-status=\"{}\">\n",
                 esc(text_field(m, "run_id")), esc(status), k_style, esc(text_field(m, "run_id")),
                 esc(status));
  header(out, m);
  out += "<nav><a href=\"#timeline\">timeline</a><a href=\"#resources\">resources</a>"
         "<a href=\"#stages\">stages</a><a href=\"#cache\">caches</a><a href=\"#attempts\">"
         "attempts</a><a href=\"#gates\">gates</a>";
  if (in.analysis) {
    out += "<a href=\"#analysis\">log analysis</a>";
  }
  if (in.explanation) {
    out += "<a href=\"#causes\">rebuild causes</a>";
  }
  if (in.history) {
    out += "<a href=\"#regressions\">regressions</a>";
  }
  out += "</nav>\n";
  gantt(out, t, m);
  resource_chart(out, t, in);
  stages_table(out, t);
  cache_table(out, t);
  if (in.explanation) {
    causes_section(out, *in.explanation);
  }
  attempts_table(out, t);
  gates_table(out, m, t);
  if (in.analysis) {
    analysis_section(out, *in.analysis);
  }
  if (in.history) {
    regressions_section(out, *in.history);
  }
  fmt::format_to(std::back_inserter(out),
                 "<footer>Written by <code>kiln report</code> from the record of run {} of chain "
                 "{}.</footer>\n</body>\n</html>\n",
                 esc(text_field(m, "run_id")), esc(text_field(json_member(m, "chain"), "name")));
  return out;
}

tl::expected<ReportInput, std::string> read_run_record(const std::filesystem::path& run_dir,
                                                       const Json* log_analysis) {
  std::filesystem::path manifest_path = run_dir / "manifest.json";
  auto text = read_file(manifest_path);
  if (!text) {
    return tl::unexpected(text.error());
  }
  ReportInput in;
  in.manifest = Json::parse(*text, nullptr, false);
  if (in.manifest.is_discarded() || !in.manifest.is_object()) {
    return tl::unexpected(
        fmt::format("{} is not a JSON object: not a kiln manifest", manifest_path.string()));
  }
  std::filesystem::path csv = run_dir / "resources.csv";
  std::error_code error;
  if (!std::filesystem::exists(csv, error)) {
    in.resources_note = "This run has no resources.csv (sampling was off, or the run stopped "
                        "before it started).";
  } else if (auto rows = read_resource_csv(csv); !rows) {
    in.resources_note = "resources.csv could not be read: " + rows.error();
  } else {
    in.resources = std::move(*rows);
  }
  if (log_analysis != nullptr) {
    in.analysis = *log_analysis;
  } else if (auto analysis = forensics::analyze_target(run_dir.string(), run_dir.parent_path(),
                                                       forensics::Options{})) {
    in.analysis = forensics::to_json(*analysis);
  }
  in.history = run_history_json(run_dir);
  if (auto explained = explain_run(run_dir, nullptr)) {
    in.explanation = explanation_json(*explained);
  }
  return in;
}

tl::expected<void, std::string> write_run_report(const std::filesystem::path& run_dir,
                                                 const std::filesystem::path& out,
                                                 const Json* log_analysis) {
  auto in = read_run_record(run_dir, log_analysis);
  if (!in) {
    return tl::unexpected(in.error());
  }
  return write_file_atomic(out, render_report(*in), Durability::rename_only);
}

} // namespace kiln
