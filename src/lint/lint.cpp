#include "lint/lint.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dockerfile/dockerignore.h"
#include "lint/check_directive.h"
#include "lint/rules.h"
#include "util/diagnostic.h"

namespace kiln {
namespace {

constexpr std::string_view k_suppress_marker = "kiln-lint";

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && is_blank(s.back())) {
    s.remove_suffix(1);
  }
  return s;
}

std::string_view without_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') {
    line.remove_suffix(1);
  }
  return line;
}

// The line starting at byte `offset` of `text`, its line end dropped.
std::string_view line_from(std::string_view text, std::size_t offset) {
  std::size_t end = std::min(text.find('\n', offset), text.size());
  return without_cr(text.substr(offset, end - offset));
}

// The line above the one starting at `offset` (which is not the first line).
std::string_view line_above(std::string_view text, std::size_t offset) {
  std::size_t end = offset - 1; // its '\n'
  std::size_t begin = end == 0 ? 0 : text.rfind('\n', end - 1);
  begin = begin == std::string_view::npos || end == 0 ? 0 : begin + 1;
  return without_cr(text.substr(begin, end - begin));
}

// excerpt() of `line` around `column`, handed only the bytes its window can reach: it reads
// every character of the line it is given, and one ENV with 10,000 findings on a 200 KB line
// made that quadratic. The window holds k_excerpt_columns either side at most: as many bytes
// when they are ASCII (a byte is a column or more), four times as many when a UTF-8 sequence
// (up to 4 bytes a column) may be among them.
std::string clipped_excerpt(std::string_view line, int column) {
  constexpr std::size_t k_ascii_reach = k_excerpt_columns + 8;
  auto ascii = [](std::string_view bytes) {
    return std::none_of(bytes.begin(), bytes.end(),
                        [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
  };
  std::size_t caret = std::min(column > 0 ? static_cast<std::size_t>(column - 1) : 0, line.size());
  std::size_t left = std::min(caret, k_ascii_reach);
  if (!ascii(line.substr(caret - left, left))) {
    left = std::min(caret, 4 * k_ascii_reach);
  }
  std::size_t right = std::min(line.size() - caret, k_ascii_reach);
  if (!ascii(line.substr(caret, right))) {
    right = std::min(line.size() - caret, 4 * k_ascii_reach);
  }
  std::size_t begin = caret - left;
  // Start on a character, not inside one.
  for (int i = 0; i < 3 && begin > 0 && begin < caret &&
                  (static_cast<unsigned char>(line[begin]) & 0xC0) == 0x80;
       ++i) {
    ++begin;
  }
  return excerpt(line.substr(begin, caret + right - begin),
                 column > 0 ? column - static_cast<int>(begin) : 0);
}

struct Suppression {
  std::set<std::string> rules;
  bool has_reason = false;
  int column = 0;
};

// `# kiln-lint ignore=a,b reason=some text`; nullopt when the comment is not a suppression.
std::optional<Suppression> parse_suppression(std::string_view line) {
  auto hash = line.find_first_not_of(" \t");
  if (hash == std::string_view::npos || line[hash] != '#') {
    return std::nullopt;
  }
  auto body = trim(line.substr(hash + 1));
  if (body.substr(0, k_suppress_marker.size()) != k_suppress_marker) {
    return std::nullopt;
  }
  body.remove_prefix(k_suppress_marker.size());
  // `kiln-linter` or `kiln-lint:` is some other comment, not a suppression.
  if (!body.empty() && !is_blank(body.front())) {
    return std::nullopt;
  }
  body = trim(body);
  Suppression s;
  s.column = static_cast<int>(hash) + 1;
  constexpr std::string_view k_ignore = "ignore=";
  constexpr std::string_view k_reason = "reason=";
  if (body.substr(0, k_ignore.size()) != k_ignore) {
    return s;
  }
  body.remove_prefix(k_ignore.size());
  auto end = body.find_first_of(" \t");
  auto ids = body.substr(0, end);
  for (std::size_t pos = 0; pos <= ids.size();) {
    auto comma = ids.find(',', pos);
    auto id = ids.substr(pos, comma == std::string_view::npos ? ids.npos : comma - pos);
    // BuildKit's name for a rule suppresses it as its kiln id does, so suppressions carried
    // over from BuildKit's docs read the same.
    if (const RuleInfo* rule = find_rule(id)) {
      s.rules.emplace(rule->id);
    } else if (!id.empty()) {
      s.rules.emplace(id);
    }
    if (comma == std::string_view::npos) {
      break;
    }
    pos = comma + 1;
  }
  auto rest = end == std::string_view::npos ? std::string_view{} : trim(body.substr(end));
  s.has_reason =
      rest.substr(0, k_reason.size()) == k_reason && !trim(rest.substr(k_reason.size())).empty();
  return s;
}

// Length of the well-formed UTF-8 sequence at `i`, 0 when the bytes there are not one.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  auto cont = [&](std::size_t k) { return k < s.size() && (byte(k) & 0xC0) == 0x80; };
  unsigned char c = byte(i);
  if (c >= 0xC2 && c <= 0xDF) {
    return cont(i + 1) ? 2 : 0;
  }
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) {
      return 0;
    }
    unsigned char c1 = byte(i + 1);
    bool overlong = c == 0xE0 && c1 < 0xA0;
    bool surrogate = c == 0xED && c1 >= 0xA0;
    return overlong || surrogate ? 0 : 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) {
      return 0;
    }
    unsigned char c1 = byte(i + 1);
    bool overlong = c == 0xF0 && c1 < 0x90;
    bool too_big = c == 0xF4 && c1 >= 0x90;
    return overlong || too_big ? 0 : 4;
  }
  return 0;
}

// A JSON string as nlohmann's dump writes it (short escapes, other control characters as
// \u00xx, everything else verbatim), except that bytes which are not UTF-8 become U+FFFD
// where nlohmann would throw: a file name or a quoted Dockerfile word can hold any bytes.
void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  std::size_t run = 0; // start of the bytes not yet copied
  auto flush = [&](std::size_t i) { out.append(s.data() + run, i - run); };
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      if (auto n = utf8_length(s, i); n != 0) {
        i += n;
        continue;
      }
      flush(i);
      out += "\\ufffd";
      run = ++i;
      continue;
    }
    flush(i);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
    }
    run = ++i;
  }
  flush(s.size());
  out += '"';
}

std::vector<LintFinding> all_findings(const std::vector<LintResult>& results) {
  std::vector<LintFinding> out;
  for (const auto& result : results) {
    if (result.parse_error) {
      out.push_back(*result.parse_error);
    }
    out.insert(out.end(), result.findings.begin(), result.findings.end());
  }
  return out;
}

} // namespace

LintResult lint_dockerfile(const std::string& file_name, std::string_view text,
                           const LintOptions& options) {
  auto parsed = parse_dockerfile(text);
  if (!parsed) {
    LintResult result;
    result.parse_error =
        LintFinding{file_name, parsed.error().pos.line, std::max(parsed.error().pos.column, 1),
                    "parse-error", parsed.error().message};
    return result;
  }
  return lint_parsed(file_name, text, *parsed, options);
}

namespace {

// The `# check=` comment among the comments directly above `ins` (after the instruction
// before it, and after the last empty `#` line, which BuildKit takes to end a comment block):
// the topmost, as BuildKit takes the first.
std::optional<CheckConfig> instruction_check(std::string_view text, const Instruction& ins,
                                             int previous_end) {
  std::optional<std::string_view> value;
  std::size_t offset = ins.line_offset;
  for (int line = ins.start.line - 1; line > previous_end && offset > 0; --line) {
    std::size_t end = offset - 1; // the line end above `offset`
    std::size_t nl = end == 0 ? std::string_view::npos : text.rfind('\n', end - 1);
    offset = nl == std::string_view::npos ? 0 : nl + 1;
    auto above = line_from(text, offset);
    auto body = trim(above);
    if (body == "#") {
      break;
    }
    if (auto v = check_comment_value(above)) {
      value = v;
    }
  }
  if (!value) {
    return std::nullopt;
  }
  return parse_check_value(*value).config;
}

// glibc's memmem: std::string_view::find steps memchr from one `c` or `k` to the next, and
// both are common letters in a Dockerfile.
bool contains(std::string_view text, std::string_view needle) {
  return memmem(text.data(), text.size(), needle.data(), needle.size()) != nullptr;
}

bool skipped(const CheckConfig& config, const RuleInfo& rule) {
  return config.skip_all || config.skip.count(std::string(rule.id)) != 0;
}

} // namespace

LintResult lint_parsed(const std::string& file_name, std::string_view text, const Dockerfile& df,
                       const LintOptions& options) {
  LintResult result;
  std::vector<std::string_view> start_lines;
  start_lines.reserve(df.instructions.size());
  for (const auto& ins : df.instructions) {
    start_lines.push_back(line_from(text, ins.line_offset));
  }
  auto stages = split_stages(df);
  auto parents = stage_parents(stages);
  LintContext ctx{file_name,         df, text, options, std::move(start_lines), std::move(stages),
                  std::move(parents)};
  std::vector<LintFinding> findings;

  // The file's `# check=` directive: its skips and its error=true are BuildKit's, which fails
  // the build on its warnings then; so does the run preflight.
  CheckConfig file_check;
  if (!df.check.empty()) {
    auto parsed = parse_check_value(df.check);
    if (parsed.config) {
      file_check = *parsed.config;
    } else {
      findings.push_back({file_name, df.check_line, 1, "check-directive",
                          fmt::format("failed to parse check options: {}; BuildKit refuses to "
                                      "build this file",
                                      parsed.error)});
    }
  }
  const bool warnings = options.warnings || file_check.error;

  check_leak_env_name(ctx, findings);
  check_leak_address(ctx, findings);
  check_leak_env_expansion(ctx, findings);
  check_arg_scope(ctx, findings);
  check_cache_arg_missing(ctx, findings);
  check_whole_dir_mount(ctx, findings);
  std::optional<std::string> dockerignore = options.dockerignore;
  if (!dockerignore && options.read_dockerignore) {
    dockerignore = read_dockerignore(file_name, options.context_dir);
  }
  if (dockerignore) {
    check_copy_ignored_file(ctx, *dockerignore, findings);
  }
  if (warnings) {
    check_wget_progress(ctx, findings);
    check_compile_without_budget(ctx, findings);
    check_arg_rekeys_steps(ctx, findings);
    check_pins_in_one_env(ctx, findings);
    check_unpinned_fetch(ctx, findings);
    check_cache_mount_unkeyed(ctx, findings);
    check_stage_names(ctx, findings);
    check_instruction_casing(ctx, findings);
    check_legacy_syntax(ctx, findings);
    check_runtime_config(ctx, findings);
    check_workdir_relative_path(ctx, findings);
    check_secrets_in_arg_env(ctx, findings);
    check_from_args(ctx, findings);
    check_undefined_var(ctx, findings);
    check_expose(ctx, findings);
  }

  // `# check=` comments above single instructions; only a file that says `check` has any (the
  // name is matched ignoring case; these are the casings anyone writes).
  std::map<int, CheckConfig> checks_by_line;
  if (contains(text, "check") || contains(text, "CHECK") || contains(text, "Check")) {
    int previous_end = 0;
    for (const auto& ins : df.instructions) {
      if (auto config = instruction_check(text, ins, previous_end)) {
        checks_by_line[ins.start.line] = std::move(*config);
      }
      previous_end = ins.end.line;
    }
  }

  // Suppressions bind to the instruction starting on the next line; findings carry that line.
  std::map<int, Suppression> by_line;
  // A file that never mentions the marker has no suppression comment to look for.
  bool has_marker = contains(text, k_suppress_marker);
  for (const auto& ins : df.instructions) {
    if (!has_marker) {
      break;
    }
    if (ins.start.line < 2) {
      continue;
    }
    int above = ins.start.line - 1;
    auto s = parse_suppression(line_above(text, ins.line_offset));
    if (!s) {
      continue;
    }
    if (!s->has_reason) {
      findings.push_back({file_name, above, s->column, "suppression-without-reason",
                          "a kiln-lint suppression needs `reason=<why this is safe>`; without "
                          "one it suppresses nothing"});
      continue;
    }
    by_line[ins.start.line] = std::move(*s);
  }
  for (auto& f : findings) {
    const RuleInfo& rule = rule_info(f.rule);
    int anchor = f.anchor > 0 ? f.anchor : f.line;
    // A `# check=` skips BuildKit's rules only, as BuildKit's does: kiln's own are silenced by
    // a kiln-lint suppression, which carries its reason.
    if (!rule.buildkit.empty()) {
      if (skipped(file_check, rule)) {
        continue;
      }
      if (auto it = checks_by_line.find(anchor);
          it != checks_by_line.end() && skipped(it->second, rule)) {
        continue;
      }
    }
    auto it = by_line.find(anchor);
    if (it != by_line.end() && it->second.rules.count(f.rule) != 0) {
      ++result.suppressed;
      continue;
    }
    f.severity = rule.severity == Severity::error || (file_check.error && !rule.buildkit.empty())
                     ? Severity::error
                     : Severity::warning;
    if (f.severity == Severity::warning && !options.warnings) {
      continue; // a kiln rule's warning under error=true: BuildKit fails on its own rules only
    }
    result.findings.push_back(std::move(f));
  }
  std::stable_sort(result.findings.begin(), result.findings.end(),
                   [](const LintFinding& a, const LintFinding& b) {
                     return std::pair{a.line, a.column} < std::pair{b.line, b.column};
                   });
  return result;
}

std::string render_tty(const LintResult& result, std::string_view text) {
  // format_diagnostic rereads the file and labels everything `error:`; the linter has the
  // text in hand and names the rule instead, so it draws the same excerpt itself.
  std::string out;
  if (!result.parse_error && result.findings.empty()) {
    return out;
  }
  // Findings come sorted by line: one walk down the text finds every line they are on.
  int line_no = 1;
  std::size_t offset = text.starts_with("\xEF\xBB\xBF") ? 3 : 0; // columns skip a BOM
  auto render = [&](const LintFinding& f) {
    out += fmt::format("{}:{}:{}: {}: {}\n", printable(f.file), f.line, f.column, f.rule,
                       printable(f.message));
    while (line_no < f.line && offset < text.size()) {
      std::size_t nl = text.find('\n', offset);
      offset = nl == std::string_view::npos ? text.size() : nl + 1;
      ++line_no;
    }
    if (line_no != f.line) {
      return;
    }
    auto line = line_from(text, offset);
    if (!line.empty()) {
      out += clipped_excerpt(line, f.column);
    }
  };
  if (result.parse_error) {
    render(*result.parse_error);
  }
  for (const auto& f : result.findings) {
    render(f);
  }
  return out;
}

std::string render_json_elements(const LintResult& result) {
  std::string out;
  auto render = [&](const LintFinding& f) {
    if (!out.empty()) {
      out += ",\n";
    }
    // nlohmann's dump(2) layout, keys in its sorted order, so the output stays byte for byte
    // what it was when the array was built as a json value.
    out += "  {\n    \"column\": ";
    fmt::format_to(std::back_inserter(out), "{}", f.column);
    out += ",\n    \"file\": ";
    append_json_string(out, f.file);
    out += ",\n    \"line\": ";
    fmt::format_to(std::back_inserter(out), "{}", f.line);
    out += ",\n    \"message\": ";
    append_json_string(out, f.message);
    out += ",\n    \"rule\": ";
    append_json_string(out, f.rule);
    out += "\n  }";
  };
  if (result.parse_error) {
    render(*result.parse_error);
  }
  for (const auto& f : result.findings) {
    render(f);
  }
  return out;
}

namespace {

// The array around render_json_elements' parts, empty parts skipped; `emit` takes each piece.
template <typename Emit> void json_array(const std::vector<std::string>& parts, Emit emit) {
  bool any = false;
  for (const auto& part : parts) {
    if (part.empty()) {
      continue;
    }
    emit(std::string_view(any ? ",\n" : "[\n"));
    emit(std::string_view(part));
    any = true;
  }
  emit(std::string_view(any ? "\n]" : "[]"));
}

} // namespace

void write_json_elements(std::FILE* out, const std::vector<std::string>& parts) {
  // Pieces gathered into large chunks: through stdio's own small buffer every few KB would
  // cost a write call, and joining everything first would copy megabytes for nothing.
  constexpr std::size_t k_chunk = std::size_t{1} << 20;
  std::string chunk;
  chunk.reserve(k_chunk);
  auto flush = [&] {
    std::fwrite(chunk.data(), 1, chunk.size(), out);
    chunk.clear();
  };
  json_array(parts, [&](std::string_view piece) {
    if (chunk.size() + piece.size() > k_chunk) {
      flush();
    }
    if (piece.size() > k_chunk) {
      std::fwrite(piece.data(), 1, piece.size(), out);
    } else {
      chunk += piece;
    }
  });
  flush();
}

std::string render_json(const std::vector<LintResult>& results) {
  std::vector<std::string> parts;
  parts.reserve(results.size());
  for (const auto& result : results) {
    parts.push_back(render_json_elements(result));
  }
  std::string out;
  json_array(parts, [&](std::string_view piece) { out += piece; });
  return out;
}

std::string render_sarif(const std::vector<LintResult>& results) {
  auto rules = nlohmann::json::array();
  for (const auto& rule : lint_rules()) {
    nlohmann::json entry = {{"id", rule.id}, {"shortDescription", {{"text", rule.description}}}};
    if (!rule.url.empty()) {
      entry["helpUri"] = rule.url;
    }
    rules.push_back(std::move(entry));
  }
  auto sarif_results = nlohmann::json::array();
  for (const auto& f : all_findings(results)) {
    nlohmann::json region = {{"startLine", std::max(f.line, 1)},
                             {"startColumn", std::max(f.column, 1)}};
    sarif_results.push_back(
        {{"ruleId", f.rule},
         {"level", f.severity == Severity::error ? "error" : "warning"},
         {"message", {{"text", f.message}}},
         {"locations",
          {{{"physicalLocation",
             {{"artifactLocation", {{"uri", f.file}}}, {"region", region}}}}}}});
  }
  nlohmann::json doc = {{"version", "2.1.0"},
                        {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
                        {"runs",
                         {{{"tool", {{"driver", {{"name", "kiln-lint"}, {"rules", rules}}}}},
                           {"results", sarif_results}}}}};
  // A file name or a quoted Dockerfile word can hold any bytes: those that are not UTF-8 become
  // U+FFFD, as in the JSON format, where the strict default would throw.
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

LintOptions lint_options(const GateSettings& gates) {
  LintOptions options;
  options.extra_names = gates.host_env_names;
  if (gates.cache_mount_targets) {
    options.cache_targets = *gates.cache_mount_targets;
  }
  if (!gates.cache_endpoint_arg.empty()) {
    options.cache_endpoint_arg = gates.cache_endpoint_arg;
  }
  options.per_file_dirs = gates.per_file_only_dirs;
  return options;
}

int lint_exit_code(const std::vector<LintResult>& results) {
  bool any_finding = false;
  for (const auto& result : results) {
    if (result.parse_error) {
      return 2;
    }
    any_finding = any_finding || !result.findings.empty();
  }
  return any_finding ? 1 : 0;
}

} // namespace kiln
