#include "disk/sizes.h"

#include <charconv>
#include <cmath>
#include <iterator>
#include <utility>

#include <fmt/format.h>

#include "util/strings.h"

namespace kiln {

uint64_t parse_human_size(std::string_view text) {
  text = trim(text);
  if (text.ends_with('*')) {
    text = trim(text.substr(0, text.size() - 1));
  }
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data() || !(value >= 0)) {
    return 0;
  }
  std::string_view unit = trim(text.substr(static_cast<size_t>(end - text.data())));
  static constexpr std::pair<std::string_view, double> k_units[] = {
      {"", 1},         {"B", 1},        {"kB", 1e3},     {"KB", 1e3},     {"MB", 1e6},
      {"GB", 1e9},     {"TB", 1e12},    {"PB", 1e15},    {"EB", 1e18},    {"KiB", 0x1p10},
      {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40}, {"PiB", 0x1p50}, {"EiB", 0x1p60}};
  for (const auto& [name, scale] : k_units) {
    // Past 2^63 bytes it is no disk's size, and llround could not hold it.
    if (unit == name) {
      return value * scale < 0x1p63 ? static_cast<uint64_t>(std::llround(value * scale)) : 0;
    }
  }
  return 0;
}

std::string decimal_size(uint64_t bytes) {
  static constexpr const char* k_units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1000 && unit + 1 < std::size(k_units)) {
    value /= 1000;
    ++unit;
  }
  return unit == 0 ? fmt::format("{}B", bytes) : fmt::format("{:.2f}{}", value, k_units[unit]);
}

} // namespace kiln
