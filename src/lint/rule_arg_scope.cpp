#include <algorithm>
#include <array>
#include <optional>
#include <unordered_map>
#include <unordered_set>

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

// The names an instruction expands, Dockerfile-level or (for RUN) in its shell script, each
// once, in first-seen order. `seen` is scratch space: past a few names a scan of `names` for
// each would make a RUN with 40,000 of them quadratic.
void used_names(const Instruction& ins, char escape, std::vector<std::string>& names,
                std::unordered_set<std::string>& seen) {
  constexpr std::size_t k_scanned = 32;
  names.clear();
  seen.clear();
  auto add = [&](std::vector<std::string>&& more) {
    for (auto& n : more) {
      bool known = names.size() <= k_scanned
                       ? std::find(names.begin(), names.end(), n) != names.end()
                       : !seen.insert(n).second;
      if (known) {
        continue;
      }
      if (names.size() == k_scanned) {
        seen.insert(names.begin(), names.end());
        seen.insert(n);
      }
      names.push_back(std::move(n));
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
    if (is_arg && !arg_sets_value(ins, i)) {
      continue;
    }
    expanded(ins.args[i]);
  }
}

void add_keys(const Instruction& ins, NameSet& names) {
  for (std::size_t i = 0; i < ins.args.size(); i += 2) {
    names.insert(ins.args[i]);
  }
}

} // namespace

// BuildKit drops every ARG at FROM: a global ARG must be redeclared in the stage and a stage's
// ARG never reaches the next one. Used anyway, it expands empty, and `make -j$JOBS` or
// `cp $SRC/* $DST` silently collapse instead of failing.
void check_arg_scope(const LintContext& ctx, std::vector<LintFinding>& out) {
  const auto& options = ctx.options;
  NameSet globals;
  for (const auto& ins : ctx.dockerfile.instructions) {
    if (keyword_is(ins, "from")) {
      break;
    }
    if (keyword_is(ins, "arg")) {
      add_keys(ins, globals);
    }
  }
  const auto& stages = ctx.stages;
  // For each name some stage declares: the first two such stages, so that the first other
  // than any given stage is at hand.
  std::unordered_map<std::string_view, std::array<int, 2>> declaring;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    for (const auto* ins : stages[s]) {
      if (!keyword_is(*ins, "arg")) {
        continue;
      }
      for (std::size_t i = 0; i < ins->args.size(); i += 2) {
        auto [it, added] = declaring.try_emplace(ins->args[i], std::array{static_cast<int>(s), -1});
        if (!added && it->second[0] != static_cast<int>(s) && it->second[1] < 0) {
          it->second[1] = static_cast<int>(s);
        }
      }
    }
  }
  if (globals.empty() && declaring.empty()) {
    return; // a name is only out of scope when some ARG somewhere declares it
  }
  std::optional<NameSet> known; // built for the first name not declared in its stage

  // ENV names by stage name, a later stage of the same name replacing an earlier one.
  std::unordered_map<std::string, NameSet> env_by_stage_name;
  std::vector<std::string> names;
  std::unordered_set<std::string> seen;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    NameSet declared;
    NameSet env;
    const auto& from = *stages[s].front();
    if (!from.args.empty()) {
      if (auto base = env_by_stage_name.find(lower(from.args[0]));
          base != env_by_stage_name.end()) {
        env = base->second;
      }
    }
    for (const auto* ins : stages[s]) {
      if (keyword_is(*ins, "from") || is_runtime_only(*ins)) {
        continue;
      }
      used_names(*ins, ctx.dockerfile.escape, names, seen);
      std::optional<ReferenceColumns> references; // read at the instruction's first finding
      for (const auto& name : names) {
        if (declared.contains(name) || env.contains(name)) {
          continue;
        }
        if (!known) {
          known.emplace();
          for (const auto& k : options.known_names) {
            known->insert(k);
          }
        }
        if (known->contains(name)) {
          continue;
        }
        std::string where;
        if (globals.contains(name)) {
          where = "before the first FROM";
        } else if (auto d = declaring.find(name); d != declaring.end()) {
          int other = d->second[0] != static_cast<int>(s) ? d->second[0] : d->second[1];
          if (other >= 0) {
            where = fmt::format("in stage {}", other);
          }
        }
        if (where.empty()) {
          continue;
        }
        if (!references) {
          references.emplace(ctx.start_line(*ins));
        }
        out.push_back(
            make_finding(ctx, *ins, references->column(name), "arg-scope",
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
      env_by_stage_name[lower(from.args[2])] = std::move(env);
    }
  }
}

} // namespace kiln
