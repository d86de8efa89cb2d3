// A run as events, against a real buildah run of the demo chain: the JSON progress stream, the
// trace `kiln trace` writes from events.jsonl, and the spans sent to an OTLP/HTTP receiver.
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "driver/events.h"
#include "kiln_harness.h"
#include "util/loopback.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

/// An OTLP/HTTP receiver as a collector runs one: every POST body it gets is written to
/// `<folder>/otlp-<n>.json` with its path, and answered 200.
const char* k_receiver = R"(
import http.server, sys, os
folder, port = sys.argv[1], int(sys.argv[2])
class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers['Content-Length']))
        n = len([f for f in os.listdir(folder) if f.startswith('otlp-')])
        with open(os.path.join(folder, 'otlp-%d.json' % n), 'wb') as out:
            out.write(body)
        with open(os.path.join(folder, 'otlp-%d.path' % n), 'w') as out:
            out.write(self.path)
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.end_headers()
        self.wfile.write(b'{}')
    def log_message(self, *args):
        pass
http.server.HTTPServer(('127.0.0.1', port), Receiver).serve_forever()
)";

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(json::parse(line, nullptr, false));
  }
  return lines;
}

TEST(RunEvents, JsonProgressTraceAndOtlpExportTellTheSameRun) {
  ChainDir dir;
  dir.copy_demo();
  dir.write("receiver.py", k_receiver);
  int port = free_loopback_port();
  ASSERT_GT(port, 0);
  CancelToken stop_receiver;
  std::thread receiver([&] {
    ProcessSpec spec{
        {"python3", "receiver.py", dir.path().string(), std::to_string(port)}, {}, dir.path()};
    spec.cancel = &stop_receiver;
    spec.grace = std::chrono::seconds(1);
    run_process(spec, [](std::string_view) {});
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!loopback_accepts(port) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  // --progress=json: stdout is the events alone, the human view is on stderr.
  ProcessSpec spec{{KILN_BINARY, "run", "--progress=json", "chain.toml"},
                   {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:" + std::to_string(port)}},
                   dir.path()};
  spec.stdout_file = dir.path() / "progress.jsonl";
  std::string human;
  ProcessExit exit = run_process(spec, [&](std::string_view chunk) { human += chunk; });
  stop_receiver.cancel();
  receiver.join();
  ASSERT_EQ(exit.status_code(), 0) << human;
  EXPECT_NE(human.find("kiln: run "), std::string::npos) << human;

  std::vector<json> events = json_lines(dir.read("progress.jsonl"));
  ASSERT_FALSE(events.empty());
  std::map<std::string, int> started;
  std::map<std::string, int> ended;
  long seq = 0;
  double t = 0;
  for (const json& event : events) {
    ASSERT_TRUE(event.is_object()) << "a line that is no JSON object";
    EXPECT_EQ(event["schema"], k_events_schema);
    EXPECT_EQ(event["seq"].get<long>(), ++seq);
    EXPECT_GE(event["t"].get<double>(), t) << event.dump();
    t = event["t"].get<double>();
    if (event["type"] == "stage.started") {
      ++started[event["stage"].get<std::string>()];
    } else if (event["type"] == "stage.ended") {
      ++ended[event["stage"].get<std::string>()];
      EXPECT_EQ(event["status"], "ok") << event.dump();
    }
  }
  EXPECT_EQ(events.front()["type"], "run.started");
  EXPECT_EQ(events.back()["type"], "run.ended");
  EXPECT_EQ(events.back()["status"], "ok");
  for (const char* stage : {"base", "toolchain", "libs", "final", "smoke"}) {
    EXPECT_EQ(started[stage], 1) << stage;
    EXPECT_EQ(ended[stage], 1) << stage;
  }
  // events.jsonl in the record holds the same lines.
  EXPECT_EQ(dir.read("records/latest/events.jsonl"), dir.read("progress.jsonl"));

  // The spans, counted from the events: the run, each stage, attempt and step.
  size_t expected = 1;
  for (const json& event : events) {
    const std::string type = event["type"];
    expected += type == "stage.started" || type == "attempt.started" || type == "step.started";
  }

  // Chrome's trace-event format: complete events, each inside the run's span.
  KilnResult chrome = dir.kiln({"trace", "latest", "--format", "chrome", "-o", "trace.json"});
  ASSERT_EQ(chrome.exit_code, 0) << chrome.output;
  json trace = json::parse(dir.read("trace.json"));
  ASSERT_TRUE(trace["traceEvents"].is_array());
  size_t complete = 0;
  long run_end = -1;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M") {
      EXPECT_EQ(e["name"], "thread_name");
      continue;
    }
    ASSERT_EQ(e["ph"], "X") << e.dump();
    ++complete;
    for (const char* key : {"ts", "dur", "pid", "tid"}) {
      EXPECT_TRUE(e[key].is_number_integer()) << key << " " << e.dump();
    }
    EXPECT_GE(e["dur"].get<long>(), 0);
    if (e["cat"] == "run") {
      run_end = e["ts"].get<long>() + e["dur"].get<long>();
    } else {
      EXPECT_LE(e["ts"].get<long>() + e["dur"].get<long>(), run_end) << e.dump();
    }
  }
  EXPECT_EQ(complete, expected);

  // The OTLP/HTTP export the run sent when it ended: one request to /v1/traces, every span.
  EXPECT_EQ(dir.read("otlp-0.path"), "/v1/traces");
  json otlp = json::parse(dir.read("otlp-0.json"));
  const json& spans = otlp["resourceSpans"][0]["scopeSpans"][0]["spans"];
  EXPECT_EQ(spans.size(), expected);
  std::string trace_id = spans[0]["traceId"];
  EXPECT_EQ(trace_id.size(), 32u);
  for (const json& span : spans) {
    EXPECT_EQ(span["traceId"], trace_id);
    EXPECT_EQ(span["spanId"].get<std::string>().size(), 16u);
    EXPECT_LE(std::stoll(span["startTimeUnixNano"].get<std::string>()),
              std::stoll(span["endTimeUnixNano"].get<std::string>()));
  }
  EXPECT_NE(dir.read("records/latest/driver.log").find("span(s) sent to http://127.0.0.1:"),
            std::string::npos);
  // `kiln trace` writes the same spans the run sent.
  KilnResult written = dir.kiln({"trace", "latest", "--format", "otlp"});
  ASSERT_EQ(written.exit_code, 0) << written.output;
  EXPECT_EQ(json::parse(written.output), otlp);
}

TEST(RunEvents, AnOtlpEndpointThatDoesNotAnswerIsAWarningNotAFailure) {
  ChainDir dir;
  dir.copy_demo();
  int port = free_loopback_port(); // nothing listens there
  KilnResult run =
      dir.kiln({"run", "chain.toml", "--only", "base"}, nullptr,
               {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:" + std::to_string(port)}});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("warning: the run's trace was not sent to http://127.0.0.1:"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(dir.latest_manifest()["status"], "ok");
}

} // namespace
} // namespace kiln::testing
