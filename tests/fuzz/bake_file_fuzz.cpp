// `kiln import bake`'s reader of bake JSON, a file from outside kiln, and the chain file it
// writes from it: whatever the input, an error has a position in it, and the written chain is
// TOML whose stage names kiln takes.
#include <algorithm>
#include <string>

#include <toml++/toml.h>

#include "chain/loader.h"
#include "fuzz_check.h"
#include "import/bake_chain.h"
#include "import/bake_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto bake = parse_bake_json(text, "bake.json");
  if (!bake) {
    int lines = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
    FUZZ_CHECK(bake.error().pos.line >= 1 && bake.error().pos.line <= lines);
    FUZZ_CHECK(bake.error().pos.column >= 1);
    return 0;
  }
  BakeImport options;
  options.bake_file = "/work/bake.json";
  options.chain_dir = "/work";
  options.chain_name = "fuzz";
  auto chain = bake_to_chain(*bake, options);
  if (!chain) {
    return 0;
  }
  for (const auto& line : chain->dropped) {
    FUZZ_CHECK(!line.empty());
  }
  toml::table table;
  try {
    table = toml::parse(chain->toml);
  } catch (const toml::parse_error&) {
    FUZZ_CHECK(!"the written chain is TOML");
  }
  if (const auto* stages = table["stage"].as_array()) {
    for (const auto& stage : *stages) {
      const auto* fields = stage.as_table();
      FUZZ_CHECK(fields != nullptr);
      std::string name = (*fields)["name"].value_or(std::string());
      // A matrix stage's name holds `${var}` until kiln expands it.
      FUZZ_CHECK(name.find("${") != std::string::npos || chain_loading::is_lower_name(name, false));
    }
  }
  return 0;
}
