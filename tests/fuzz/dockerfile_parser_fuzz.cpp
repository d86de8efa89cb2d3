// The Dockerfile parser on any text, and every question kiln asks of its result: declared
// ARGs, named stages, parents, mounted secrets, stage scopes and word expansion. A parse error
// must name a place in the file; a parse must hold together (an argument position per
// argument, instructions in file order, each starting on the line its offset says).
#include <algorithm>
#include <cstdint>
#include <string_view>

#include "dockerfile/declared_args.h"
#include "dockerfile/mounts.h"
#include "dockerfile/outline.h"
#include "dockerfile/parents.h"
#include "dockerfile/parser.h"
#include "dockerfile/stage_names.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto lines = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
  auto parsed = parse_dockerfile(text);
  (void)outline_json(parsed);
  if (!parsed) {
    FUZZ_CHECK(!parsed.error().message.empty());
    FUZZ_CHECK(parsed.error().pos.line >= 1 && parsed.error().pos.line <= lines);
    FUZZ_CHECK(parsed.error().pos.column >= 1);
    return 0;
  }
  const Dockerfile& df = *parsed;
  FUZZ_CHECK(!df.instructions.empty());
  int previous_end = 0;
  for (const auto& ins : df.instructions) {
    FUZZ_CHECK(ins.start.line > previous_end && ins.start.line <= ins.end.line &&
               ins.end.line <= lines);
    FUZZ_CHECK(ins.start.column >= 1);
    previous_end = ins.end.line;
    FUZZ_CHECK(ins.arg_pos.size() == ins.args.size());
    for (const auto& pos : ins.arg_pos) {
      FUZZ_CHECK(pos.line >= ins.start.line && pos.line <= ins.end.line && pos.column >= 1);
    }
    for (const auto& flag : ins.flags) {
      FUZZ_CHECK(flag.pos.line >= ins.start.line && flag.pos.line <= ins.end.line);
    }
    // The offset is where the start line begins: the start line's number of line ends before.
    FUZZ_CHECK(ins.line_offset <= text.size());
    FUZZ_CHECK(ins.line_offset == 0 || text[ins.line_offset - 1] == '\n' ||
               (ins.line_offset == 3 && text.starts_with("\xEF\xBB\xBF")));
    auto before =
        std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(ins.line_offset), '\n');
    FUZZ_CHECK(before + 1 == ins.start.line);
    for (const auto& arg : ins.args) {
      (void)expand_words(arg, {{"A", "x"}}, df.escape);
    }
  }
  (void)declared_args(df);
  (void)named_stages(df);
  (void)mounts_secret(df, "kiln-budget");
  auto scopes = stage_scopes(df, {{"VERSION", "1"}});
  auto parents = parent_images(df, {});
  FUZZ_CHECK(parents.size() <= scopes.size());
  return 0;
}
