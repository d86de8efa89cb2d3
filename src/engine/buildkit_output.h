#pragma once

#include <deque>

#include "engine/buildkit_progress.h"
#include "engine/engine.h"

namespace kiln {

/// Reads `buildctl build --progress=plain` output: Dockerfile steps and every other vertex for
/// the console and the record, and the failing vertex's own output as failure evidence.
class BuildkitOutput : public BuildOutput {
public:
  bool feed(std::string_view line) override;
  const BuildProgress& progress() const override { return m_progress; }
  Tail evidence() const override;
  Tail engine_evidence() const override;
  std::vector<std::string> finished_build_stages() const override;
  std::string failed_build_stage() const override;
  std::vector<StepSeen> steps() const override;

  const PlainProgress& plain() const { return m_plain; }

private:
  /// evidence(), or with `engine_only` the lines BuildKit printed itself: a RUN step's output
  /// left out, every other vertex's (a cache import, a pull) kept.
  Tail failure_lines(bool engine_only) const;

  PlainProgress m_plain;
  BuildProgress m_progress;
  std::deque<std::string> m_other; // lines buildctl printed outside any vertex
};

/// `process "/bin/sh -c <the RUN's text>" did not complete successfully: exit code: 3` quotes
/// the Dockerfile; keep what the build said, not what the Dockerfile says.
std::string without_quoted_command(std::string_view message);

} // namespace kiln
