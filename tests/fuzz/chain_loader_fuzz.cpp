// The chain loader on any chain folder: the input is a bundle (fuzz_bundle.h) of the chain's
// files, written to a folder of its own (the loader reads paths): chain.toml (before the first
// header), its versions file, its Dockerfiles. Every problem must come back as a diagnostic
// with a message, rendered as kiln prints it.
#include <cstdlib>

#include "chain/chain_loader.h"
#include "fuzz_bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  static const fuzz::ScratchDir scratch;
  scratch.write(fuzz::split_bundle(fuzz::as_text(data, size), "chain.toml"));
  // `--engine buildkit` reaches the checks of the BuildKit-only keys whatever the file says.
  LoadOptions options;
  options.engine = size % 2 == 0 ? "" : "buildkit";
  auto chain = load_chain(scratch.path() / "chain.toml", options);
  if (!chain) {
    if (chain.error().empty()) {
      std::abort(); // refused without saying why
    }
    for (const Diagnostic& diagnostic : chain.error()) {
      if (diagnostic.message.empty()) {
        std::abort();
      }
      (void)format_diagnostic(diagnostic);
    }
  }
  return 0;
}
