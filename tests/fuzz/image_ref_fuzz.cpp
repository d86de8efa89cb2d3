// The image reference grammar every tag, registry and index of a chain file goes through before
// it becomes an engine's argv word: what parses prints back as itself and parses again alike,
// and never starts with `-`.
#include <string>

#include "fuzz_bundle.h"
#include "fuzz_check.h"
#include "util/image_ref.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string_view text = fuzz::as_text(data, size);
  auto ref = parse_image_ref(text);
  if (!ref) {
    FUZZ_CHECK(!ref.error().empty());
    return 0;
  }
  FUZZ_CHECK(ref->str() == text);
  FUZZ_CHECK(!ref->str().starts_with("-"));
  auto again = parse_image_ref(ref->str());
  FUZZ_CHECK(again && again->repository() == ref->repository() && again->tag == ref->tag &&
             again->digest == ref->digest);
  return 0;
}
