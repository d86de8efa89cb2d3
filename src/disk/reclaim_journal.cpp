#include "disk/reclaim_journal.h"

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kiln {

using json = nlohmann::json;

void journal_reclaim(const std::filesystem::path& records, const std::string& when,
                     const std::string& record) {
  std::ofstream out(records / "reclaims.jsonl", std::ios::app);
  out << json{{"time", when}, {"record", record}}.dump() << "\n";
}

std::vector<std::string> reclaims_since(const std::filesystem::path& records,
                                        const std::string& since) {
  std::vector<std::string> found;
  std::ifstream in(records / "reclaims.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_object()) {
      continue;
    }
    std::string when = j.value("time", "");
    if (when > since) {
      found.push_back(fmt::format("kiln disk reclaim at {}: {}", when, j.value("record", "")));
    }
  }
  return found;
}

} // namespace kiln
