#include <fmt/format.h>

#include "lint/rules.h"

namespace kiln {

// EXPOSE documents the container's ports; publishing (an address, a host port) is `docker run
// -p`'s job. BuildKit accepts `EXPOSE 127.0.0.1:80:80` today and drops the address and host
// port, and has said it will refuse them. Its protocol is written lower-case (`80/tcp`).
void check_expose(const LintContext& ctx, std::vector<LintFinding>& out) {
  for (const auto& ins : ctx.dockerfile.instructions) {
    if (!keyword_is(ins, "expose") || ins.args.empty()) {
      continue;
    }
    auto words = ins.json_form ? ins.args : split_blank(ins.args[0]);
    std::optional<LineSearch> search;
    for (const auto& word : words) {
      // BuildKit judges the port after expansion: a variable kiln cannot know expands empty.
      auto port = expand_words(word, {}, ctx.dockerfile.escape).value;
      auto colon = port.rfind(':');
      std::string_view container = colon == std::string::npos
                                       ? std::string_view(port)
                                       : std::string_view(port).substr(colon + 1);
      auto slash = container.find('/');
      auto proto =
          slash == std::string_view::npos ? std::string_view{} : container.substr(slash + 1);
      bool bad_case = !is_lower(proto);
      bool mapped = colon != std::string::npos;
      if (!bad_case && !mapped) {
        continue;
      }
      if (!search) {
        search.emplace(ctx.start_line(ins), arg_column(ins, 0));
      }
      int column = search->find(word);
      if (bad_case) {
        out.push_back(make_finding(
            ctx, ins, column, "expose-proto-casing",
            fmt::format("Defined protocol '{}' in EXPOSE instruction should be lowercase", port)));
      }
      if (mapped) {
        out.push_back(make_finding(ctx, ins, column, "expose-invalid-format",
                                   fmt::format("EXPOSE instruction should not define an IP "
                                               "address or host-port mapping, found '{}'",
                                               port)));
      }
    }
  }
}

} // namespace kiln
