#include "forensics/junit.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "forensics/stage_error.h"
#include "util/json_field.h"
#include "util/strings.h"

namespace kiln {

namespace {

using Json = nlohmann::json;

/// How a stage reads as a test: what its status makes of it.
enum class Verdict { pass, failure, error, skipped };

Verdict verdict_of(const std::string& status) {
  if (status == "ok") {
    return Verdict::pass;
  }
  if (status == "failed" || status == "refused" || status == "unverified") {
    return Verdict::failure;
  }
  if (status == "interrupted" || status == "crashed" || status == "abandoned") {
    return Verdict::error;
  }
  return Verdict::skipped; // skipped, and pending or running in a record that never ended
}

std::string str(const Json& object, const char* key) {
  return json_field(object, key, std::string());
}

std::string seconds(double value) {
  return fmt::format("{:.3f}", value);
}

void property(std::string& out, std::string_view name, std::string_view value,
              std::string_view indent) {
  fmt::format_to(std::back_inserter(out), "{}<property name=\"{}\" value=\"{}\"/>\n", indent,
                 xml_escape(name, true), xml_escape(value, true));
}

/// Why a stage that never ran did not: the stage that kept it from running, when it names one.
std::string skipped_message(const Json& stage, const std::map<std::string, const Json*>& by_name) {
  std::string status = str(stage, "status");
  std::string outcome = str(stage, "outcome");
  if (status != "skipped") {
    return fmt::format("did not end: the record says {}", status.empty() ? "nothing" : status);
  }
  if (!outcome.starts_with("skipped:")) {
    return "not built: the run stopped before it";
  }
  std::string why = outcome.substr(8);
  if (auto need = by_name.find(why); need != by_name.end()) {
    std::string ended = str(*need->second, "outcome");
    return fmt::format("not built: it needs {}, which ended {}", why,
                       ended.empty() ? str(*need->second, "status") : ended);
  }
  if (why == "no-worker") {
    return "not built: no worker of its pool was left in the run";
  }
  return "not built: " + why;
}

/// A failed stage's story: why, what its failing step printed, what a gate found, its log.
std::string failure_text(const Json& stage, const ReportInput& in,
                         const std::filesystem::path& run_dir) {
  std::string text = str(stage, "failure");
  text += text.empty() ? "" : "\n";
  if (in.analysis) {
    if (auto error = forensics::stage_error(*in.analysis, stage)) {
      text += fmt::format("{} {}: {}\n", error->step_id, error->step_name,
                          error->from_tail ? "printed no error line; its last lines:"
                                           : "printed these error lines:");
      for (const auto& line : error->lines) {
        text += "  " + line + "\n";
      }
    }
  }
  for (const auto& gate : json_array(stage, "gates")) {
    std::string verdict = str(gate, "verdict");
    if (verdict == "refused" || verdict == "unreadable") {
      text += fmt::format("{} gate on {}: {}\n", str(gate, "gate"), str(gate, "subject"), verdict);
      for (const auto& finding : json_array(gate, "findings")) {
        text += "  " + (finding.is_string() ? finding.get<std::string>() : finding.dump()) + "\n";
      }
      if (!str(gate, "reason").empty()) {
        text += "  " + str(gate, "reason") + "\n";
      }
    }
  }
  const Json& attempts = json_array(stage, "attempts");
  if (!attempts.empty() && !str(attempts.back(), "log").empty()) {
    text += "log: " + (run_dir / str(attempts.back(), "log")).string() + "\n";
  } else {
    text += "no attempt started, so it has no log\n";
  }
  return text;
}

struct Suite {
  std::string name;
  std::vector<const Json*> stages;
};

} // namespace

std::string xml_escape(std::string_view text, bool attribute) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    size_t length = utf8_length(text);
    if (length == 0) {
      out += "\xEF\xBF\xBD"; // U+FFFD for a byte that starts no UTF-8 sequence
      text.remove_prefix(1);
      continue;
    }
    std::string_view one = text.substr(0, length);
    text.remove_prefix(length);
    if (length == 3 && one == "\xEF\xBF\xBE") {
      continue; // U+FFFE
    }
    if (length == 3 && one == "\xEF\xBF\xBF") {
      continue; // U+FFFF
    }
    if (length > 1) {
      out += one;
      continue;
    }
    char c = one[0];
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&apos;";
      break;
    case '\r':
      out += "&#13;"; // a parser reads a bare CR as LF
      break;
    case '\n':
      out += attribute ? "&#10;" : "\n";
      break;
    case '\t':
      out += attribute ? "&#9;" : "\t";
      break;
    default:
      // XML 1.0 has no way to write the other C0 controls, not even as references.
      if (static_cast<unsigned char>(c) >= 0x20) {
        out += c;
      }
    }
  }
  return out;
}

std::string render_junit(const ReportInput& in, const std::filesystem::path& run_dir) {
  const Json& manifest = in.manifest;
  const std::string chain = str(json_member(manifest, "chain"), "name");
  const Json& stages = json_array(manifest, "stages");
  std::map<std::string, const Json*> by_name;
  std::vector<Suite> suites;
  for (const auto& stage : stages) {
    by_name[str(stage, "name")] = &stage;
    std::string lane = str(stage, "lane");
    std::string suite = lane.empty() ? chain : lane;
    auto found =
        std::find_if(suites.begin(), suites.end(), [&](const Suite& s) { return s.name == suite; });
    if (found == suites.end()) {
      suites.push_back({suite, {}});
      found = std::prev(suites.end());
    }
    found->stages.push_back(&stage);
  }

  std::string body;
  std::map<Verdict, size_t> total;
  double total_seconds = 0;
  const std::string started = str(manifest, "started");
  const std::string host = str(manifest, "host");
  for (size_t n = 0; n < suites.size(); ++n) {
    const Suite& suite = suites[n];
    std::map<Verdict, size_t> count;
    double suite_seconds = 0;
    std::string cases;
    for (const Json* stage_ptr : suite.stages) {
      const Json& stage = *stage_ptr;
      Verdict verdict = verdict_of(str(stage, "status"));
      ++count[verdict];
      double stage_seconds = json_field(stage, "seconds", 0.0);
      suite_seconds += stage_seconds;
      fmt::format_to(std::back_inserter(cases),
                     "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\">\n",
                     xml_escape(forensics::name_in_lane(stage), true), xml_escape(suite.name, true),
                     seconds(stage_seconds));
      std::string outcome = str(stage, "outcome");
      cases += "      <properties>\n";
      property(cases, "outcome", outcome.empty() ? str(stage, "status") : outcome, "        ");
      property(cases, "attempts", std::to_string(json_array(stage, "attempts").size()), "        ");
      if (!str(stage, "image_id").empty()) {
        property(cases, "image", str(stage, "image_id"), "        ");
      }
      if (!str(stage, "worker").empty()) {
        property(cases, "worker", str(stage, "worker"), "        ");
      }
      if (const Json& cause = json_member(stage, "cause"); cause.is_object()) {
        property(cases, "cause", str(cause, "summary"), "        ");
      }
      if (const Json& smoke = json_member(stage, "smoke"); smoke.is_object()) {
        for (const char* key : {"passed", "failed", "skipped", "min_passed", "max_skipped"}) {
          property(cases, fmt::format("smoke.{}", key), std::to_string(json_field(smoke, key, 0L)),
                   "        ");
        }
        property(cases, "smoke.verdict", str(smoke, "verdict"), "        ");
      }
      cases += "      </properties>\n";
      switch (verdict) {
      case Verdict::pass:
        break;
      case Verdict::failure:
      case Verdict::error:
        fmt::format_to(std::back_inserter(cases),
                       "      <{0} message=\"{1}\" type=\"{2}\">{3}</{0}>\n",
                       verdict == Verdict::failure ? "failure" : "error",
                       xml_escape(str(stage, "failure").empty() ? "stage " + str(stage, "status")
                                                                : str(stage, "failure"),
                                  true),
                       xml_escape(outcome.empty() ? str(stage, "status") : outcome, true),
                       xml_escape(failure_text(stage, in, run_dir)));
        break;
      case Verdict::skipped:
        fmt::format_to(std::back_inserter(cases), "      <skipped message=\"{}\"/>\n",
                       xml_escape(skipped_message(stage, by_name), true));
        break;
      }
      if (outcome == "reused") {
        cases += "      <system-out>reused: every step came from the layer cache</system-out>\n";
      }
      cases += "    </testcase>\n";
    }
    fmt::format_to(std::back_inserter(body),
                   "  <testsuite name=\"{}\" id=\"{}\" tests=\"{}\" failures=\"{}\" "
                   "errors=\"{}\" skipped=\"{}\" time=\"{}\"",
                   xml_escape(suite.name, true), n, suite.stages.size(), count[Verdict::failure],
                   count[Verdict::error], count[Verdict::skipped], seconds(suite_seconds));
    if (!started.empty()) {
      fmt::format_to(std::back_inserter(body), " timestamp=\"{}\"", xml_escape(started, true));
    }
    if (!host.empty()) {
      fmt::format_to(std::back_inserter(body), " hostname=\"{}\"", xml_escape(host, true));
    }
    body += ">\n    <properties>\n";
    property(body, "run_id", str(manifest, "run_id"), "      ");
    property(body, "status", str(manifest, "status"), "      ");
    if (const Json& engine = json_member(manifest, "engine"); engine.is_object()) {
      property(body, "engine", fmt::format("{} {}", str(engine, "name"), str(engine, "version")),
               "      ");
    }
    body += "    </properties>\n" + cases + "  </testsuite>\n";
    for (const auto& [verdict, k] : count) {
      total[verdict] += k;
    }
    total_seconds += suite_seconds;
  }
  return fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" "
                     "time=\"{}\">\n{}</testsuites>\n",
                     xml_escape(chain, true), stages.size(), total[Verdict::failure],
                     total[Verdict::error], seconds(total_seconds), body);
}

} // namespace kiln
