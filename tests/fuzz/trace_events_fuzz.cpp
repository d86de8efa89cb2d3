// kiln trace reads events.jsonl, which a user may hand it from anywhere: any bytes give spans or
// an error, and every span it makes names an earlier span as its parent.
#include <cstdint>

#include "forensics/trace.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto trace = kiln::forensics::trace_from_events(text, "events.jsonl");
  if (!trace) {
    return 0;
  }
  for (size_t i = 0; i < trace->spans.size(); ++i) {
    const auto& span = trace->spans[i];
    FUZZ_CHECK(span.parent < static_cast<int>(i));
  }
  (void)kiln::forensics::chrome_trace(*trace).dump(-1, ' ', false,
                                                   nlohmann::json::error_handler_t::replace);
  (void)kiln::forensics::otlp_trace(*trace).dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace);
  return 0;
}
