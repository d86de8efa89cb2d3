// The formats other tools read: BuildKit's lint JSON and GitHub's workflow commands.
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lint/lint.h"
#include "util/workflow_command.h"

namespace kiln {
namespace {

std::string base64(std::string_view data) {
  static constexpr char k_alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  std::size_t i = 0;
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(data[k]); };
  for (; i + 2 < data.size(); i += 3) {
    unsigned v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out += k_alphabet[v >> 18 & 63];
    out += k_alphabet[v >> 12 & 63];
    out += k_alphabet[v >> 6 & 63];
    out += k_alphabet[v & 63];
  }
  if (i + 1 == data.size()) {
    unsigned v = byte(i) << 16;
    out += k_alphabet[v >> 18 & 63];
    out += k_alphabet[v >> 12 & 63];
    out += "==";
  } else if (i + 2 == data.size()) {
    unsigned v = byte(i) << 16 | byte(i + 1) << 8;
    out += k_alphabet[v >> 18 & 63];
    out += k_alphabet[v >> 12 & 63];
    out += k_alphabet[v >> 6 & 63];
    out += '=';
  }
  return out;
}

// pb.Location as Go's encoding/json writes it: zero fields are omitempty, so source 0 and
// character 0 are left out, as in BuildKit's own output.
nlohmann::ordered_json location(int source, int start, int end) {
  nlohmann::ordered_json loc = nlohmann::ordered_json::object();
  if (source != 0) {
    loc["sourceIndex"] = source;
  }
  loc["ranges"] =
      nlohmann::ordered_json::array({{{"start", {{"line", start}}}, {"end", {{"line", end}}}}});
  return loc;
}

// Go's json.MarshalIndent escapes <, > and & (and U+2028, U+2029) inside strings; outside
// strings JSON has none of them, so the whole text can be rewritten.
std::string go_html_escape(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (c == '\xE2' && i + 2 < json.size() && json[i + 1] == '\x80' &&
               (json[i + 2] == '\xA8' || json[i + 2] == '\xA9')) {
      out += json[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

} // namespace

std::string render_buildkit_json(const std::vector<LintResult>& results,
                                 const std::vector<LintSource>& sources_in) {
  auto warnings = nlohmann::ordered_json::array();
  auto sources = nlohmann::ordered_json::array();
  nlohmann::ordered_json build_error;
  auto add_source = [&](std::size_t i) {
    nlohmann::ordered_json source;
    LintSource in = i < sources_in.size() ? sources_in[i] : LintSource{};
    source["filename"] = in.file;
    if (!in.text.empty()) {
      source["data"] = base64(in.text); // Go writes a []byte as base64
    }
    source["language"] = "Dockerfile";
    sources.push_back(std::move(source));
    return static_cast<int>(sources.size()) - 1;
  };
  // Every file linted is a source, as BuildKit lists the Dockerfile it was given.
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& result = results[i];
    int source = add_source(i);
    if (result.parse_error && build_error.is_null()) {
      build_error["message"] = result.parse_error->message;
      build_error["location"] =
          location(source, result.parse_error->line, result.parse_error->line);
    }
    for (const auto& f : result.findings) {
      const RuleInfo& rule = rule_info(f.rule);
      nlohmann::ordered_json w;
      w["ruleName"] = rule.buildkit.empty() ? rule.id : rule.buildkit;
      w["description"] = rule.description;
      if (!rule.url.empty()) {
        w["url"] = rule.url;
      }
      w["detail"] = f.message;
      // BuildKit's range is the instruction's lines, or the one line it points at when that is
      // not where the instruction starts.
      int anchor = f.anchor > 0 ? f.anchor : f.line;
      int end = anchor == f.line && f.end_line > f.line ? f.end_line : f.line;
      w["location"] = location(source, f.line, end);
      warnings.push_back(std::move(w));
    }
  }
  nlohmann::ordered_json doc;
  // Go writes the nil slice of a clean run as null.
  doc["warnings"] = warnings.empty() ? nlohmann::ordered_json(nullptr) : std::move(warnings);
  doc["sources"] = std::move(sources);
  if (!build_error.is_null()) {
    doc["buildError"] = std::move(build_error);
  }
  return go_html_escape(doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string render_github(const std::vector<LintResult>& results) {
  std::string out;
  auto render = [&](const LintFinding& f) {
    out += workflow_command(f.severity == Severity::error ? "error" : "warning",
                            {{"file", f.file},
                             {"line", std::to_string(f.line)},
                             {"col", std::to_string(f.column)},
                             {"title", f.rule}},
                            f.message);
  };
  for (const auto& result : results) {
    if (result.parse_error) {
      render(*result.parse_error);
    }
    for (const auto& f : result.findings) {
      render(f);
    }
  }
  return out;
}

} // namespace kiln
