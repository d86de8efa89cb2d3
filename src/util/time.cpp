#include "util/time.h"

#include <ctime>
#include <random>

#include <fmt/format.h>

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
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", p.tm_year + 1900, p.tm_mon + 1,
                     p.tm_mday, p.tm_hour, p.tm_min, p.tm_sec);
}

std::string make_run_id(SystemTime time) {
  std::tm p = utc_parts(time);
  std::random_device random;
  return fmt::format("{:04}{:02}{:02}-{:02}{:02}{:02}-{:04x}", p.tm_year + 1900, p.tm_mon + 1,
                     p.tm_mday, p.tm_hour, p.tm_min, p.tm_sec, random() & 0xffff);
}

std::string human_duration(double seconds) {
  long s = static_cast<long>(seconds + 0.5);
  if (s < 60) {
    return fmt::format("{}s", s);
  }
  if (s < 3600) {
    return fmt::format("{}m{:02}s", s / 60, s % 60);
  }
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

} // namespace kiln
