#include "forensics/stage_annotations.h"

#include <cctype>

#include "forensics/stage_error.h"
#include "util/json_field.h"
#include "util/workflow_command.h"

namespace kiln {

namespace {

using Json = nlohmann::json;

/// Whitespace runs as one space, no space at either end, the keyword in lower case: how an
/// instruction reads whichever way the engine printed it.
std::string normalized(std::string_view text) {
  std::string out;
  bool keyword = true;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      keyword = keyword && out.empty();
      if (!out.empty() && out.back() != ' ') {
        out += ' ';
      }
      continue;
    }
    out += keyword ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : c;
  }
  while (!out.empty() && out.back() == ' ') {
    out.pop_back();
  }
  return out;
}

// The analysis keeps a step's name to 200 bytes: a name that long may be the start of one.
constexpr size_t k_clipped_name = 190;

} // namespace

int step_line(const Dockerfile& df, std::string_view step) {
  // BuildKit names a vertex `[<stage> <n>/<m>] <instruction>`.
  if (step.starts_with('[')) {
    size_t close = step.find("] ");
    step.remove_prefix(close == std::string_view::npos ? 0 : close + 2);
  }
  std::string wanted = normalized(step);
  if (wanted.empty()) {
    return 0;
  }
  int line = 0;
  for (const auto& ins : df.instructions) {
    std::string text = normalized(ins.original);
    bool same = text == wanted || (step.size() >= k_clipped_name && text.starts_with(wanted));
    if (same && line != 0) {
      return 0; // twice in the file: which one failed is not known
    }
    if (same) {
      line = ins.start.line;
    }
  }
  return line;
}

std::string
stage_annotations(const ReportInput& in,
                  const std::function<StageDockerfile(const std::string&)>& dockerfile_of) {
  std::string out;
  auto stages = in.manifest.find("stages");
  if (stages == in.manifest.end() || !stages->is_array()) {
    return out;
  }
  for (const auto& stage : *stages) {
    std::string status = json_field(stage, "status", std::string());
    if (status != "failed" && status != "refused" && status != "unverified") {
      continue;
    }
    std::string name = json_field(stage, "name", std::string());
    std::string message = json_field(stage, "failure", std::string());
    std::optional<forensics::StageError> error;
    if (in.analysis) {
      error = forensics::stage_error(*in.analysis, stage);
    }
    if (error && !error->lines.empty() && !error->from_tail) {
      message = error->lines.front();
    }
    if (message.empty()) {
      message = "the stage " + status;
    }
    StageDockerfile source = dockerfile_of(name);
    std::vector<std::pair<std::string, std::string>> properties;
    if (!source.path.empty()) {
      properties.emplace_back("file", source.path);
      if (int line =
              error && source.parsed != nullptr ? step_line(*source.parsed, error->step_name) : 0;
          line > 0) {
        properties.emplace_back("line", std::to_string(line));
      }
    }
    properties.emplace_back("title", "kiln: stage " + name + " " + status);
    out += workflow_command("error", properties, message);
  }
  return out;
}

} // namespace kiln
