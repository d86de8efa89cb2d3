#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kiln {

/// Mark every recent run whose manifest still says `running` as `abandoned`: call it with the
/// records lock held (driver/records_lock.h), so no live kiln writes it. Its running stages and
/// attempts become `abandoned` too, and `ended` is when its driver.log was last written. One line
/// per run marked, for the console. What it changes goes to the run's events.jsonl too, ending
/// with `run.ended`: its manifest stays the fold of its events.
std::vector<std::string> mark_abandoned_runs(const std::filesystem::path& records);

} // namespace kiln
