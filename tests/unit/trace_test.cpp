// A run's spans from its events: what `kiln trace` and the OTLP export are made of.
#include "forensics/trace.h"

#include <sstream>

#include <gtest/gtest.h>

#include "driver/events.h"
#include "temp_dir.h"
#include "util/clock.h"
#include "util/fs.h"
#include "util/time.h"

namespace kiln::forensics {
namespace {

using nlohmann::json;

std::string line(json event) {
  return event.dump() + "\n";
}

TEST(Trace, ALanesRunNestsStagesInTheirLaneAndAKilledRunClosesWhatItLeftOpen) {
  std::string events =
      line({{"type", "run.started"},
            {"t", 0.0},
            {"run_id", "r1"},
            {"time", "2026-12-02T14:00:00Z"}}) +
      line({{"type", "stage.started"}, {"t", 1.0}, {"stage", "amd64/base"}, {"lane", "amd64"}}) +
      line({{"type", "attempt.started"}, {"t", 1.0}, {"stage", "amd64/base"}, {"attempt", 1}}) +
      line({{"type", "step.started"},
            {"t", 1.5},
            {"stage", "amd64/base"},
            {"instruction", "RUN a"}}) +
      line({{"type", "step.started"},
            {"t", 2.0},
            {"stage", "amd64/base"},
            {"instruction", "RUN b"}}) +
      line({{"type", "attempt.ended"},
            {"t", 3.0},
            {"stage", "amd64/base"},
            {"verdict", "ok"},
            {"steps_run", 2},
            {"steps_cached", 2}}) +
      line({{"type", "stage.ended"}, {"t", 3.0}, {"stage", "amd64/base"}, {"status", "ok"}}) +
      line({{"type", "stage.started"}, {"t", 3.5}, {"stage", "amd64/app"}, {"lane", "amd64"}}) +
      line({{"type", "attempt.started"}, {"t", 3.5}, {"stage", "amd64/app"}, {"attempt", 1}});
  auto trace = trace_from_events(events, "events.jsonl");
  ASSERT_TRUE(trace) << trace.error();
  EXPECT_EQ(trace->run_id, "r1");
  EXPECT_DOUBLE_EQ(trace->started_epoch, *parse_utc("2026-12-02T14:00:00Z"));
  std::vector<std::string> kinds;
  for (const Span& span : trace->spans) {
    kinds.push_back(span.kind);
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"run", "lane", "stage", "attempt", "step", "step",
                                             "stage", "attempt"}));
  const auto& s = trace->spans;
  EXPECT_EQ(s[2].parent, 1); // the stage in its lane
  EXPECT_EQ(s[4].parent, 3); // the step in its attempt
  EXPECT_DOUBLE_EQ(s[4].end, 2.0);
  EXPECT_DOUBLE_EQ(s[5].end, 3.0); // the last step ends with its attempt
  EXPECT_EQ(s[3].fields["cached"], true);
  EXPECT_DOUBLE_EQ(s[1].end, 3.0); // the lane ends with its last ended stage
  // Killed at 3.5: the run, app's stage and attempt end there, marked as never ended.
  EXPECT_DOUBLE_EQ(s[0].end, 3.5);
  EXPECT_TRUE(s[0].failed);
  EXPECT_EQ(s[7].fields["ended"], false);

  json otlp = otlp_trace(*trace);
  const json& spans = otlp["resourceSpans"][0]["scopeSpans"][0]["spans"];
  ASSERT_EQ(spans.size(), 8u);
  EXPECT_EQ(spans[4]["parentSpanId"], spans[3]["spanId"]);
  EXPECT_FALSE(spans[0].contains("parentSpanId"));
  EXPECT_EQ(spans[0]["startTimeUnixNano"], "1796220000000000000");
  EXPECT_EQ(spans[0]["status"]["code"], 2);
  EXPECT_EQ(otlp, otlp_trace(*trace)) << "the same run gives the same ids";

  json chrome = chrome_trace(*trace);
  size_t complete = 0;
  for (const json& e : chrome["traceEvents"]) {
    complete += e["ph"] == "X";
  }
  EXPECT_EQ(complete, 8u);
}

TEST(Trace, ALineThatIsNoEventIsAnErrorNamingIt) {
  auto trace = trace_from_events(line({{"type", "run.started"}, {"t", 0}}) + "not json\n",
                                 "run/events.jsonl");
  ASSERT_FALSE(trace);
  EXPECT_EQ(trace.error(), "run/events.jsonl:2: not an event of kiln's (docs/events.md)");
  EXPECT_FALSE(trace_from_events("", "e"));
  // A field of the wrong type (a fuzz finding: "attempt" as a string threw) is as if missing.
  auto odd = trace_from_events(
      line({{"type", "run.started"}, {"t", 0}}) +
          line({{"type", "attempt.started"}, {"t", 1}, {"stage", "s"}, {"attempt", "one"}}) +
          line({{"type", "attempt.ended"}, {"t", 2}, {"stage", "s"}, {"exit_code", "x"}}),
      "e");
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->spans.size(), 2u);
}

TEST(EventLog, EventsAreNumberedInOrderAndWrittenWholeByTheWriter) {
  testing::TempDir dir;
  {
    EventLog events(dir.path() / "events.jsonl", real_clock(), nullptr);
    for (int i = 0; i < 1000; ++i) {
      events.emit(EventType::step_started, {{"stage", "s"}, {"step", i}});
    }
    events.emit(EventType::run_ended, {{"status", "ok"}});
  }
  auto text = read_file(dir.path() / "events.jsonl");
  ASSERT_TRUE(text);
  std::istringstream in(*text);
  long seq = 0;
  std::string last;
  for (std::string l; std::getline(in, l);) {
    json event = json::parse(l);
    EXPECT_EQ(event["seq"].get<long>(), ++seq);
    EXPECT_EQ(event["schema"], k_events_schema);
    last = event["type"];
  }
  EXPECT_EQ(seq, 1001);
  EXPECT_EQ(last, "run.ended");
}

} // namespace
} // namespace kiln::forensics
