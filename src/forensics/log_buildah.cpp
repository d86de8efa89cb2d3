// buildah's output: `STEP n/m: ...` lines (behind `[i/j] ` in a multi-stage build), what each
// step prints, `--> <id>` when it is committed, and the `Error: ...` of a failed build.
#include <algorithm>
#include <string>

#include "forensics/log_analyzer_impl.h"

namespace kiln::forensics {

namespace {

bool is_hex_id(std::string_view text) {
  return text.size() >= 6 && text.size() <= 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return is_digit(c) || (c >= 'a' && c <= 'f');
         });
}

std::string lower_ascii(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

// `FROM image AS name` -> "name".
std::string from_stage_name(std::string_view instruction) {
  std::string lowered = lower_ascii(instruction);
  if (!lowered.starts_with("from ")) {
    return {};
  }
  size_t as = lowered.rfind(" as ");
  if (as == std::string::npos) {
    return {};
  }
  std::string_view name = instruction.substr(as + 4);
  while (!name.empty() && name.back() == ' ') {
    name.remove_suffix(1);
  }
  if (name.empty() || name.find(' ') != std::string_view::npos) {
    return {};
  }
  return std::string(name);
}

} // namespace

std::string_view buildah_stage_prefix(std::string_view line) {
  if (!line.starts_with('[')) {
    return {};
  }
  size_t close = line.find("] ");
  if (close == std::string_view::npos || close > 16) {
    return {};
  }
  std::string_view inside = line.substr(1, close - 1);
  size_t slash = inside.find('/');
  if (slash == std::string_view::npos || !all_digits(inside.substr(0, slash)) ||
      !all_digits(inside.substr(slash + 1))) {
    return {};
  }
  return line.substr(0, close + 2);
}

bool buildah_step(std::string_view line, std::string_view& id, std::string_view& instruction) {
  if (!line.starts_with("STEP ")) {
    return false;
  }
  size_t colon = line.find(": ", 5);
  if (colon == std::string_view::npos) {
    return false;
  }
  std::string_view fraction = line.substr(5, colon - 5);
  size_t slash = fraction.find('/');
  if (slash == std::string_view::npos || !all_digits(fraction.substr(0, slash)) ||
      !all_digits(fraction.substr(slash + 1))) {
    return false;
  }
  id = line.substr(0, colon);
  instruction = line.substr(colon + 2);
  return true;
}

void LogAnalyzer::Impl::buildah_end(StepWork& s, uint64_t at) {
  if (s.open) {
    s.r.end = time_at(at);
  }
}

void LogAnalyzer::Impl::buildah_line(std::string_view line, uint64_t at) {
  std::string_view prefix = buildah_stage_prefix(line);
  std::string_view text = line.substr(prefix.size());
  std::string_view id, instruction;
  if (buildah_step(text, id, instruction)) {
    if (open_step) {
      StepWork& previous = steps[*open_step];
      buildah_end(previous, at);
      if (previous.r.state == StepState::running) {
        previous.r.state = previous.r.cached ? StepState::cached : StepState::done;
      }
      succeeded(previous);
    }
    std::string key(prefix);
    if (std::string name = from_stage_name(instruction); !name.empty()) {
      buildah_stages[key] = name;
    }
    auto known = buildah_stages.find(key);
    StepWork& s =
        new_step(std::string(prefix) + std::string(id), instruction,
                 known == buildah_stages.end() ? std::string() : known->second, instruction, at);
    s.r.dockerfile_step = true;
    open_step = steps.size() - 1;
    return;
  }
  if (text.starts_with("Error: ")) {
    if (open_step) {
      StepWork& s = steps[*open_step];
      if (text.starts_with("Error: building at STEP")) {
        s.r.state = StepState::error;
        buildah_end(s, at);
        s.open = false;
        open_step.reset();
        result.failed = true;
        return;
      }
    } else {
      return;
    }
  }
  if (!open_step) {
    return;
  }
  StepWork& s = steps[*open_step];
  if (text.starts_with("--> ")) {
    std::string_view rest = text.substr(4);
    if (rest.starts_with("Using cache ")) {
      s.r.cached = true;
      return;
    }
    if (is_hex_id(rest)) {
      buildah_end(s, at);
      s.r.state = s.r.cached ? StepState::cached : StepState::done;
      succeeded(s);
      open_step.reset();
      return;
    }
  }
  if (text == "COMMIT" || text.starts_with("COMMIT ")) {
    return;
  }
  constexpr std::string_view k_exited = "subprocess exited with status ";
  if (text.starts_with(k_exited)) {
    if (auto code = small_number(text.substr(k_exited.size()))) {
      s.r.exit_code = *code;
    }
    return;
  }
  ++s.r.output_lines;
  if (!clock.empty()) {
    s.last_output_at = clock.at(at);
  }
  scan(s, text);
}

} // namespace kiln::forensics
