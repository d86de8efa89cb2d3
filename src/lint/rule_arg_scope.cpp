#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "lint/rules.h"
#include "util/strings.h"

namespace kiln {
namespace {

bool is_runtime_only(const Instruction& ins) {
  // These run in the container, where no ARG exists at all; the image's ENV is what counts.
  return keyword_is(ins, "cmd") || keyword_is(ins, "entrypoint") ||
         keyword_is(ins, "healthcheck") || keyword_is(ins, "shell") || keyword_is(ins, "onbuild") ||
         keyword_is(ins, "maintainer");
}

// Names are few per file: a vector searched in order beats building sets for every file.
using NameList = std::vector<std::string_view>;

bool has(const NameList& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

void add_unique(NameList& names, std::string_view name) {
  if (!has(names, name)) {
    names.push_back(name);
  }
}

// The names an instruction expands, Dockerfile-level or (for RUN) in its shell script.
void used_names(const Instruction& ins, char escape, std::vector<std::string>& names) {
  names.clear();
  auto add = [&](std::vector<std::string>&& more) {
    for (auto& n : more) {
      if (std::find(names.begin(), names.end(), n) == names.end()) {
        names.push_back(std::move(n));
      }
    }
  };
  // Only `$` references a variable: text without one names nothing, whatever its quoting.
  auto expanded = [&](const std::string& text) {
    if (text.find('$') != std::string::npos) {
      add(expand_words(text, {}, escape).unset);
    }
  };
  for (const auto& flag : ins.flags) {
    expanded(flag.value);
  }
  if (keyword_is(ins, "run")) {
    // The JSON form execs directly: no shell, so `$X` stays literal text.
    if (!ins.json_form) {
      for (const auto& arg : ins.args) {
        add(shell_variable_refs(arg));
      }
      for (const auto& doc : ins.heredocs) {
        add(shell_variable_refs(doc.content));
      }
    }
    return;
  }
  bool is_arg = keyword_is(ins, "arg");
  bool pairs = is_arg || keyword_is(ins, "env") || keyword_is(ins, "label");
  for (std::size_t i = pairs ? 1 : 0; i < ins.args.size(); i += pairs ? 2 : 1) {
    if (is_arg && !((i / 2) < ins.arg_has_value.size() && ins.arg_has_value[i / 2])) {
      continue;
    }
    expanded(ins.args[i]);
  }
}

void add_keys(const Instruction& ins, NameList& names) {
  for (std::size_t i = 0; i < ins.args.size(); i += 2) {
    add_unique(names, ins.args[i]);
  }
}

} // namespace

// BuildKit drops every ARG at FROM: a global ARG must be redeclared in the stage and a stage's
// ARG never reaches the next one. Used anyway, it expands empty, and `make -j$JOBS` or
// `cp $SRC/* $DST` silently collapse instead of failing.
void check_arg_scope(const LintContext& ctx, std::vector<LintFinding>& out) {
  const auto& options = ctx.options;
  NameList globals;
  for (const auto& ins : ctx.dockerfile.instructions) {
    if (keyword_is(ins, "from")) {
      break;
    }
    if (keyword_is(ins, "arg")) {
      add_keys(ins, globals);
    }
  }
  const auto& stages = ctx.stages;
  std::vector<NameList> stage_args(stages.size());
  bool any_arg = !globals.empty();
  for (std::size_t s = 0; s < stages.size(); ++s) {
    for (const auto* ins : stages[s]) {
      if (keyword_is(*ins, "arg")) {
        add_keys(*ins, stage_args[s]);
      }
    }
    any_arg = any_arg || !stage_args[s].empty();
  }
  if (!any_arg) {
    return; // a name is only out of scope when some ARG somewhere declares it
  }

  // (stage name, ENV names), later stages of the same name replacing earlier ones.
  std::vector<std::pair<std::string, NameList>> env_by_stage_name;
  std::vector<std::string> names;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    NameList declared;
    NameList env;
    const auto& from = *stages[s].front();
    if (!from.args.empty()) {
      auto base = lower(from.args[0]);
      for (const auto& [name, stage_env] : env_by_stage_name) {
        if (name == base) {
          env = stage_env;
        }
      }
    }
    for (const auto* ins : stages[s]) {
      if (keyword_is(*ins, "from") || is_runtime_only(*ins)) {
        continue;
      }
      used_names(*ins, ctx.dockerfile.escape, names);
      for (const auto& name : names) {
        if (has(declared, name) || has(env, name) ||
            std::find(options.known_names.begin(), options.known_names.end(), name) !=
                options.known_names.end()) {
          continue;
        }
        std::string where;
        if (has(globals, name)) {
          where = "before the first FROM";
        } else {
          for (std::size_t other = 0; other < stages.size(); ++other) {
            if (other != s && has(stage_args[other], name)) {
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
      if (keyword_is(*ins, "arg")) {
        add_keys(*ins, declared);
      } else if (keyword_is(*ins, "env")) {
        add_keys(*ins, env);
      }
    }
    if (from.args.size() == 3) {
      auto name = lower(from.args[2]);
      auto it = std::find_if(env_by_stage_name.begin(), env_by_stage_name.end(),
                             [&](const auto& entry) { return entry.first == name; });
      if (it != env_by_stage_name.end()) {
        it->second = env;
      } else {
        env_by_stage_name.emplace_back(std::move(name), env);
      }
    }
  }
}

} // namespace kiln
