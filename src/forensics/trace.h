#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

namespace kiln::forensics {

/// One span of a run: the run, a lane, a stage, an attempt, a step.
struct Span {
  std::string kind; // run | lane | stage | attempt | step
  std::string name;
  double start = 0; // seconds since the run started
  double end = 0;
  int parent = -1;       // index of the enclosing span; -1 for the run
  std::string row;       // what it is drawn on: the stage, the lane, or the run
  bool failed = false;   // it ended in anything but ok
  nlohmann::json fields; // its attributes: verdict, exit code, cached steps, ...
};

/// A run's spans, read from its events.jsonl (docs/events.md), in the order they started.
struct Trace {
  std::string run_id;
  double started_epoch = 0; // the run's start, seconds since the epoch
  std::vector<Span> spans;
};

/// The spans of the events in `text` (events.jsonl), run -> lane -> stage -> attempt -> step.
/// A stage, attempt or step the run never ended (a killed kiln) ends with the last event. An
/// error names `source` and the line that is not an event.
tl::expected<Trace, std::string> trace_from_events(const std::string& text,
                                                   const std::string& source);

/// Chrome's trace-event JSON (about:tracing, Perfetto): one complete ("X") event per span, a
/// row per stage.
nlohmann::json chrome_trace(const Trace& trace);

/// OTLP/JSON (`ExportTraceServiceRequest`, what an OpenTelemetry collector's file receiver and
/// OTLP/HTTP endpoint read): one resource `service.name=kiln`, one span per span, the trace id
/// derived from the run id.
nlohmann::json otlp_trace(const Trace& trace);

} // namespace kiln::forensics
