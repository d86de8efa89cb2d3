#include "util/time.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <random>

namespace kiln {

namespace {

std::tm utc_parts(SystemTime time) {
  std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm parts{};
  ::gmtime_r(&t, &parts);
  return parts;
}

} // namespace

std::string utc_iso8601(SystemTime time) {
  std::tm p = utc_parts(time);
  char text[80];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02dZ", p.tm_year + 1900, p.tm_mon + 1,
                p.tm_mday, p.tm_hour, p.tm_min, p.tm_sec);
  return text;
}

std::string make_run_id(SystemTime time) {
  std::tm p = utc_parts(time);
  std::random_device random;
  char text[80];
  std::snprintf(text, sizeof text, "%04d%02d%02d-%02d%02d%02d-%04x", p.tm_year + 1900, p.tm_mon + 1,
                p.tm_mday, p.tm_hour, p.tm_min, p.tm_sec, random() & 0xffff);
  return text;
}

std::string human_duration(double seconds) {
  long s = static_cast<long>(seconds + 0.5);
  if (s < 60) {
    return std::to_string(s) + "s";
  }
  char text[80];
  if (s < 3600) {
    std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  }
  return text;
}

std::optional<double> parse_age(std::string_view text) {
  if (text.size() < 2) {
    return std::nullopt;
  }
  double unit = 0;
  switch (text.back()) {
  case 'm':
    unit = 60;
    break;
  case 'h':
    unit = 3600;
    break;
  case 'd':
    unit = 86400;
    break;
  case 'w':
    unit = 7 * 86400;
    break;
  default:
    return std::nullopt;
  }
  std::string_view digits = text.substr(0, text.size() - 1);
  // Whole numbers only, and bounded: a thousand years is older than any record.
  uint32_t count = 0;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
  if (error != std::errc() || end != digits.data() + digits.size() || count > 365000) {
    return std::nullopt;
  }
  return count * unit;
}

std::string short_duration(double seconds) {
  if (seconds < 59.95) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1fs", seconds < 0 ? 0.0 : seconds);
    return text;
  }
  return human_duration(seconds);
}

/// Seconds since the epoch of `2026-12-02T14:03:00Z` (fractional seconds allowed), or nothing
/// when `text` is not that form.
std::optional<double> parse_utc(std::string_view text) {
  auto number = [&text](size_t pos, size_t len, int& out) {
    if (pos + len > text.size()) {
      return false;
    }
    const char* first = text.data() + pos;
    auto [end, error] = std::from_chars(first, first + len, out);
    return error == std::errc() && end == first + len;
  };
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text.back() != 'Z' || !number(0, 4, year) || !number(5, 2, month) ||
      !number(8, 2, day) || !number(11, 2, hour) || !number(14, 2, minute) ||
      !number(17, 2, second)) {
    return std::nullopt;
  }
  double fraction = 0;
  std::string_view rest = text.substr(19, text.size() - 20);
  if (!rest.empty()) {
    if (rest.front() != '.' || rest.size() < 2 ||
        !std::all_of(rest.begin() + 1, rest.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
    double scale = 0.1;
    for (char c : rest.substr(1)) {
      fraction += (c - '0') * scale;
      scale /= 10;
    }
  }
  std::chrono::year_month_day date{std::chrono::year(year), std::chrono::month(month),
                                   std::chrono::day(day)};
  // 60 admits a leap second, which some clocks do print.
  if (!date.ok() || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  auto days = std::chrono::sys_days(date).time_since_epoch().count();
  return static_cast<double>(days) * 86400 + hour * 3600 + minute * 60 + second + fraction;
}

} // namespace kiln
