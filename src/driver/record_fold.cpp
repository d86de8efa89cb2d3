#include "driver/record_fold.h"

#include <fstream>

#include <fmt/format.h>

#include "driver/records.h"

namespace kiln {

namespace {

using Json = nlohmann::ordered_json;

/// The entry named `key` in `parts`, appended at the end when there is none yet.
Json& part_named(std::vector<std::pair<std::string, Json>>& parts, const std::string& key) {
  for (auto& [name, record] : parts) {
    if (name == key) {
      return record;
    }
  }
  return parts.emplace_back(key, Json::object()).second;
}

/// The string member `key` of `event`, or nullptr when it is missing or not a string.
const std::string* string_member(const Json& event, const char* key) {
  auto found = event.find(key);
  return found != event.end() && found->is_string() ? found->get_ptr<const std::string*>()
                                                    : nullptr;
}

} // namespace

bool is_record_event(std::string_view type) {
  return type == "run.record" || type == "stage.record" || type == "publish.record";
}

tl::expected<void, std::string> RecordFold::apply(const Json& event) {
  if (!event.is_object()) {
    return tl::make_unexpected("an event is a JSON object");
  }
  const std::string* type = string_member(event, "type");
  if (type == nullptr) {
    return tl::make_unexpected("the event has no \"type\" string");
  }
  if (!is_record_event(*type)) {
    return {};
  }
  auto record = event.find("record");
  if (record == event.end() || !record->is_object()) {
    return tl::make_unexpected(
        fmt::format("a {} event carries its part as a \"record\" object", *type));
  }
  if (*type == "run.record") {
    m_run = *record;
    return {};
  }
  const char* key = *type == "stage.record" ? "stage" : "ref";
  const std::string* name = string_member(event, key);
  if (name == nullptr) {
    return tl::make_unexpected(
        fmt::format("a {} event names its {} as a \"{}\" string", *type, key, key));
  }
  part_named(*type == "stage.record" ? m_stages : m_publish, *name) = *record;
  return {};
}

tl::expected<void, std::string> RecordFold::apply_line(std::string_view line) {
  Json event = Json::parse(line, nullptr, false);
  if (event.is_discarded()) {
    return tl::make_unexpected("not a JSON line");
  }
  return apply(event);
}

bool RecordFold::ended() const {
  auto found = m_run.find("ended");
  return found != m_run.end() && found->is_string() && !found->get<std::string>().empty();
}

std::string RecordFold::manifest() const {
  std::vector<Json> stages;
  stages.reserve(m_stages.size());
  for (const auto& [name, record] : m_stages) {
    stages.push_back(record);
  }
  std::vector<Json> publish;
  publish.reserve(m_publish.size());
  for (const auto& [ref, record] : m_publish) {
    publish.push_back(record);
  }
  return manifest_text(m_run, stages, publish);
}

tl::expected<std::string, std::string> replay_manifest(const std::filesystem::path& events) {
  std::ifstream in(events, std::ios::binary);
  if (!in) {
    return tl::make_unexpected(fmt::format("{}: cannot be read", events.string()));
  }
  RecordFold fold;
  std::string line;
  for (long number = 1; std::getline(in, line); ++number) {
    if (in.eof()) {
      // No newline after it: a write a kill cut short. The writer writes the manifest only
      // after the line, so the record never held what it says.
      break;
    }
    if (auto applied = fold.apply_line(line); !applied) {
      return tl::make_unexpected(
          fmt::format("{}:{}: {}", events.string(), number, applied.error()));
    }
  }
  if (!fold.has_run()) {
    return tl::make_unexpected(
        fmt::format("{}: no run.record event: the run was recorded before its record was an event",
                    events.string()));
  }
  return fold.manifest();
}

} // namespace kiln
