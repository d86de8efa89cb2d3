#include "util/strings.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(Base64, EncodesAsRfc4648AndDecodesBack) {
  // RFC 4648, section 10.
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(plain), encoded) << plain;
    EXPECT_EQ(base64_decode(encoded), std::string(plain)) << encoded;
  }
  std::string bytes;
  for (int c = 0; c < 256; ++c) {
    bytes.push_back(static_cast<char>(c));
  }
  EXPECT_EQ(base64_decode(base64_encode(bytes)), bytes);
}

} // namespace
} // namespace kiln
