#include "forensics/trace.h"

#include <cmath>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "util/sha256.h"
#include "util/time.h"

namespace kiln::forensics {

namespace {

using nlohmann::json;

std::string text_of(const json& event, const char* key) {
  auto it = event.find(key);
  return it != event.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/// A number field of an event, `fallback` when it is missing or not a number: a hand-edited
/// file must not end the trace.
template <typename T> T number_of(const json& event, const char* key, T fallback) {
  auto it = event.find(key);
  return it != event.end() && it->is_number() ? it->get<T>() : fallback;
}

/// Builds the spans as the events come: each kind of span is opened by one event and closed by
/// another, looked up by what names it.
class SpanBuilder {
public:
  explicit SpanBuilder(Trace& trace) : m_trace(trace) {}

  void take(const json& event) {
    const std::string type = text_of(event, "type");
    const double t = number_of(event, "t", 0.0);
    m_last = std::max(m_last, t);
    const std::string stage = text_of(event, "stage");
    if (type == "run.started") {
      m_trace.run_id = text_of(event, "run_id");
      m_trace.started_epoch = parse_utc(text_of(event, "time")).value_or(0) - t;
      m_run = open("run", "run " + m_trace.run_id, t, -1, "run",
                   {{"chain", text_of(event, "chain")},
                    {"engine", text_of(event, "engine")},
                    {"engine_version", text_of(event, "engine_version")},
                    {"host", text_of(event, "host")}});
    } else if (type == "stage.started") {
      const std::string lane = text_of(event, "lane");
      int parent = m_run;
      if (!lane.empty()) {
        auto found = m_lanes.find(lane);
        if (found == m_lanes.end()) {
          found = m_lanes.emplace(lane, open("lane", "lane " + lane, t, m_run, "lane " + lane, {}))
                      .first;
        }
        parent = found->second;
      }
      m_stages[stage] = open("stage", stage, t, parent, stage, {{"lane", lane}});
    } else if (type == "attempt.started") {
      close_step(stage);
      m_attempts[stage] =
          open("attempt", fmt::format("{} attempt {}", stage, number_of(event, "attempt", 0)), t,
               parent_of(m_stages, stage), stage, {{"attempt", number_of(event, "attempt", 0)}});
    } else if (type == "step.started") {
      close_step(stage);
      m_steps[stage] =
          open("step", text_of(event, "instruction"), t, parent_of(m_attempts, stage), stage,
               {{"build_stage", text_of(event, "build_stage")},
                {"step", number_of(event, "step", 0)},
                {"steps", number_of(event, "steps", 0)}});
    } else if (type == "attempt.ended") {
      close_step(stage);
      if (Span* span = take_open(m_attempts, stage, t)) {
        const std::string verdict = text_of(event, "verdict");
        span->failed = verdict != "ok";
        span->fields["verdict"] = verdict;
        span->fields["exit_code"] = number_of(event, "exit_code", -1);
        span->fields["steps_run"] = number_of(event, "steps_run", 0);
        span->fields["steps_cached"] = number_of(event, "steps_cached", 0);
        span->fields["cached"] =
            number_of(event, "steps_run", 0) > 0 &&
            number_of(event, "steps_cached", 0) == number_of(event, "steps_run", 0);
        if (std::string cls = text_of(event, "class"); !cls.empty()) {
          span->fields["class"] = cls;
        }
      }
    } else if (type == "stage.ended") {
      close_step(stage);
      take_open(m_attempts, stage, t);
      if (Span* span = take_open(m_stages, stage, t)) {
        const std::string status = text_of(event, "status");
        span->failed = status != "ok";
        span->fields["status"] = status;
        span->fields["outcome"] = text_of(event, "outcome");
        if (std::string image = text_of(event, "image"); !image.empty()) {
          span->fields["image"] = image;
        }
        extend_lane(*span);
      }
    } else if (type == "run.ended") {
      if (m_run >= 0) {
        Span& run = m_trace.spans[static_cast<size_t>(m_run)];
        run.end = t;
        run.failed = text_of(event, "status") != "ok";
        run.fields["status"] = text_of(event, "status");
        run.fields["exit_code"] = number_of(event, "exit_code", 0);
        m_run_ended = true;
      }
    }
  }

  /// Close what a killed run left open at its last event.
  void finish() {
    for (auto* open : {&m_steps, &m_attempts, &m_stages}) {
      for (auto& [stage, index] : *open) {
        Span& span = m_trace.spans[static_cast<size_t>(index)];
        span.end = m_last;
        span.failed = true;
        span.fields["ended"] = false;
      }
      open->clear();
    }
    if (m_run >= 0 && !m_run_ended) {
      Span& run = m_trace.spans[static_cast<size_t>(m_run)];
      run.end = m_last;
      run.failed = true;
      run.fields["ended"] = false;
    }
  }

private:
  int open(std::string kind, std::string name, double t, int parent, std::string row, json fields) {
    m_trace.spans.push_back(
        {std::move(kind), std::move(name), t, t, parent, std::move(row), false, std::move(fields)});
    return static_cast<int>(m_trace.spans.size()) - 1;
  }

  int parent_of(const std::map<std::string, int>& open, const std::string& stage) const {
    auto found = open.find(stage);
    return found != open.end() ? found->second : m_run;
  }

  Span* take_open(std::map<std::string, int>& open, const std::string& stage, double t) {
    auto found = open.find(stage);
    if (found == open.end()) {
      return nullptr;
    }
    Span* span = &m_trace.spans[static_cast<size_t>(found->second)];
    span->end = t;
    open.erase(found);
    return span;
  }

  void close_step(const std::string& stage) {
    if (Span* step = take_open(m_steps, stage, m_last)) {
      (void)step;
    }
  }

  /// A lane spans from its first stage's start to its last stage's end.
  void extend_lane(const Span& stage) {
    if (stage.parent >= 0 && stage.parent != m_run) {
      Span& lane = m_trace.spans[static_cast<size_t>(stage.parent)];
      lane.end = std::max(lane.end, stage.end);
      lane.failed = lane.failed || stage.failed;
    }
  }

  Trace& m_trace;
  int m_run = -1;
  bool m_run_ended = false;
  double m_last = 0;
  std::map<std::string, int> m_lanes;
  std::map<std::string, int> m_stages;   // open, by stage
  std::map<std::string, int> m_attempts; // open, by stage
  std::map<std::string, int> m_steps;    // open, by stage
};

/// `count` hex digits derived from `seed`: ids that are the same for the same run every time.
std::string hex_id(const std::string& seed, size_t count) {
  return sha256_digest(seed).substr(7, count);
}

json otlp_value(const json& value) {
  if (value.is_boolean()) {
    return {{"boolValue", value.get<bool>()}};
  }
  if (value.is_number_integer()) {
    return {{"intValue", std::to_string(value.get<long long>())}};
  }
  if (value.is_number()) {
    return {{"doubleValue", value.get<double>()}};
  }
  return {{"stringValue", value.is_string() ? value.get<std::string>() : value.dump()}};
}

std::string unix_nano(double epoch_seconds) {
  return fmt::format("{}", static_cast<long long>(std::llround(epoch_seconds * 1e9)));
}

} // namespace

tl::expected<Trace, std::string> trace_from_events(const std::string& text,
                                                   const std::string& source) {
  Trace trace;
  SpanBuilder builder(trace);
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (line.empty()) {
      continue;
    }
    json event = json::parse(line, nullptr, false);
    if (!event.is_object() || !event.contains("type") || !event.contains("t") ||
        !event["t"].is_number()) {
      return tl::unexpected(
          fmt::format("{}:{}: not an event of kiln's (docs/events.md)", source, number));
    }
    builder.take(event);
  }
  builder.finish();
  if (trace.spans.empty()) {
    return tl::unexpected(fmt::format("{}: holds no run.started event", source));
  }
  return trace;
}

json chrome_trace(const Trace& trace) {
  json events = json::array();
  std::map<std::string, int> rows;
  for (const Span& span : trace.spans) {
    auto [row, added] = rows.emplace(span.row, static_cast<int>(rows.size()));
    if (added) {
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", 1},
                        {"tid", row->second},
                        {"args", {{"name", span.row}}}});
    }
    json args = span.fields;
    args["kind"] = span.kind;
    events.push_back({{"name", span.name},
                      {"cat", span.kind},
                      {"ph", "X"},
                      {"ts", std::llround(span.start * 1e6)},
                      {"dur", std::llround((span.end - span.start) * 1e6)},
                      {"pid", 1},
                      {"tid", row->second},
                      {"args", args}});
  }
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"run_id", trace.run_id}}}};
}

json otlp_trace(const Trace& trace) {
  const std::string trace_id = hex_id("kiln-run:" + trace.run_id, 32);
  json spans = json::array();
  for (size_t i = 0; i < trace.spans.size(); ++i) {
    const Span& span = trace.spans[i];
    json attributes = json::array({{{"key", "kiln.kind"}, {"value", otlp_value(span.kind)}}});
    for (const auto& [key, value] : span.fields.items()) {
      attributes.push_back({{"key", "kiln." + key}, {"value", otlp_value(value)}});
    }
    json out = {{"traceId", trace_id},
                {"spanId", hex_id(fmt::format("kiln-span:{}:{}", trace.run_id, i), 16)},
                {"name", span.name},
                {"kind", 1}, // SPAN_KIND_INTERNAL
                {"startTimeUnixNano", unix_nano(trace.started_epoch + span.start)},
                {"endTimeUnixNano", unix_nano(trace.started_epoch + span.end)},
                {"attributes", attributes},
                {"status", {{"code", span.failed ? 2 : 1}}}}; // ERROR : OK
    if (span.parent >= 0) {
      out["parentSpanId"] = hex_id(fmt::format("kiln-span:{}:{}", trace.run_id, span.parent), 16);
    }
    spans.push_back(std::move(out));
  }
  json resource = {{"attributes", json::array({{{"key", "service.name"},
                                                {"value", {{"stringValue", "kiln"}}}}})}};
  return {{"resourceSpans",
           json::array({{{"resource", resource},
                         {"scopeSpans",
                          json::array({{{"scope", {{"name", "kiln"}}}, {"spans", spans}}})}}})}};
}

} // namespace kiln::forensics
