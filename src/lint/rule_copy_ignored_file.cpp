#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "dockerfile/dockerignore.h"
#include "lint/rules.h"

namespace kiln {

// A source the .dockerignore excludes is not in the build context, so the build fails with
// "failed to compute cache key: ... not found" at that step, after everything before it built.
// As BuildKit does, a .dockerignore with an exclusion (`!keep`) is not judged: a directory
// may be ignored while a file in it is kept, and only the files on disk could tell.
void check_copy_ignored_file(const LintContext& ctx, std::string_view dockerignore,
                             std::vector<LintFinding>& out) {
  auto ignore = DockerIgnore::parse(dockerignore);
  if (!ignore || ignore->has_exclusions()) {
    return;
  }
  for (const auto& ins : ctx.dockerfile.instructions) {
    bool add = keyword_is(ins, "add");
    if (!add && !keyword_is(ins, "copy")) {
      continue;
    }
    // A COPY --from reads another stage or image, not the context.
    if (std::any_of(ins.flags.begin(), ins.flags.end(),
                    [](const Flag& f) { return f.name == "from"; })) {
      continue;
    }
    auto words = ins.json_form ? ins.args : split_blank(ins.args.empty() ? "" : ins.args[0]);
    std::optional<LineSearch> search;
    for (std::size_t i = 0; i + 1 < words.size(); ++i) {
      const auto& source = words[i];
      // URLs and git sources come from the network, heredocs from the Dockerfile, and a
      // variable's value is known only to the build.
      if (source.find("://") != std::string::npos || source.starts_with("git@") ||
          source.starts_with("<<") || source.find('$') != std::string::npos) {
        continue;
      }
      std::string path = clean_path(source);
      bool excluded = path == "." || path == "/" ? ignore->excludes_root() : ignore->excludes(path);
      if (!excluded) {
        continue;
      }
      if (!search) {
        search.emplace(ctx.start_line(ins), arg_column(ins, 0));
      }
      out.push_back(
          make_finding(ctx, ins, search->find(source), "copy-ignored-file",
                       fmt::format("Attempting to {} file {} that is excluded by .dockerignore",
                                   add ? "Add" : "Copy", go_quote(path))));
    }
  }
}

} // namespace kiln
