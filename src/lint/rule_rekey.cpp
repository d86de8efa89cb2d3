#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <re2/re2.h>

#include "dockerfile/references.h"
#include "lint/rules.h"
#include "util/strings.h"

namespace kiln {
namespace {

/// A variable that carries a version pin, by its name: `FFMPEG_VERSION`, `ONNX_VER`, `GIT_TAG`.
bool is_pin_name(std::string_view name) {
  static const RE2 pin(R"((?i)(version|_ver|_tag|_ref|_rev|_sha|_commit)$)");
  return RE2::PartialMatch(name, pin);
}

/// The text a RUN's key is made of, heredocs included.
std::string step_text(const Instruction& ins) {
  std::string text = ins.original;
  for (const auto& heredoc : ins.heredocs) {
    text += "\n" + heredoc.content;
  }
  return text;
}

/// At most this many lines are listed in a finding; the rest are counted.
constexpr size_t k_lines_listed = 10;

std::string line_list(const std::vector<int>& lines, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to && i < from + k_lines_listed; ++i) {
    out += (i == from ? "" : i + 1 == to ? " and " : ", ") + std::to_string(lines[i]);
  }
  if (to - from > k_lines_listed) {
    out += fmt::format(" and {} more", to - from - k_lines_listed);
  }
  return out;
}

} // namespace

// The engine hands every ARG in scope to each later RUN's environment, and an ENV is a layer
// every later step builds on: a pin declared (or put in an ENV) above steps that never read it
// re-keys them on every bump. The field notes paid ~75 minutes of ONNX compile for a PyAV bump.
void check_arg_rekeys_steps(const LintContext& ctx, std::vector<LintFinding>& out) {
  struct Declared {
    const Instruction* at;
    size_t runs_before; // RUNs of the stage before it
  };
  for (const auto& stage : ctx.stages) {
    // One pass: each pin is held from its declaration to its first use, and the RUNs between
    // are a range of the stage's RUNs, never searched per pin.
    std::vector<int> runs;
    std::unordered_map<std::string, Declared> held;
    for (const Instruction* ins : stage) {
      const std::string text = keyword_is(*ins, "run") ? step_text(*ins) : ins->original;
      for (std::string_view name : referenced_names(text)) {
        auto it = held.find(std::string(name));
        if (it == held.end()) {
          continue;
        }
        const Declared d = it->second;
        held.erase(it);
        if (runs.size() == d.runs_before) {
          continue;
        }
        const size_t count = runs.size() - d.runs_before;
        const bool arg = keyword_is(*d.at, "arg");
        out.push_back(make_finding(
            ctx, *d.at, 0, "arg-rekeys-steps",
            fmt::format("{} {} is first read at line {}, but a change of it also rebuilds the "
                        "RUN{} at line{} {} above that, which never read{} it ({}); move the {} "
                        "just above line {}",
                        written_keyword(*d.at), name, ins->start.line, count > 1 ? "s" : "",
                        count > 1 ? "s" : "", line_list(runs, d.runs_before, runs.size()),
                        count > 1 ? "" : "s",
                        arg ? "the engine hands every ARG in scope to each later RUN"
                            : "an ENV is a layer every later step builds on",
                        arg ? "ARG" : "ENV", ins->start.line)));
      }
      if (keyword_is(*ins, "run")) {
        runs.push_back(ins->start.line);
      } else if (keyword_is(*ins, "arg") || keyword_is(*ins, "env")) {
        for (size_t a = 0; a < ins->args.size(); a += 2) {
          // A name declared again starts a scope of its own.
          held.erase(ins->args[a]);
          if (is_pin_name(ins->args[a])) {
            held[ins->args[a]] = {ins, runs.size()};
          }
        }
      }
    }
  }
}

// One ENV of several pins is one layer keyed by all of them: a bump of any one re-keys the
// steps that read only the others (nine version ARGs in one ENV did that in the field notes).
void check_pins_in_one_env(const LintContext& ctx, std::vector<LintFinding>& out) {
  for (const auto& ins : ctx.dockerfile.instructions) {
    if (!keyword_is(ins, "env")) {
      continue;
    }
    std::vector<std::string> pins;
    for (size_t a = 0; a + 1 < ins.args.size(); a += 2) {
      if (is_pin_name(ins.args[a])) {
        pins.push_back(ins.args[a]);
      }
    }
    if (pins.size() < 2) {
      continue;
    }
    out.push_back(make_finding(
        ctx, ins, arg_column(ins, 0), "pins-in-one-env",
        fmt::format("ENV sets {} version pins in one layer ({}): a change of any one rebuilds "
                    "this layer and every step after it, those that read only the others "
                    "included; set each pin in an ENV (or ARG) of its own just above the steps "
                    "that read it",
                    pins.size(), join(pins, ", "))));
  }
}

} // namespace kiln
