#include <fmt/format.h>

#include "gates/image_env.h"
#include "lint/rules.h"

namespace kiln {

// ENV values end up in the image; ARG defaults end up in its build history. Either way a
// build-network address is published to consumers who cannot reach it.
void check_leak_address(const LintContext& ctx, std::vector<LintFinding>& out) {
  const char escape = ctx.dockerfile.escape;
  for (const auto& ins : ctx.dockerfile.instructions) {
    bool is_env = keyword_is(ins, "env");
    if (!is_env && !keyword_is(ins, "arg")) {
      continue;
    }
    for (std::size_t i = 0; i + 1 < ins.args.size(); i += 2) {
      const auto& name = ins.args[i];
      if (!is_env && !arg_sets_value(ins, i)) {
        continue;
      }
      // A build-host name is refused whole by leak-env-name; its address adds nothing.
      if (is_env && build_host_name(name, ctx.options.extra_names)) {
        continue;
      }
      // Quotes and escapes removed; references expand empty, since a default's literal text
      // is what leaks.
      auto value = expand_words(ins.args[i + 1], {}, escape).value;
      auto addresses = host_addresses(name, value);
      if (addresses.empty()) {
        continue;
      }
      // Each address in the value as written, in order: the next one is looked for after it.
      int from = arg_column(ins, i + 1);
      LineSearch search(ctx.start_line(ins), from,
                        from > 0 ? from + static_cast<int>(ins.args[i + 1].size()) : 0);
      for (const auto& address : addresses) {
        auto kind = refused_address_kind(address).value_or("private");
        out.push_back(make_finding(
            ctx, ins, search.find(address), "leak-address",
            fmt::format("{} {} points at {}, a {} address of the build network that no "
                        "consumer can reach; pass it with --build-arg or a build secret instead",
                        is_env ? "ENV" : "ARG default", name, address, kind)));
      }
    }
  }
}

} // namespace kiln
