#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>

#include "lint/rules.h"
#include "util/strings.h"

namespace kiln {
namespace {


bool is_runtime_only(const std::string& keyword) {
  // These run in the container, where no ARG exists at all; the image's ENV is what counts.
  return keyword == "cmd" || keyword == "entrypoint" || keyword == "healthcheck" ||
         keyword == "shell" || keyword == "onbuild" || keyword == "maintainer";
}

// The names an instruction expands, Dockerfile-level or (for RUN) in its shell script.
std::vector<std::string> used_names(const Instruction& ins, char escape) {
  std::vector<std::string> names;
  auto add = [&](const std::vector<std::string>& more) {
    for (const auto& n : more) {
      if (std::find(names.begin(), names.end(), n) == names.end()) {
        names.push_back(n);
      }
    }
  };
  for (const auto& flag : ins.flags) {
    add(expand_words(flag.value, {}, escape).unset);
  }
  if (ins.keyword == "run") {
    // The JSON form execs directly: no shell, so `$X` stays literal text.
    if (!ins.json_form) {
      for (const auto& arg : ins.args) {
        add(shell_variable_refs(arg));
      }
      for (const auto& doc : ins.heredocs) {
        add(shell_variable_refs(doc.content));
      }
    }
    return names;
  }
  bool pairs = ins.keyword == "env" || ins.keyword == "label" || ins.keyword == "arg";
  for (std::size_t i = pairs ? 1 : 0; i < ins.args.size(); i += pairs ? 2 : 1) {
    if (ins.keyword == "arg" && !((i / 2) < ins.arg_has_value.size() && ins.arg_has_value[i / 2])) {
      continue;
    }
    add(expand_words(ins.args[i], {}, escape).unset);
  }
  return names;
}

} // namespace

// BuildKit drops every ARG at FROM: a global ARG must be redeclared in the stage and a stage's
// ARG never reaches the next one. Used anyway, it expands empty, and `make -j$JOBS` or
// `cp $SRC/* $DST` silently collapse instead of failing.
void check_arg_scope(const LintContext& ctx, std::vector<LintFinding>& out) {
  const auto& options = ctx.options;
  std::set<std::string> globals;
  for (const auto& ins : ctx.dockerfile.instructions) {
    if (ins.keyword == "from") {
      break;
    }
    if (ins.keyword == "arg") {
      for (std::size_t i = 0; i < ins.args.size(); i += 2) {
        globals.insert(ins.args[i]);
      }
    }
  }
  auto stages = split_stages(ctx.dockerfile);
  std::vector<std::set<std::string>> stage_args(stages.size());
  for (std::size_t s = 0; s < stages.size(); ++s) {
    for (const auto* ins : stages[s]) {
      if (ins->keyword == "arg") {
        for (std::size_t i = 0; i < ins->args.size(); i += 2) {
          stage_args[s].insert(ins->args[i]);
        }
      }
    }
  }

  std::map<std::string, std::set<std::string>> env_by_stage_name;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    std::set<std::string> declared;
    std::set<std::string> env;
    const auto& from = *stages[s].front();
    if (!from.args.empty()) {
      if (auto it = env_by_stage_name.find(lower(from.args[0])); it != env_by_stage_name.end()) {
        env = it->second;
      }
    }
    for (const auto* ins : stages[s]) {
      if (ins->keyword == "from" || is_runtime_only(ins->keyword)) {
        continue;
      }
      for (const auto& name : used_names(*ins, ctx.dockerfile.escape)) {
        if (declared.count(name) != 0 || env.count(name) != 0 ||
            std::find(options.known_names.begin(), options.known_names.end(), name) !=
                options.known_names.end()) {
          continue;
        }
        std::string where;
        if (globals.count(name) != 0) {
          where = "before the first FROM";
        } else {
          for (std::size_t other = 0; other < stages.size(); ++other) {
            if (other != s && stage_args[other].count(name) != 0) {
              where = fmt::format("in stage {}", other);
              break;
            }
          }
        }
        if (where.empty()) {
          continue;
        }
        auto finding = make_finding(ctx, *ins, "${" + name, "", "");
        std::string needle = finding.column != ins->start.column ? "${" + name : "$" + name;
        out.push_back(
            make_finding(ctx, *ins, needle, "arg-scope",
                         fmt::format("{} is declared by ARG only {}, so here it expands empty; add "
                                     "`ARG {}` to this stage before its use",
                                     name, where, name)));
      }
      if (ins->keyword == "arg") {
        for (std::size_t i = 0; i < ins->args.size(); i += 2) {
          declared.insert(ins->args[i]);
        }
      } else if (ins->keyword == "env") {
        for (std::size_t i = 0; i < ins->args.size(); i += 2) {
          env.insert(ins->args[i]);
        }
      }
    }
    if (from.args.size() == 3) {
      env_by_stage_name[lower(from.args[2])] = env;
    }
  }
}

} // namespace kiln
