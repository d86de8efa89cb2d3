// `kiln attest verify`'s reader of what a registry serves: an index, its attestation
// manifests and their in-toto statements, all outside kiln. The input is a bundle: `index`,
// then files named after a digest (`sha256-<hex>` for `sha256:<hex>`), each what the registry
// serves for it.
#include <algorithm>
#include <string>

#include "driver/attestations.h"
#include "fuzz_bundle.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::vector<fuzz::BundleFile> files = fuzz::split_bundle(fuzz::as_text(data, size), "index");
  std::string index;
  DigestReader read = [&](const std::string& digest) -> tl::expected<std::string, std::string> {
    std::string name = digest;
    std::replace(name.begin(), name.end(), ':', '-');
    for (const auto& file : files) {
      if (file.name == name) {
        return std::string(file.content);
      }
    }
    return tl::unexpected("no " + digest);
  };
  for (const auto& file : files) {
    if (file.name == "index") {
      index = std::string(file.content);
    }
  }
  auto checked = check_attestations(index, read, read);
  if (checked) {
    for (const auto& platform : *checked) {
      // A platform that verifies has both, each counted.
      FUZZ_CHECK(!platform.problems.empty() ||
                 (platform.dependencies >= 0 && platform.packages >= 0));
    }
  }
  return 0;
}
