#include "cli/github_actions.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "dockerfile/source.h"
#include "forensics/github_summary.h"
#include "forensics/report.h"
#include "forensics/stage_annotations.h"
#include "lint/lint.h"

namespace kiln {

namespace {

/// Append `text` to `path`: GitHub gathers what each command of a step appended.
tl::expected<void, std::string> append_file(const std::filesystem::path& path,
                                            const std::string& text) {
  std::FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr) {
    return tl::unexpected(fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
  }
  bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  int error = errno;
  if (std::fclose(file) != 0 && written) {
    written = false;
    error = errno;
  }
  if (!written) {
    return tl::unexpected(fmt::format("cannot write {}: {}", path.string(), std::strerror(error)));
  }
  return {};
}

} // namespace

GithubActions github_actions() {
  GithubActions github;
  const char* actions = std::getenv("GITHUB_ACTIONS");
  github.on = actions != nullptr && std::strcmp(actions, "true") == 0;
  if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY");
      github.on && summary != nullptr && *summary != '\0') {
    github.step_summary = summary;
  }
  return github;
}

void write_github_run_outputs(const GithubActions& github, const Chain& chain,
                              const RunOutput& output, Console& console) {
  if (!github.on) {
    return;
  }
  console.raw(render_github(output.lint));
  if (output.folder.empty()) {
    return; // refused before it had a record: the lint's annotations say why, or the errors
  }
  const nlohmann::json* analysis = output.log_analysis ? &*output.log_analysis : nullptr;
  auto record = read_run_record(output.folder, analysis);
  if (!record) {
    console.note("warning: no GitHub Actions summary or annotations of the stages: " +
                 record.error());
    return;
  }
  console.raw(stage_annotations(*record, [&](const std::string& name) {
    const Stage* stage = chain.find_stage(name);
    if (stage == nullptr || !stage->dockerfile_source) {
      return StageDockerfile{};
    }
    return StageDockerfile{stage->dockerfile_source->path.string(),
                           &stage->dockerfile_source->parsed};
  }));
  if (github.step_summary.empty()) {
    return;
  }
  if (auto appended = append_file(github.step_summary, render_step_summary(*record)); !appended) {
    console.note("warning: the GitHub Actions step summary was not written: " + appended.error());
  }
}

} // namespace kiln
