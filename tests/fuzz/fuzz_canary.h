#pragma once

// A canary planted beside what a reader may read (outside a layout, beside a layer's folder):
// finding its value in what was read means the reader left the place it was given. The value is
// drawn at random per process and looked for without memcmp and without comparison tracing:
// libFuzzer learns the operands of every traced comparison and writes them into inputs, and a
// fixed canary compared that way was soon planted by the input itself, inside the layout.

#include <random>
#include <string>
#include <string_view>

namespace kiln::fuzz {

class Canary {
public:
  Canary() {
    std::random_device random;
    constexpr std::string_view k_hex = "0123456789abcdef";
    m_value = "KILN_FUZZ_CANARY_";
    for (int i = 0; i < 32; ++i) {
      m_value += k_hex[random() % 16];
    }
  }

  const std::string& value() const { return m_value; }

  /// Whether `text` holds the value, compared byte by byte out of libFuzzer's sight.
  __attribute__((no_sanitize("coverage"))) bool found_in(std::string_view text) const {
    for (std::size_t at = 0; at + m_value.size() <= text.size(); ++at) {
      std::size_t same = 0;
      while (same < m_value.size() && text[at + same] == m_value[same]) {
        ++same;
      }
      if (same == m_value.size()) {
        return true;
      }
    }
    return false;
  }

private:
  std::string m_value;
};

} // namespace kiln::fuzz
