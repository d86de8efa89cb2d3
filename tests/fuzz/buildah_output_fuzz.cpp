// buildah's build output, read as a run reads it: in chunks, split into lines, into the
// engine's output reader; the chunk size comes from the input so lines straddle chunks.
#include <cstdlib>

#include "engine/buildah_engine.h"
#include "fuzz_bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  if (size == 0) {
    return 0;
  }
  size_t chunk = 1 + data[0] % 64;
  std::string_view text = fuzz::as_text(data + 1, size - 1);
  std::unique_ptr<BuildOutput> output = BuildahEngine("chroot").read_output();
  LineSplitter lines([&](std::string_view line) { output->feed(line); });
  for (size_t at = 0; at < text.size(); at += chunk) {
    lines.feed(text.substr(at, chunk));
  }
  lines.finish();
  const BuildProgress& progress = output->progress();
  if (progress.steps_cached < 0 || progress.steps_run < 0) {
    std::abort();
  }
  // The engine's own lines are some of the evidence, never more.
  if (output->evidence().size() > k_failure_tail_lines ||
      output->engine_evidence().size() > output->evidence().size()) {
    std::abort();
  }
  return 0;
}
