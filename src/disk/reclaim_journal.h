#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kiln {

/// kiln's own reclaims, journalled in `<records>/reclaims.jsonl` as evidence a cold rebuild
/// can name: one appended for a reclaim that removed something.
void journal_reclaim(const std::filesystem::path& records, const std::string& when,
                     const std::string& record);
/// The journalled reclaims after `since` (UTC ISO-8601), each as "<when>: <record>".
std::vector<std::string> reclaims_since(const std::filesystem::path& records,
                                        const std::string& since);

} // namespace kiln
