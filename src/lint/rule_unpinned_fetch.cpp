#include <string>
#include <vector>

#include <fmt/format.h>
#include <re2/re2.h>

#include "lint/rules.h"
#include "lint/shell_commands.h"

namespace kiln {
namespace {

/// A URL whose path names a moving target: a `latest` release, a branch head.
bool moving_url(std::string_view word) {
  static const RE2 moving(
      R"((?i)^['"]?https?://\S*(/latest([/.?#'"]|$)|/(master|main|HEAD)([/.?#'"]|$)|[-_.]latest\.))");
  return RE2::PartialMatch(word, moving);
}

} // namespace

// A fetch of a moving ref makes two builds of one unchanged line differ, and a rebuild for any
// other reason silently picks up whatever the ref points at then: pin a tag, a commit or a
// release (and its checksum) so the line changes when what it fetches does.
void check_unpinned_fetch(const LintContext& ctx, std::vector<LintFinding>& out) {
  for (const auto& ins : ctx.dockerfile.instructions) {
    if (!keyword_is(ins, "run")) {
      continue;
    }
    std::string found;
    for_each_run_script(ins, [&](std::string_view script, bool) {
      bool cloned_unpinned = false;
      std::string clone_url;
      bool checked_out = false;
      for_each_command(script, [&](const std::vector<std::string_view>& words) {
        std::size_t name = command_name(words);
        if (name >= words.size()) {
          return;
        }
        std::string_view command = words[name];
        command = command.substr(command.find_last_of('/') + 1);
        if (command == "curl" || command == "wget") {
          for (size_t w = name + 1; w < words.size() && found.empty(); ++w) {
            if (moving_url(words[w])) {
              found = fmt::format("{} of {}", command, words[w]);
            }
          }
        } else if (command == "git") {
          // Past git's own options (`-C DIR`, `-c KEY=VALUE`, `--no-pager`) to its subcommand.
          size_t at = name + 1;
          while (at < words.size() && words[at].starts_with('-')) {
            at += words[at] == "-C" || words[at] == "-c" ? 2 : 1;
          }
          std::string_view sub = at < words.size() ? words[at] : std::string_view();
          if (sub == "clone") {
            bool branch = false;
            for (size_t w = at + 1; w < words.size(); ++w) {
              if (words[w] == "-b" || words[w] == "--branch" || words[w].starts_with("--branch=")) {
                std::string_view ref = words[w].starts_with("--branch=")
                                           ? words[w].substr(9)
                                           : (w + 1 < words.size() ? words[w + 1] : "");
                branch = ref != "master" && ref != "main" && ref != "HEAD";
              } else if (!words[w].starts_with('-') && clone_url.empty()) {
                clone_url = std::string(words[w]);
              }
            }
            cloned_unpinned = cloned_unpinned || !branch;
          } else if (sub == "checkout" || sub == "reset" || sub == "switch") {
            checked_out = true;
          }
        }
      });
      if (found.empty() && cloned_unpinned && !checked_out) {
        found = "git clone of " + (clone_url.empty() ? std::string("a repository") : clone_url) +
                " at its default branch";
      }
    });
    if (!found.empty()) {
      out.push_back(make_finding(
          ctx, ins, 0, "unpinned-fetch",
          fmt::format("RUN fetches a moving ref ({}): two builds of this unchanged line can "
                      "differ, and a rebuild for any other reason takes whatever it points at "
                      "then; pin a tag, a commit or a release (with its checksum)",
                      found)));
    }
  }
}

} // namespace kiln
