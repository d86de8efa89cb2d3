#include "import/bake_file.h"

#include <algorithm>
#include <map>
#include <set>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/strings.h"

namespace kiln {

namespace {

using Json = nlohmann::ordered_json;
using PathStep = std::variant<std::string, size_t>;
using JsonPath = std::vector<PathStep>;

// A bake file is five levels deep (target, name, field, entry, attribute). Deeper input is
// refused before nlohmann builds it: copying and describing a value recurse once per level.
constexpr int k_max_depth = 32;
// Inheritance is resolved recursively: a chain of parents this long is a generated file gone
// wrong, not a build.
constexpr size_t k_max_inherits = 64;

// How buildx merges a target into one that inherits it (bake/bake.go Target.Merge): maps by
// key, these lists by appending, every other field replaced.
const std::set<std::string> k_merged_maps = {"args", "contexts", "labels", "extra-hosts"};
const std::set<std::string> k_appended_lists = {"annotations", "attest", "policy",
                                                "secret",      "ssh",    "cache-from"};

SourcePos at_offset(std::string_view text, size_t offset, const std::string& file) {
  offset = std::min(offset, text.size());
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return {file, line, static_cast<int>(offset - line_start) + 1};
}

size_t skip_space(std::string_view text, size_t at) {
  while (at < text.size() &&
         (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r')) {
    ++at;
  }
  return at;
}

/// Past the string token at `at` (on its opening quote).
size_t skip_string(std::string_view text, size_t at) {
  for (++at; at < text.size(); ++at) {
    if (text[at] == '\\') {
      ++at;
    } else if (text[at] == '"') {
      return at + 1;
    }
  }
  return text.size();
}

/// Past the value at `at` in valid JSON; nested values by counting, so any depth is safe.
size_t skip_value(std::string_view text, size_t at) {
  if (at >= text.size()) {
    return at;
  }
  if (text[at] == '"') {
    return skip_string(text, at);
  }
  if (text[at] != '{' && text[at] != '[') {
    while (at < text.size() && text[at] != ',' && text[at] != '}' && text[at] != ']' &&
           text[at] != ' ' && text[at] != '\n' && text[at] != '\t' && text[at] != '\r') {
      ++at;
    }
    return at;
  }
  int depth = 0;
  while (at < text.size()) {
    char c = text[at];
    if (c == '"') {
      at = skip_string(text, at);
      continue;
    }
    ++at;
    if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      break;
    }
  }
  return at;
}

/// Where the value at `path` starts in `text` (valid JSON), 0 when it cannot be found. A key
/// written twice is found at its last occurrence, the one nlohmann keeps.
size_t locate(std::string_view text, const JsonPath& path) {
  size_t at = skip_space(text, 0);
  for (const auto& step : path) {
    if (at >= text.size()) {
      return 0;
    }
    if (const auto* key = std::get_if<std::string>(&step)) {
      if (text[at] != '{') {
        return 0;
      }
      size_t found = 0;
      at = skip_space(text, at + 1);
      while (at < text.size() && text[at] == '"') {
        size_t key_end = skip_string(text, at);
        Json decoded = Json::parse(text.substr(at, key_end - at), nullptr, false);
        at = skip_space(text, key_end);
        at = skip_space(text, at + 1); // the ':'
        if (decoded.is_string() && decoded.get<std::string>() == *key) {
          found = at;
        }
        at = skip_space(text, skip_value(text, at));
        if (at < text.size() && text[at] == ',') {
          at = skip_space(text, at + 1);
        }
      }
      if (found == 0) {
        return 0;
      }
      at = found;
    } else {
      if (text[at] != '[') {
        return 0;
      }
      at = skip_space(text, at + 1);
      for (size_t i = 0; i < std::get<size_t>(step); ++i) {
        at = skip_space(text, skip_value(text, at));
        if (at >= text.size() || text[at] != ',') {
          return 0;
        }
        at = skip_space(text, at + 1);
      }
    }
  }
  return at;
}

/// The offset of the first bracket nested deeper than k_max_depth, outside strings.
std::optional<size_t> too_deep(std::string_view text) {
  int depth = 0;
  for (size_t at = 0; at < text.size(); ++at) {
    char c = text[at];
    if (c == '"') {
      at = skip_string(text, at) - 1;
    } else if (c == '{' || c == '[') {
      if (++depth > k_max_depth) {
        return at;
      }
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return std::nullopt;
}

std::string_view kind_of(const Json& value) {
  switch (value.type()) {
  case Json::value_t::object:
    return "an object";
  case Json::value_t::array:
    return "an array";
  case Json::value_t::string:
    return "a string";
  case Json::value_t::boolean:
    return "a boolean";
  case Json::value_t::null:
    return "null";
  default:
    return "a number";
  }
}

/// A shape error: thrown inside the reader, caught once in parse_bake_json.
struct ShapeError {
  JsonPath path;
  std::string message;
};

std::string path_text(const JsonPath& path) {
  std::string shown;
  for (const auto& step : path) {
    if (const auto* key = std::get_if<std::string>(&step)) {
      shown += shown.empty() ? *key : "." + *key;
    } else {
      shown += fmt::format("[{}]", std::get<size_t>(step));
    }
  }
  return shown;
}

[[noreturn]] void wrong(const JsonPath& path, const Json& value, std::string_view expected) {
  throw ShapeError{
      path, fmt::format("'{}' must be {}, not {}", path_text(path), expected, kind_of(value))};
}

JsonPath operator/(JsonPath path, PathStep step) {
  path.push_back(std::move(step));
  return path;
}

std::string string_at(const Json& value, const JsonPath& path) {
  if (!value.is_string()) {
    wrong(path, value, "a string");
  }
  return value.get<std::string>();
}

std::vector<std::string> strings_at(const Json& value, const JsonPath& path) {
  if (!value.is_array()) {
    wrong(path, value, "an array of strings");
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < value.size(); ++i) {
    out.push_back(string_at(value[i], path / i));
  }
  return out;
}

/// An object of strings; a null value stays absent when `nulls`.
std::vector<std::pair<std::string, std::optional<std::string>>>
string_map_at(const Json& value, const JsonPath& path, bool nulls) {
  if (!value.is_object()) {
    wrong(path, value, "an object of strings");
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> out;
  for (const auto& [key, entry] : value.items()) {
    if (nulls && entry.is_null()) {
      out.emplace_back(key, std::nullopt);
    } else {
      out.emplace_back(key, string_at(entry, path / key));
    }
  }
  return out;
}

/// `key=value` pairs of a CSV entry as buildx writes them (`type=registry,ref=...`); quoting
/// is not undone, a quoted comma is rare in these fields.
std::vector<std::pair<std::string, std::string>> csv_pairs(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& field : split(text, ',')) {
    auto eq = field.find('=');
    if (eq == std::string::npos) {
      pairs.emplace_back(lower(trim(field)), "");
    } else {
      pairs.emplace_back(lower(trim(std::string_view(field).substr(0, eq))), field.substr(eq + 1));
    }
  }
  return pairs;
}

/// A `type=...,key=value` entry (cache-from, cache-to, output, attest), from its string form or
/// buildx's object form (the type and the attributes as one object of strings).
std::string csv_entry_at(const Json& value, const JsonPath& path) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  if (!value.is_object()) {
    wrong(path, value, "a string or an object of strings");
  }
  std::vector<std::string> fields;
  if (value.contains("type")) {
    fields.push_back("type=" + string_at(value["type"], path / std::string("type")));
  }
  for (const auto& [key, entry] : value.items()) {
    if (key != "type") {
      fields.push_back(key + "=" +
                       (entry.is_boolean() ? std::string(entry.get<bool>() ? "true" : "false")
                                           : string_at(entry, path / key)));
    }
  }
  return join(fields, ",");
}

BakeSecret secret_at(const Json& value, const JsonPath& path) {
  BakeSecret secret;
  if (value.is_string()) {
    std::string type;
    for (const auto& [key, field] : csv_pairs(value.get<std::string>())) {
      if (key == "id") {
        secret.id = field;
      } else if (key == "src" || key == "source") {
        secret.src = field;
      } else if (key == "env") {
        secret.env = field;
      } else if (key == "type") {
        type = field;
      }
    }
    // buildx: `type=env,src=VAR` names the variable by src.
    if (type == "env" && secret.env.empty()) {
      std::swap(secret.env, secret.src);
    }
    return secret;
  }
  if (!value.is_object()) {
    wrong(path, value, "a string or an object");
  }
  for (const auto& [key, field] : value.items()) {
    if (key == "id") {
      secret.id = string_at(field, path / key);
    } else if (key == "src") {
      secret.src = string_at(field, path / key);
    } else if (key == "env") {
      secret.env = string_at(field, path / key);
    }
  }
  return secret;
}

/// How a field kiln does not carry reads in the report: strings as written, a list of them
/// joined, structured values by their kind (never dumped: a report line stays one line).
std::string shown(const Json& value, const JsonPath& path) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  if (value.is_boolean()) {
    return value.get<bool>() ? "true" : "false";
  }
  if (value.is_number()) {
    return value.dump();
  }
  if (value.is_array()) {
    std::vector<std::string> parts;
    for (size_t i = 0; i < value.size(); ++i) {
      const Json& entry = value[i];
      parts.push_back(entry.is_string() || entry.is_object() ? csv_entry_at(entry, path / i)
                                                             : std::string(kind_of(entry)));
    }
    return join(parts, " ");
  }
  if (value.is_object()) {
    std::vector<std::string> parts;
    for (const auto& [key, entry] : value.items()) {
      parts.push_back(entry.is_string() ? key + "=" + entry.get<std::string>() : key);
    }
    return join(parts, ",");
  }
  return std::string(kind_of(value));
}

void merge_into(Json& into, const Json& from) {
  for (const auto& [key, value] : from.items()) {
    if (key == "inherits") {
      continue;
    }
    if (k_merged_maps.count(key) && value.is_object() && into.contains(key) &&
        into[key].is_object()) {
      for (const auto& [entry_key, entry] : value.items()) {
        into[key][entry_key] = entry;
      }
    } else if (k_appended_lists.count(key) && value.is_array() && into.contains(key) &&
               into[key].is_array()) {
      for (const auto& entry : value) {
        into[key].push_back(entry);
      }
    } else {
      into[key] = value;
    }
  }
}

class Reader {
public:
  explicit Reader(const Json& targets) : m_targets(targets) {}

  /// The target `key` with every target it inherits merged under it, as buildx resolves it.
  Json resolved(const std::string& key, const JsonPath& path) {
    if (auto done = m_resolved.find(key); done != m_resolved.end()) {
      return done->second;
    }
    if (!m_visiting.insert(key).second) {
      throw ShapeError{path, fmt::format("target '{}' inherits itself", key)};
    }
    if (m_visiting.size() > k_max_inherits) {
      throw ShapeError{path, fmt::format("target '{}' inherits through more than {} targets", key,
                                         k_max_inherits)};
    }
    const Json& own = m_targets[key];
    if (!own.is_object()) {
      wrong({"target", key}, own, "an object");
    }
    Json merged = Json::object();
    if (own.contains("inherits")) {
      JsonPath at{"target", key, "inherits"};
      std::vector<std::string> parents = strings_at(own["inherits"], at);
      for (size_t i = 0; i < parents.size(); ++i) {
        if (!m_targets.contains(parents[i])) {
          throw ShapeError{at / i, fmt::format("target '{}' inherits '{}', which the file does "
                                               "not define",
                                               key, parents[i])};
        }
        merge_into(merged, resolved(parents[i], at / i));
      }
    }
    merge_into(merged, own);
    m_visiting.erase(key);
    m_resolved.emplace(key, merged);
    return merged;
  }

private:
  const Json& m_targets;
  std::map<std::string, Json> m_resolved;
  std::set<std::string> m_visiting;
};

BakeTarget read_target(const std::string& key, const Json& fields) {
  BakeTarget target;
  target.key = key;
  target.name = key;
  JsonPath at{"target", key};
  for (const auto& [field, value] : fields.items()) {
    JsonPath path = at / field;
    // A null field is one buildx leaves unset (`*string` fields print as null when given so).
    if (value.is_null()) {
      continue;
    }
    if (field == "name") {
      target.name = string_at(value, path);
    } else if (field == "description") {
      target.description = string_at(value, path);
    } else if (field == "inherits") {
      target.inherits = strings_at(value, path);
    } else if (field == "context") {
      target.context = string_at(value, path);
    } else if (field == "dockerfile") {
      target.dockerfile = string_at(value, path);
    } else if (field == "dockerfile-inline") {
      target.dockerfile_inline = string_at(value, path);
    } else if (field == "target") {
      target.target = string_at(value, path);
    } else if (field == "args") {
      target.args = string_map_at(value, path, true);
    } else if (field == "tags") {
      target.tags = strings_at(value, path);
    } else if (field == "platforms") {
      target.platforms = strings_at(value, path);
    } else if (field == "contexts") {
      for (auto& [name, where] : string_map_at(value, path, false)) {
        target.contexts.emplace_back(name, *where);
      }
    } else if (field == "secret") {
      if (!value.is_array()) {
        wrong(path, value, "an array");
      }
      for (size_t i = 0; i < value.size(); ++i) {
        target.secrets.push_back(secret_at(value[i], path / i));
      }
    } else if (field == "cache-from" || field == "cache-to") {
      if (!value.is_array()) {
        wrong(path, value, "an array");
      }
      auto& specs = field == "cache-from" ? target.cache_from : target.cache_to;
      for (size_t i = 0; i < value.size(); ++i) {
        specs.push_back(csv_entry_at(value[i], path / i));
      }
    } else if (field == "matrix") {
      if (!value.is_object()) {
        wrong(path, value, "an object of arrays");
      }
      for (const auto& [name, values] : value.items()) {
        if (!values.is_array()) {
          wrong(path / name, values, "an array");
        }
        std::vector<std::string> texts;
        bool all_strings =
            std::all_of(values.begin(), values.end(), [](const Json& v) { return v.is_string(); });
        if (!all_strings) {
          // Maps as values (`item.tgt`) need bake's expressions, which kiln does not evaluate.
          target.other.push_back({"matrix", name + " (values that are not strings)"});
          continue;
        }
        for (const auto& entry : values) {
          texts.push_back(entry.get<std::string>());
        }
        target.matrix.emplace_back(name, std::move(texts));
      }
    } else if (field == "no-cache") {
      if (!value.is_boolean()) {
        wrong(path, value, "a boolean");
      }
      target.no_cache = value.get<bool>();
    } else {
      target.other.push_back({field, shown(value, path)});
    }
  }
  return target;
}

} // namespace

tl::expected<BakeFile, Diagnostic> parse_bake_json(std::string_view text, const std::string& file) {
  if (auto deep = too_deep(text)) {
    return tl::unexpected(Diagnostic{at_offset(text, *deep, file),
                                     fmt::format("nested deeper than {} levels", k_max_depth),
                                     "a bake file is a few levels deep: is this a bake file?"});
  }
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::parse_error& error) {
    // nlohmann counts the bytes it read before the one it could not take.
    std::string message = error.what();
    if (auto detail = message.find("syntax error while parsing value - ");
        detail != std::string::npos) {
      message = message.substr(detail + 35);
    } else if (auto colon = message.rfind(": "); colon != std::string::npos) {
      message = message.substr(colon + 2);
    }
    return tl::unexpected(Diagnostic{at_offset(text, error.byte, file),
                                     "not valid JSON: " + message,
                                     "kiln reads the JSON `docker buildx bake --print` prints"});
  } catch (const Json::out_of_range& error) {
    // A number too large for a double ("1E999"): nlohmann names the number, not where it is.
    std::string message = error.what();
    size_t open = message.find('\'');
    size_t close = message.rfind('\'');
    size_t at = 0;
    if (open != std::string::npos && close > open) {
      at = std::min(text.find(message.substr(open + 1, close - open - 1)), text.size());
    }
    return tl::unexpected(Diagnostic{at_offset(text, at, file),
                                     "not valid JSON: a number too large to read",
                                     "kiln reads the JSON `docker buildx bake --print` prints"});
  }
  try {
    if (!doc.is_object()) {
      throw ShapeError{{},
                       fmt::format("the file must be a JSON object with \"target\" (and "
                                   "\"group\"), not {}",
                                   kind_of(doc))};
    }
    BakeFile bake;
    for (const auto& [key, value] : doc.items()) {
      if (key != "target" && key != "group") {
        bake.other_blocks.push_back(key);
      }
    }
    if (!doc.contains("target")) {
      throw ShapeError{{}, "the file has no \"target\" object: there is nothing to build"};
    }
    const Json& targets = doc["target"];
    if (!targets.is_object()) {
      wrong({"target"}, targets, "an object of targets");
    }
    Reader reader(targets);
    for (const auto& [key, value] : targets.items()) {
      JsonPath path{"target", key};
      BakeTarget target = read_target(key, reader.resolved(key, path));
      target.line = at_offset(text, locate(text, path), file).line;
      bake.targets.push_back(std::move(target));
    }
    if (doc.contains("group")) {
      const Json& groups = doc["group"];
      if (!groups.is_object()) {
        wrong({"group"}, groups, "an object of groups");
      }
      for (const auto& [name, group] : groups.items()) {
        JsonPath path{"group", name};
        if (!group.is_object()) {
          wrong(path, group, "an object");
        }
        BakeGroup read{name, {}};
        if (group.contains("targets") && !group["targets"].is_null()) {
          read.targets = strings_at(group["targets"], path / std::string("targets"));
        }
        bake.groups.push_back(std::move(read));
      }
    }
    return bake;
  } catch (const ShapeError& error) {
    size_t offset = locate(text, error.path);
    return tl::unexpected(Diagnostic{at_offset(text, offset, file), error.message, {}});
  }
}

} // namespace kiln
