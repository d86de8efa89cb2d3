// The reader of a layer in buildah's store (tar-split lines and the folder of its files) on
// any input: a bundle whose `layer.tar-split.gz` (gzip or plain) is the tar-split and whose
// `diff/...` files are the layer's content. Beside the content folder lies a canary
// (fuzz_canary.h): an entry that reads it (through `..`, a symlink, an absolute name) broke out
// of the layer.
#include <string>

#include "fuzz_bundle.h"
#include "fuzz_canary.h"
#include "fuzz_check.h"
#include "gates/layer_tar.h"

namespace {

const kiln::fuzz::Canary k_canary;

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  static const fuzz::ScratchDir scratch;
  std::vector<fuzz::BundleFile> files =
      fuzz::split_bundle(fuzz::as_text(data, size), "layer.tar-split.gz");
  files.push_back({"canary", k_canary.value()});
  files.push_back({"diff/.keep", ""});
  scratch.write(files);
  std::size_t entries = 0;
  auto walked = walk_store_layer(scratch.path() / "layer.tar-split.gz", scratch.path() / "diff",
                                 [&](const LayerEntry& entry, const ContentReader& content) {
                                   ++entries;
                                   FUZZ_CHECK(!entry.path.starts_with("/"));
                                   FUZZ_CHECK(!(entry.whiteout && entry.opaque));
                                   std::size_t limit = entries % 2 == 0 ? 5 : 4096;
                                   std::string read = content(limit);
                                   FUZZ_CHECK(read.size() <= limit);
                                   FUZZ_CHECK(!k_canary.found_in(read));
                                 });
  (void)walked; // a broken layer is an error, which is an answer
  return 0;
}
