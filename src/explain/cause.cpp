#include "explain/cause.h"

#include <algorithm>

#include <fmt/format.h>

#include "util/image_ref.h"

namespace kiln {

using json = nlohmann::json;

namespace {

/// A list of files as a reader takes it in: the first ones, and how many more.
constexpr size_t k_files_shown = 20;

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

std::string shown_value(const ArgInput& arg) {
  if (!arg.hashed.empty()) {
    return "<secret " + arg.hashed.substr(0, 12) + ">";
  }
  return arg.value;
}

/// An identity in a summary: a dry run's stand-in for an image not built yet says so.
std::string short_id(const std::string& id) {
  if (id.starts_with("<")) {
    return "this run's build";
  }
  return id.empty() ? "(none)" : short_image_id(id);
}

Cause at_step(const StepInput& step, std::string kind, const StageInputs& before) {
  Cause c;
  c.kind = std::move(kind);
  c.line = step.line;
  c.step = first_line(step.text);
  c.against = before.run_id;
  return c;
}

/// The lines of `old_text` and `new_text` as a diff a reader scans: removed lines `-`, added `+`.
json line_diff(const std::string& old_text, const std::string& new_text) {
  auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    for (size_t pos = 0; pos <= text.size();) {
      size_t nl = std::min(text.find('\n', pos), text.size());
      out.push_back(text.substr(pos, nl - pos));
      pos = nl + 1;
    }
    return out;
  };
  auto a = lines(old_text), b = lines(new_text);
  json diff = json::array();
  for (const auto& line : a) {
    if (std::find(b.begin(), b.end(), line) == b.end()) {
      diff.push_back("- " + line);
    }
  }
  for (const auto& line : b) {
    if (std::find(a.begin(), a.end(), line) == a.end()) {
      diff.push_back("+ " + line);
    }
  }
  return diff;
}

std::optional<Cause> step_difference(const StepInput& now, const StepInput& old,
                                     const StageInputs& in, const StageInputs& before) {
  for (const auto& [parent, identity] : now.parents) {
    auto was = old.parents.find(parent);
    if (was != old.parents.end() && was->second != identity) {
      Cause c = at_step(now, "parent-rebuilt", before);
      c.detail = {{"parent", parent}, {"old", was->second}, {"new", identity}};
      c.summary = fmt::format("parent {} rebuilt ({} -> {})", parent, short_id(was->second),
                              short_id(identity));
      return c;
    }
  }
  if (!now.base.empty() && now.base == old.base) {
    auto digest = in.bases.find(now.base);
    auto was = before.bases.find(old.base);
    if (digest != in.bases.end() && was != before.bases.end() && !digest->second.empty() &&
        !was->second.empty() && digest->second != was->second) {
      Cause c = at_step(now, "base-moved", before);
      c.detail = {{"ref", now.base}, {"old", was->second}, {"new", digest->second}};
      c.summary = fmt::format("base image {} moved ({} -> {})", now.base, short_id(was->second),
                              short_id(digest->second));
      return c;
    }
  }
  if (now.text != old.text) {
    Cause c = at_step(now, "instruction-changed", before);
    c.detail = {{"old", old.text}, {"new", now.text}, {"diff", line_diff(old.text, now.text)}};
    c.summary = fmt::format("line {} changed: {}", now.line, first_line(now.text));
    return c;
  }
  for (const auto& name : now.args) {
    auto value = in.args.find(name);
    auto was = before.args.find(name);
    ArgInput none;
    const ArgInput& a = value == in.args.end() ? none : value->second;
    const ArgInput& b = was == before.args.end() ? none : was->second;
    if (!(a == b)) {
      Cause c = at_step(now, "build-arg-changed", before);
      bool secret = !a.hashed.empty() || !b.hashed.empty();
      std::string source = a.source.empty() ? b.source : a.source;
      const bool pin =
          source != "--build-arg" && source != "chain file" && !source.starts_with("lane ");
      c.detail = {{"name", name},          {"pin", pin},       {"old", shown_value(b)},
                  {"new", shown_value(a)}, {"source", source}, {"secret", secret}};
      c.summary = fmt::format("{} {} changed: {} -> {} ({})", pin ? "pin" : "build arg", name,
                              shown_value(b).empty() ? "(unset)" : shown_value(b),
                              shown_value(a).empty() ? "(unset)" : shown_value(a), source);
      return c;
    }
  }
  if (now.expanded != old.expanded) {
    Cause c = at_step(now, "instruction-changed", before);
    c.detail = {{"old", old.expanded},
                {"new", now.expanded},
                {"diff", line_diff(old.expanded, now.expanded)}};
    c.summary = fmt::format("line {} expands differently: {}", now.line, first_line(now.expanded));
    return c;
  }
  if (now.files != old.files) {
    json changed = json::array(), added = json::array(), removed = json::array();
    size_t n_changed = 0, n_added = 0, n_removed = 0;
    for (const auto& [file, hash] : now.files) {
      auto was = old.files.find(file);
      if (was == old.files.end()) {
        if (n_added++ < k_files_shown) {
          added.push_back(file);
        }
      } else if (was->second != hash) {
        if (n_changed++ < k_files_shown) {
          changed.push_back(file);
        }
      }
    }
    for (const auto& [file, hash] : old.files) {
      if (now.files.count(file) == 0 && n_removed++ < k_files_shown) {
        removed.push_back(file);
      }
    }
    Cause c = at_step(now, "context-changed", before);
    c.detail = {{"changed", changed},     {"added", added},
                {"removed", removed},     {"changed_count", n_changed},
                {"added_count", n_added}, {"removed_count", n_removed}};
    std::vector<std::string> parts;
    auto part = [&](const char* what, size_t n, const json& list) {
      if (n > 0) {
        std::string names;
        for (const auto& f : list) {
          names += (names.empty() ? "" : ", ") + f.get<std::string>();
        }
        parts.push_back(fmt::format("{} {}{}", what, names,
                                    n > list.size() ? fmt::format(" and {} more", n - list.size())
                                                    : std::string()));
      }
    };
    part("changed", n_changed, changed);
    part("added", n_added, added);
    part("removed", n_removed, removed);
    std::string joined;
    for (const auto& p : parts) {
      joined += (joined.empty() ? "" : "; ") + p;
    }
    c.summary = fmt::format("context files {} (line {})", joined, now.line);
    return c;
  }
  return std::nullopt;
}

} // namespace

json to_json(const Cause& c) {
  return {{"kind", c.kind},       {"line", c.line},     {"step", c.step},
          {"summary", c.summary}, {"detail", c.detail}, {"against", c.against}};
}

std::optional<Cause> cause_from_json(const json& j) {
  if (!j.is_object() || !j.contains("kind")) {
    return std::nullopt;
  }
  Cause c;
  c.kind = j.value("kind", "");
  c.line = j.value("line", 0);
  c.step = j.value("step", "");
  c.summary = j.value("summary", "");
  c.detail = j.value("detail", json::object());
  c.against = j.value("against", "");
  return c;
}

std::optional<Cause> rebuild_cause(const StageInputs& now, const StageInputs* before,
                                   const CacheEvidence& evidence) {
  if (now.bypass == "--no-cache") {
    Cause c;
    c.kind = "cache-bypassed";
    c.detail = {{"by", "--no-cache"}};
    c.summary = "the run was asked for --no-cache";
    c.against = before != nullptr ? before->run_id : "";
    return c;
  }
  if (before == nullptr) {
    Cause c;
    c.kind = "new";
    c.summary = "no earlier build of this stage ended ok with its inputs recorded";
    if (now.bypass == "smoke") {
      c.summary += "; a smoke stage runs every time anyway";
    }
    return c;
  }
  for (size_t i = 0; i < now.steps.size(); ++i) {
    if (i >= before->steps.size()) {
      Cause c = at_step(now.steps[i], "instruction-changed", *before);
      c.detail = {{"old", ""},
                  {"new", now.steps[i].text},
                  {"diff", json::array({"+ " + now.steps[i].text})}};
      c.summary = fmt::format("line {} added: {}", now.steps[i].line, c.step);
      return c;
    }
    if (auto c = step_difference(now.steps[i], before->steps[i], now, *before)) {
      return c;
    }
  }
  if (before->steps.size() > now.steps.size()) {
    const StepInput& gone = before->steps[now.steps.size()];
    Cause c = at_step(gone, "instruction-changed", *before);
    c.line = now.steps.empty() ? 0 : now.steps.back().line;
    c.detail = {{"old", gone.text}, {"new", ""}, {"diff", json::array({"- " + gone.text})}};
    c.summary = fmt::format("line {} removed: {}", gone.line, first_line(gone.text));
    return c;
  }
  if (now.bypass == "smoke") {
    Cause c;
    c.kind = "cache-bypassed";
    c.detail = {{"by", "smoke"}};
    c.summary = "a smoke stage runs every time";
    c.against = before->run_id;
    return c;
  }
  for (const auto& step : now.steps) {
    for (const auto& input : step.unhashed) {
      if (input.starts_with("network fetch http") || input.starts_with("network fetch git")) {
        Cause c = at_step(step, "unhashed-input", *before);
        c.detail = {{"input", input}};
        c.summary = fmt::format("line {} fetches {} anew each build; what it got can change "
                                "while the line does not",
                                step.line, input.substr(14));
        return c;
      }
    }
  }
  // A reclaim or a dropped import may have left the stage's layers alone: only a missing image
  // or another worker's cache says the engine will build it.
  if (!evidence.image_gone.empty() || now.worker != before->worker) {
    return cold_cause(now, *before, evidence);
  }
  return std::nullopt;
}

Cause cold_cause(const StageInputs& now, const StageInputs& before, const CacheEvidence& evidence) {
  Cause c;
  c.kind = "cold";
  c.against = before.run_id;
  json found = json::array();
  if (now.worker != before.worker) {
    found.push_back(fmt::format("built on worker {}; the build of run {} was on {}",
                                now.worker.empty() ? "(none)" : now.worker, before.run_id,
                                before.worker.empty() ? "(none)" : before.worker));
  }
  if (!evidence.image_gone.empty()) {
    found.push_back(evidence.image_gone);
  }
  for (const auto& reclaim : evidence.reclaims) {
    found.push_back(reclaim);
  }
  if (evidence.import_dropped) {
    found.push_back("the registry cache was left out of the build (--no-cache-export or import "
                    "flakes)");
  }
  c.detail = {{"evidence", found}};
  c.summary = fmt::format("same inputs as the build of run {}, yet not served from the cache: {}",
                          before.run_id,
                          found.empty() ? std::string("kiln saw nothing remove it (the engine's "
                                                      "own garbage collection, or a removal "
                                                      "outside kiln)")
                                        : found.front().get<std::string>());
  return c;
}

} // namespace kiln
