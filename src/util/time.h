#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

using SystemTime = std::chrono::system_clock::time_point;

/// `2026-12-02T14:03:00Z`: records use UTC whatever the host's zone.
std::string utc_iso8601(SystemTime time);

/// Seconds since the epoch of `2026-12-02T14:03:00Z` (fractional seconds allowed), or nothing
/// when `text` is not that form.
std::optional<double> parse_utc(std::string_view text);

/// A run id `YYYYMMDD-HHMMSS-xxxx` (UTC, four random hex digits): sorts by start time and two
/// runs started in the same second still differ.
std::string make_run_id(SystemTime time);

/// Seconds as a short human duration: `42s`, `3m07s`, `2h05m`.
std::string human_duration(double seconds);

/// Seconds in an age written as a whole number and one unit: `90m`, `12h`, `30d`, `2w`; nothing
/// when `text` is not that form.
std::optional<double> parse_age(std::string_view text);

/// Like human_duration, with tenths under a minute (`0.6s`, `12.4s`), where a second matters.
std::string short_duration(double seconds);

} // namespace kiln
