#include "util/time.h"

#include <ctime>
#include <random>

#include <cstdio>

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

std::string short_duration(double seconds) {
  if (seconds < 59.95) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1fs", seconds < 0 ? 0.0 : seconds);
    return text;
  }
  return human_duration(seconds);
}

} // namespace kiln
