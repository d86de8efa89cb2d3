#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "lint/rules.h"

namespace kiln {
namespace {

// The instructions whose words BuildKit expands itself; RUN, CMD and the like are left to the
// shell, where an unset name may be set by the script.
bool expanded_by_buildkit(const Instruction& ins) {
  for (std::string_view k : {"add", "copy", "env", "expose", "label", "stopsignal", "user",
                             "volume", "workdir", "arg"}) {
    if (keyword_is(ins, k)) {
      return true;
    }
  }
  return false;
}

// The words of `ins` BuildKit expands: ENV and LABEL pairs, ARG defaults, COPY and ADD's
// --chown and --chmod, every argument of the rest.
void expanded_words(const Instruction& ins, std::vector<std::string_view>& words) {
  words.clear();
  if (keyword_is(ins, "arg")) {
    for (std::size_t i = 0; i + 1 < ins.args.size(); i += 2) {
      if (arg_sets_value(ins, i)) {
        words.push_back(ins.args[i + 1]);
      }
    }
    return;
  }
  for (const auto& flag : ins.flags) {
    if (flag.name == "chown" || flag.name == "chmod") {
      words.push_back(flag.value);
    }
  }
  if (!ins.heredocs.empty()) {
    return; // a heredoc's words are its body's business
  }
  for (const auto& arg : ins.args) {
    words.push_back(arg);
  }
}

struct StageNames {
  NameSet defined;
  std::vector<std::string_view> order; // the same names, for suggestions
  void add(std::string_view name) {
    if (defined.insert(name)) {
      order.push_back(name);
    }
  }
};

} // namespace

// A name BuildKit expands without a definition becomes empty: `COPY $DIR_ASSET .` copies the
// whole context. Defined are the stage's ENV and ARG names so far, what a stage it is built
// FROM defined, and the names an image's environment always has (LintOptions::known_names,
// less BuildKit's platform ARGs, which a stage must declare). A name some ARG declares outside
// the stage is arg-scope's finding, not this one's. Names set by the base image (GOPATH in
// golang) are unknown to a linter that pulls nothing: declare them, or skip the rule.
void check_undefined_var(const LintContext& ctx, std::vector<LintFinding>& out) {
  const char escape = ctx.dockerfile.escape;
  std::optional<NameSet> known;
  std::vector<std::string_view> known_order;
  // For each ARG name: the first stage declaring it (-2 before the first FROM) and whether a
  // second one does; built at the first name not defined in its stage.
  std::optional<std::unordered_map<std::string_view, std::pair<int, bool>>> declaring;
  auto declared_elsewhere = [&](std::string_view name, int stage) {
    if (!declaring) {
      declaring.emplace();
      int s = -2;
      for (const auto& ins : ctx.dockerfile.instructions) {
        if (keyword_is(ins, "from")) {
          s = s == -2 ? 0 : s + 1;
        }
        if (!keyword_is(ins, "arg")) {
          continue;
        }
        for (std::size_t i = 0; i < ins.args.size(); i += 2) {
          auto [it, added] = declaring->try_emplace(ins.args[i], s, false);
          if (!added && it->second.first != s) {
            it->second.second = true;
          }
        }
      }
    }
    auto it = declaring->find(name);
    return it != declaring->end() && (it->second.first != stage || it->second.second);
  };
  long budget = k_suggest_budget;
  std::vector<StageNames> finals(ctx.stages.size());
  std::vector<std::string_view> words;
  for (std::size_t s = 0; s < ctx.stages.size(); ++s) {
    StageNames names;
    if (ctx.parents[s] >= 0) {
      names = finals[static_cast<std::size_t>(ctx.parents[s])];
    }
    for (const Instruction* ins : ctx.stages[s]) {
      if (!expanded_by_buildkit(*ins)) {
        continue;
      }
      expanded_words(*ins, words);
      std::optional<ReferenceColumns> references; // read at the instruction's first finding
      for (std::string_view word : words) {
        if (word.find('$') == std::string_view::npos) {
          continue;
        }
        // With no variables set, every reference comes back as unset: exactly the names used.
        for (const auto& name : expand_words(word, {}, escape).unset) {
          if (names.defined.contains(name)) {
            continue;
          }
          if (!known) {
            known.emplace();
            for (const auto& k : ctx.options.known_names) {
              if (predefined_args().count(k) == 0 && known->insert(k)) {
                known_order.push_back(k);
              }
            }
          }
          if (known->contains(name) || name == "BUILDKIT_SBOM_SCAN_CONTEXT" ||
              name == "BUILDKIT_SBOM_SCAN_STAGE" || declared_elsewhere(name, static_cast<int>(s))) {
            continue;
          }
          std::string message = fmt::format("Usage of undefined variable '${}'", name);
          auto match = suggest_name(name, names.order, budget);
          if (match.empty()) {
            match = suggest_name(name, known_order, budget);
          }
          if (!match.empty()) {
            message += fmt::format(" (did you mean ${}?)", match);
          }
          if (!references) {
            references.emplace(ctx.start_line(*ins));
          }
          out.push_back(make_finding(ctx, *ins, references->column(name), "undefined-var",
                                     std::move(message)));
        }
      }
      if (keyword_is(*ins, "arg") || keyword_is(*ins, "env")) {
        for (std::size_t i = 0; i < ins->args.size(); i += 2) {
          names.add(ins->args[i]);
        }
      }
    }
    finals[s] = std::move(names);
  }
}

} // namespace kiln
