#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

namespace kiln {

/// A run's manifest as the fold of its record events (docs/events.md): `run.record` sets the
/// run's own fields, `stage.record` one stage (the first sets its place: run order),
/// `publish.record` one publish target. Every other event leaves the record as it is. The run
/// writes manifest.json from this fold as its writer applies each event, and `kiln records
/// replay` rebuilds it from events.jsonl the same way: one function of one stream.
class RecordFold {
public:
  /// Apply one event. An error names what is wrong with a record event (no JSON object, a
  /// part missing or of the wrong type); the fold is unchanged then.
  tl::expected<void, std::string> apply(const nlohmann::ordered_json& event);
  /// apply() of one line of events.jsonl.
  tl::expected<void, std::string> apply_line(std::string_view line);

  /// Whether the fold holds a record: a `run.record` was applied.
  bool has_run() const { return !m_run.empty(); }
  /// Whether the run's own fields say it ended.
  bool ended() const;
  /// The manifest.json text of the record so far.
  std::string manifest() const;

private:
  nlohmann::ordered_json m_run = nlohmann::ordered_json::object();
  std::vector<std::pair<std::string, nlohmann::ordered_json>> m_stages;  // name, record
  std::vector<std::pair<std::string, nlohmann::ordered_json>> m_publish; // ref, record
};

/// Whether an event of type `type` changes the record (and so the manifest).
bool is_record_event(std::string_view type);

/// The manifest a run's events.jsonl folds to. An error names the file and line that is not an
/// event, or says the stream holds no record (a run recorded before its events were).
tl::expected<std::string, std::string> replay_manifest(const std::filesystem::path& events);

} // namespace kiln
