// buildctl's plain progress, read as a run reads it: line by line into the engine's output
// reader (the plain-progress parser beneath it), then everything a run asks of it; and the same
// text as `debug workers` output: its platforms table and its verbose GC rules.
#include <algorithm>
#include <cstdlib>

#include "engine/buildkit_engine.h"
#include "engine/buildkit_output.h"
#include "fuzz_bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  BuildkitEngine engine({});
  std::unique_ptr<BuildOutput> output = engine.read_output();
  LineSplitter lines([&](std::string_view line) {
    output->feed(line);
    (void)BuildkitVersion::parse(line);
  });
  lines.feed(fuzz::as_text(data, size));
  lines.finish();
  std::vector<BuildkitGcRule> rules = parse_buildkit_gc_rules(fuzz::as_text(data, size));
  if (auto keep = layer_keep_bytes(rules)) {
    bool from_a_rule = std::any_of(rules.begin(), rules.end(), [&](const BuildkitGcRule& rule) {
      return rule.keep_bytes == keep;
    });
    if (!from_a_rule) {
      std::abort();
    }
  }
  if (auto platforms = parse_buildkit_workers(fuzz::as_text(data, size))) {
    for (const std::string& platform : *platforms) {
      if (platform.empty() || platform.find(',') != std::string::npos) {
        std::abort();
      }
    }
  }
  const BuildProgress& progress = output->progress();
  if (progress.steps_cached > progress.steps_run || progress.vertices_cached > progress.vertices) {
    std::abort();
  }
  Tail evidence = output->evidence();
  if (evidence.size() > k_failure_tail_lines ||
      output->engine_evidence().size() > evidence.size()) {
    std::abort();
  }
  (void)engine.explain_failure(evidence);
  (void)output->finished_build_stages();
  (void)output->failed_build_stage();
  return 0;
}
