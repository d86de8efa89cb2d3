// The layer reader (gzip, zstd or plain; ustar, GNU and PAX headers; whiteouts) on any blob,
// and the residue rules on every path and content it yields. An entry's path is always
// relative and never ends in `/`; a content is never longer than asked.
#include <string>

#include "fuzz_check.h"
#include "gates/layer_tar.h"
#include "gates/residue.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::size_t entries = 0;
  auto walked =
      walk_layer_bytes(bytes, "fuzz", [&](const LayerEntry& entry, const ContentReader& content) {
        ++entries;
        FUZZ_CHECK(!entry.path.starts_with("/"));
        FUZZ_CHECK(!entry.path.ends_with("/"));
        FUZZ_CHECK(!(entry.whiteout && entry.opaque));
        std::size_t limit = entries % 3 == 0 ? 7 : k_residue_read_limit;
        std::string read = content(limit);
        FUZZ_CHECK(read.size() <= limit);
        FUZZ_CHECK(read.size() <= entry.size);
        std::string_view rule = residue_rule(entry.path);
        (void)residue_detail(rule.empty() ? "npm-config" : rule, read);
      });
  (void)walked; // a broken blob is an error, which is an answer
  return 0;
}
