#include <fmt/format.h>

#include "gates/image_env.h"
#include "lint/rules.h"

namespace kiln {
namespace {

// Every secret word holds one of these (apikey and key "key", password and passwd "pass",
// credential(s) "cred"): a name with none of them needs no splitting into parts.
bool may_name_a_secret(std::string_view name) {
  for (std::size_t i = 0; i + 3 <= name.size(); ++i) {
    char a = static_cast<char>(name[i] | 0x20);
    char b = static_cast<char>(name[i + 1] | 0x20);
    char c = static_cast<char>(name[i + 2] | 0x20);
    if ((a == 'k' && b == 'e' && c == 'y') || (a == 'a' && b == 'u' && c == 't') ||
        (a == 't' && b == 'o' && c == 'k') || (a == 's' && b == 'e' && c == 'c') ||
        (a == 'p' && b == 'a' && c == 's') || (a == 'p' && b == 'w' && c == 'o') ||
        (a == 'c' && b == 'r' && c == 'e')) {
      return true;
    }
  }
  return false;
}

} // namespace

// An ARG's value is kept in the image's build history and an ENV's in its config: a secret
// passed either way is readable by anyone who pulls the image. The name test is the image-env
// gate's, so a Dockerfile and the image built from it are judged alike.
void check_secrets_in_arg_env(const LintContext& ctx, std::vector<LintFinding>& out) {
  for (const auto& ins : ctx.dockerfile.instructions) {
    bool is_env = keyword_is(ins, "env");
    if (!is_env && !keyword_is(ins, "arg")) {
      continue;
    }
    for (std::size_t i = 0; i < ins.args.size(); i += 2) {
      const auto& name = ins.args[i];
      if (!may_name_a_secret(name) || !secret_word(name)) {
        continue;
      }
      // An ENV that leak-env-name refuses (AWS_SECRET_ACCESS_KEY) is that rule's finding: one
      // finding per fault.
      if (is_env && build_host_name(name, ctx.options.extra_names)) {
        continue;
      }
      out.push_back(
          make_finding(ctx, ins, arg_column(ins, i), "secrets-used-in-arg-or-env",
                       fmt::format("Do not use ARG or ENV instructions for sensitive data ({} {})",
                                   is_env ? "ENV" : "ARG", go_quote(name))));
    }
  }
}

} // namespace kiln
