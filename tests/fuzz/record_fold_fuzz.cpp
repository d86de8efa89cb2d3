// kiln records replay folds events.jsonl, which a user may hand it from anywhere: any lines give
// a manifest or an error; the manifest is JSON, and the manifest folded again from its own parts
// is the same manifest, byte for byte (the fold loses nothing and adds nothing).
#include <cstdint>
#include <string>
#include <string_view>

#include "driver/record_fold.h"
#include "fuzz_check.h"

namespace {

using Json = nlohmann::ordered_json;

std::string record_event(const char* type, const char* key, const std::string& name,
                         const Json& record) {
  Json event = {{"type", type}};
  if (key != nullptr) {
    event[key] = name;
  }
  event["record"] = record;
  return event.dump();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::RecordFold fold;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end;
    (void)fold.apply_line(text.substr(start, end - start));
    start = end + 1;
  }
  if (!fold.has_run()) {
    return 0;
  }
  std::string manifest = fold.manifest();
  Json doc = Json::parse(manifest, nullptr, false);
  FUZZ_CHECK(doc.is_object() && doc["stages"].is_array() && doc["publish"].is_array());

  kiln::RecordFold again;
  Json run = doc;
  run.erase("stages");
  run.erase("publish");
  FUZZ_CHECK(again.apply_line(record_event("run.record", nullptr, "", run)).has_value());
  for (size_t i = 0; i < doc["stages"].size(); ++i) {
    FUZZ_CHECK(
        again.apply_line(record_event("stage.record", "stage", std::to_string(i), doc["stages"][i]))
            .has_value());
  }
  for (size_t i = 0; i < doc["publish"].size(); ++i) {
    FUZZ_CHECK(
        again
            .apply_line(record_event("publish.record", "ref", std::to_string(i), doc["publish"][i]))
            .has_value());
  }
  FUZZ_CHECK(again.manifest() == manifest);
  return 0;
}
