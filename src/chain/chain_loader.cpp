// load_chain: reads the chain file, runs the table readers and the checks in order and sorts
// what they found. Also the readers of single values (counts, seconds, sizes, paths, string
// arrays) and the value checks every part of the loader shares.
#include "chain/chain_loader.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "chain/loader.h"
#include "util/fs.h"
#include "util/image_ref.h"
#include "util/strings.h"

namespace kiln {

namespace chain_loading {

namespace {

bool is_lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/// What a target, a platform part or a secret id may hold: letters, digits, '_', '.' and '-'.
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

} // namespace

// Chain and stage names end up in image tags and build-context names, which are lower case.
bool is_lower_name(std::string_view name, bool digit_first) {
  if (name.empty() ||
      !(digit_first ? is_lower_alnum(name[0]) : (name[0] >= 'a' && name[0] <= 'z'))) {
    return false;
  }
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return is_lower_alnum(c) || c == '_' || c == '.' || c == '-'; });
}

bool is_stage_target(std::string_view target) {
  return !target.empty() && std::isalnum(static_cast<unsigned char>(target[0])) &&
         std::all_of(target.begin(), target.end(), is_name_char);
}

tl::expected<std::string, std::string> normalize_platform(std::string_view platform) {
  std::vector<std::string> parts = split(lower(platform), '/');
  if ((parts.size() != 2 && parts.size() != 3) ||
      std::any_of(parts.begin(), parts.end(), [](const std::string& part) {
        return part.empty() || part[0] == '-' ||
               !std::all_of(part.begin(), part.end(), is_name_char);
      })) {
    return tl::unexpected(std::string("is not a platform"));
  }
  // Go's GOOS and GOARCH: what an image's config can name.
  static const std::set<std::string> k_os = {
      "aix",   "android", "darwin",  "dragonfly", "freebsd", "illumos", "ios",    "js",
      "linux", "netbsd",  "openbsd", "plan9",     "solaris", "wasip1",  "windows"};
  static const std::set<std::string> k_arch = {
      "386",    "amd64",    "arm",   "arm64",   "loong64", "mips",  "mipsle",
      "mips64", "mips64le", "ppc64", "ppc64le", "riscv64", "s390x", "wasm"};
  std::string os = parts[0] == "macos" ? "darwin" : parts[0];
  std::string arch = parts[1];
  std::string variant = parts.size() == 3 ? parts[2] : "";
  if (arch == "i386") {
    arch = "386";
  } else if (arch == "x86_64" || arch == "x86-64") {
    arch = "amd64";
  } else if (arch == "aarch64") {
    arch = "arm64";
  } else if (arch == "armhf" && variant.empty()) {
    arch = "arm";
    variant = "v7";
  } else if (arch == "armel" && variant.empty()) {
    arch = "arm";
    variant = "v6";
  }
  if (k_os.count(os) == 0) {
    return tl::unexpected(fmt::format("names the os '{}', which no engine builds for", os));
  }
  if (k_arch.count(arch) == 0) {
    return tl::unexpected(
        fmt::format("names the architecture '{}', which no engine builds for", arch));
  }
  if (!variant.empty() && variant[0] != 'v') {
    variant = "v" + variant;
  }
  // The variants engines select by: x86-64 microarchitecture levels, ARM architecture versions.
  static const std::map<std::string, std::set<std::string>> k_variants = {
      {"amd64", {"v1", "v2", "v3", "v4"}},
      {"arm", {"v5", "v6", "v7", "v8"}},
      {"arm64",
       {"v8", "v8.1", "v8.2", "v8.3", "v8.4", "v8.5", "v8.6", "v8.7", "v8.8", "v8.9", "v9", "v9.1",
        "v9.2", "v9.3", "v9.4", "v9.5"}}};
  if (!variant.empty()) {
    auto known = k_variants.find(arch);
    if (known == k_variants.end() || known->second.count(variant) == 0) {
      return tl::unexpected(
          fmt::format("names the variant '{}', which {} does not have", variant, arch));
    }
  }
  if ((arch == "amd64" && variant == "v1") || (arch == "arm64" && variant == "v8")) {
    variant.clear(); // the baseline: what the platform without a variant means
  }
  return os + "/" + arch + (variant.empty() ? "" : "/" + variant);
}

std::string host_address_problem(std::string_view host) {
  size_t scheme_end = host.find("://");
  if (scheme_end == std::string_view::npos) {
    return "has no scheme";
  }
  if (host.front() == '-') {
    return "starts with '-', which buildctl would read as an option";
  }
  if (std::any_of(host.begin(), host.end(),
                  [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; })) {
    return "holds white space";
  }
  std::string_view scheme = host.substr(0, scheme_end);
  std::string_view rest = host.substr(scheme_end + 3);
  if (rest.empty()) {
    return "names no address after " + std::string(scheme) + "://";
  }
  if (scheme == "unix" && rest.front() != '/') {
    return "names no absolute socket path";
  }
  if (scheme == "tcp") {
    // host:port, the host a name, an IPv4 address or a bracketed IPv6 one.
    size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || (rest.front() == '[' && rest[colon - 1] != ']')) {
      return "has no port";
    }
    std::string_view name = rest.substr(0, colon);
    std::string_view port = rest.substr(colon + 1);
    if (name.empty() || name == "[]") {
      return "has no host before its port";
    }
    int number = 0;
    auto [end, failed] = std::from_chars(port.data(), port.data() + port.size(), number);
    if (port.empty() || failed != std::errc() || end != port.data() + port.size() || number < 1 ||
        number > 65535) {
      return fmt::format("has the port '{}', not one of 1-65535", port);
    }
  }
  return {};
}

bool is_secret_id(std::string_view id) {
  return !id.empty() && std::all_of(id.begin(), id.end(), is_name_char);
}

std::string_view type_name(const toml::node& node) {
  switch (node.type()) {
  case toml::node_type::string:
    return "a string";
  case toml::node_type::integer:
    return "an integer";
  case toml::node_type::floating_point:
    return "a float";
  case toml::node_type::boolean:
    return "a boolean";
  case toml::node_type::table:
    return "a table";
  case toml::node_type::array:
    return "an array";
  case toml::node_type::date:
    return "a date";
  case toml::node_type::time:
    return "a time";
  case toml::node_type::date_time:
    return "a date-time";
  default:
    return "nothing";
  }
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates,
                         std::string_view list_intro) {
  std::string match = closest_match(word, candidates);
  if (!match.empty()) {
    return fmt::format("did you mean '{}'?", match);
  }
  return fmt::format("{}: {}", list_intro, join(candidates, ", "));
}

// toml++ and std::regex describe errors as capitalised sentences; our messages are fragments.
std::string as_fragment(std::string_view text) {
  std::string out(trim(text));
  while (!out.empty() && out.back() == '.') {
    out.pop_back();
  }
  if (!out.empty()) {
    out[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(out[0])));
  }
  return out;
}

SourcePos Loader::first_invalid_byte(SourcePos at) const {
  if (size_t bad = first_invalid_utf8(line_at(m_text, at.line)); bad != std::string_view::npos) {
    at.column = static_cast<int>(bad + 1);
  }
  return at;
}

SourcePos Loader::pattern_pos(const toml::value<std::string>& node, size_t offset) const {
  SourcePos at = pos(node);
  // The caret goes under the offending part when the pattern is written as it reads (a literal
  // '...' string, or a "..." one without escapes); otherwise under the string's start.
  std::string_view rest = line_at(m_text, at.line);
  size_t quote = static_cast<size_t>(std::max(at.column - 1, 0));
  if (quote < rest.size() && (rest[quote] == '\'' || rest[quote] == '"') &&
      rest.substr(quote + 1).starts_with(node.get())) {
    at.column += static_cast<int>(1 + offset);
  }
  return at;
}

void Loader::check_tag(const std::string& tag, SourcePos at) {
  auto parsed = parse_image_ref(tag);
  if (!parsed || !parsed->digest.empty()) {
    error(at,
          fmt::format("image tag '{}' is not a valid image reference: {}", tag,
                      parsed ? "it names a digest, which a build cannot tag" : parsed.error()),
          "write [host[:port]/]repository[:tag], e.g. \"localhost/app-final:1.0\"");
  }
}

fs::path Loader::resolve(const std::string& written) const {
  fs::path path = (m_chain.dir / written).lexically_normal();
  // "dir/." normalises to "dir/"; keep paths comparable and printable without the slash.
  return path.has_filename() ? path : path.parent_path();
}

void Loader::check_keys(const toml::table& table, std::string_view where,
                        const std::vector<std::string>& keys) {
  for (auto&& [key, value] : table) {
    if (std::find(keys.begin(), keys.end(), key.str()) == keys.end()) {
      error(pos(key.source().begin), fmt::format("unknown key '{}' {}", key.str(), where),
            did_you_mean(key.str(), keys, "valid keys"));
    }
  }
}

std::vector<const toml::table*> Loader::tables_in(const toml::table& root, std::string_view key) {
  std::vector<const toml::table*> tables;
  const toml::node* node = root.get(key);
  if (!node) {
    return tables;
  }
  const toml::array* array = node->as_array();
  if (!array) {
    error(pos(*node), fmt::format("'{}' must be an array of tables, not {}", key, type_name(*node)),
          fmt::format("write each one as [[{}]], with double brackets", key));
    return tables;
  }
  for (const auto& element : *array) {
    if (const auto* table = element.as_table()) {
      tables.push_back(table);
    } else {
      error(pos(element), fmt::format("each '{}' must be a table, not {}", key, type_name(element)),
            fmt::format("write each one as [[{}]]", key));
    }
  }
  return tables;
}

std::optional<int> Loader::get_count(const toml::table& table, std::string_view where,
                                     std::string_view key, std::string_view hint) {
  const auto* node = get<int64_t>(table, where, key);
  if (!node) {
    return std::nullopt;
  }
  int64_t value = node->get();
  if (value < 1) {
    error(pos(*node), fmt::format("'{}' {} must be at least 1, not {}", key, where, value),
          std::string(hint));
    return std::nullopt;
  }
  if (value > k_max_count) {
    error(pos(*node),
          fmt::format("'{}' {} is {}, more than the {} allowed", key, where, value, k_max_count));
    return std::nullopt;
  }
  return static_cast<int>(value);
}

std::optional<Milliseconds> Loader::get_seconds(const toml::table& table, std::string_view where,
                                                std::string_view key, double least, double most) {
  const toml::node* node = table.get(key);
  if (!node) {
    return std::nullopt;
  }
  if (!node->is_number()) {
    error(pos(*node),
          fmt::format("'{}' {} must be a number of seconds, not {}", key, where, type_name(*node)));
    return std::nullopt;
  }
  double value = node->is_integer() ? static_cast<double>(node->as_integer()->get())
                                    : node->as_floating_point()->get();
  if (!std::isfinite(value)) {
    error(pos(*node), fmt::format("'{}' {} must be a finite number, not {}", key, where, value));
    return std::nullopt;
  }
  if (value < least) {
    error(pos(*node), least == 0
                          ? fmt::format("'{}' {} must be 0 or more, not {}", key, where, value)
                          : fmt::format("'{}' {} must be at least {} second(s), not {}", key, where,
                                        least, value));
    return std::nullopt;
  }
  if (value > most) {
    error(pos(*node),
          fmt::format("'{}' {} is {} seconds, more than the {} allowed", key, where, value, most),
          most == k_max_seconds ? "a duration longer than 30 days is a mistake; write seconds"
                                : "write seconds");
    return std::nullopt;
  }
  return std::chrono::duration_cast<Milliseconds>(std::chrono::duration<double>(value));
}

std::optional<fs::path> Loader::existing_path(const toml::value<std::string>& node,
                                              std::string_view what, PathKind kind) {
  const std::string& written = node.get();
  fs::path path = resolve(written);
  std::error_code ignored;
  fs::file_status status = fs::status(path, ignored);
  if (!fs::exists(status)) {
    error(pos(node),
          fmt::format("{} '{}' does not exist (resolved to {})", what, written, path.string()),
          "fix the path; a relative path starts from the chain file's folder");
    return std::nullopt;
  }
  if (kind == PathKind::file && !fs::is_regular_file(status)) {
    error(
        pos(node),
        fmt::format("{} '{}' is not a regular file (resolved to {})", what, written, path.string()),
        "name a file, not a directory");
    return std::nullopt;
  }
  if (kind == PathKind::directory && !fs::is_directory(status)) {
    error(pos(node),
          fmt::format("{} '{}' is not a directory (resolved to {})", what, written, path.string()),
          "name the directory the build runs in");
    return std::nullopt;
  }
  return path;
}

std::optional<double> Loader::get_gb(const toml::table& table, std::string_view where,
                                     std::string_view key, bool positive) {
  const toml::node* node = table.get(key);
  if (!node) {
    return std::nullopt;
  }
  double value = node->value<double>().value_or(-1);
  if (!node->is_number() || !std::isfinite(value) || value < 0 || (positive && value == 0)) {
    error(pos(*node),
          fmt::format("'{}' {} must be a number of GB, {}", key, where,
                      positive ? "more than 0" : "0 or more"),
          positive ? "write it like 4 or 2.5" : "write it like 40 or 12.5; 0 turns it off");
    return std::nullopt;
  }
  if (value > k_max_gb) {
    error(pos(*node),
          fmt::format("'{}' {} is {} GB, more than the {} allowed", key, where, value, k_max_gb),
          "sizes are in GB: write 40 for 40 GB");
    return std::nullopt;
  }
  return value;
}

std::vector<std::string> Loader::get_strings(const toml::table& table, std::string_view where,
                                             std::string_view key, std::string_view what) {
  std::vector<std::string> out;
  const auto* array = get<toml::array>(table, where, key);
  if (!array) {
    return out;
  }
  for (const auto& element : *array) {
    if (const auto* text = element.as_string(); text && !text->get().empty()) {
      out.push_back(text->get());
    } else {
      error(pos(element),
            fmt::format("each of '{}' {} must be {}, not {}", key, where, what,
                        text ? "an empty string" : type_name(element)),
            "write it in quotes");
    }
  }
  return out;
}

std::optional<int> Loader::get_floor(const toml::table& table, std::string_view where,
                                     std::string_view key) {
  const auto* node = get<int64_t>(table, where, key);
  if (!node) {
    return std::nullopt;
  }
  if (node->get() < 0 || node->get() > std::numeric_limits<int>::max()) {
    error(pos(*node),
          fmt::format("'{}' {} must be a count of 0 or more, not {}", key, where, node->get()));
    return std::nullopt;
  }
  return static_cast<int>(node->get());
}

tl::expected<Chain, Diagnostics> Loader::load() {
  std::error_code ignored;
  if (fs::is_directory(m_file, ignored)) {
    return tl::unexpected(Diagnostics{
        {{m_name}, "cannot read chain file: it is a directory", "name the chain's .toml file"}});
  }
  auto text = read_chain_input(m_file);
  if (!text) {
    return tl::unexpected(
        Diagnostics{{{m_name}, fmt::format("cannot read chain file: {}", text.error()), ""}});
  }
  m_text = std::move(*text);
  toml::table root;
  try {
    root = toml::parse(m_text, m_name);
  } catch (const toml::parse_error& e) {
    SourcePos at = pos(e.source().begin);
    std::string_view description = e.description();
    if (description.find("utf-8") != std::string_view::npos) {
      // toml++ names the character before the bad byte; the caret belongs under the byte.
      at = first_invalid_byte(at);
    }
    return tl::unexpected(
        Diagnostics{{at, fmt::format("invalid TOML: {}", as_fragment(description)),
                     description.find("utf-8") != std::string_view::npos
                         ? "a chain file is UTF-8 text; re-save it as UTF-8, or name the right file"
                         : ""}});
  }

  m_chain.file = fs::absolute(m_file).lexically_normal();
  m_chain.dir = m_chain.file.parent_path();
  check_keys(root, "at the top level", k_top_keys);
  read_chain(root);
  read_engine(root);
  if (!m_options.engine.empty()) {
    m_chain.engine = m_options.engine;
  }
  read_defaults(root);
  read_cache(root);
  read_disk(root);
  read_resources(root);
  read_gates(root);
  read_smoke(root);
  read_publish(root);
  read_history(root);
  read_trace(root);
  read_records(root);
  for (const auto* table : tables_in(root, "transient")) {
    read_transient(*table);
  }
  if (!root.contains("stage")) {
    error(pos(root), "missing required table [[stage]]",
          "add a [[stage]] table with a name and a dockerfile");
  } else if (const auto* stages = root.get_as<toml::array>("stage"); stages && stages->empty()) {
    error(pos(*stages), "the chain has no stages: 'stage' is an empty array",
          "add a [[stage]] table with a name and a dockerfile");
  }
  for (const auto* table : tables_in(root, "worker")) {
    read_worker(*table);
  }
  for (const auto* table : tables_in(root, "lane")) {
    read_lane(*table);
  }
  for (const auto* table : tables_in(root, "stage")) {
    // Read once per combination of its matrix, substituted in place (see substitute_matrix).
    auto& stage = const_cast<toml::table&>(*table);
    const toml::table written = stage;
    for (const auto& binding : matrix_bindings(stage)) {
      substitute_matrix(stage, written, binding);
      read_stage(stage);
    }
  }
  read_versions();
  load_dockerfiles();
  infer_needs();
  check_needs();
  check_cycles();
  check_cache_tiers();
  check_gates();
  check_lanes();
  check_workers();
  check_publish();

  if (!m_diagnostics.empty()) {
    // Chain-file problems first, each file top to bottom, the way an editor walks them.
    std::stable_sort(
        m_diagnostics.begin(), m_diagnostics.end(), [&](const Diagnostic& a, const Diagnostic& b) {
          return std::tuple(a.pos.file != m_name, a.pos.file, a.pos.line, a.pos.column) <
                 std::tuple(b.pos.file != m_name, b.pos.file, b.pos.line, b.pos.column);
        });
    // The stages of a matrix share their table: a mistake in it is said once.
    m_diagnostics.erase(std::unique(m_diagnostics.begin(), m_diagnostics.end(),
                                    [](const Diagnostic& a, const Diagnostic& b) {
                                      return a.pos == b.pos && a.message == b.message;
                                    }),
                        m_diagnostics.end());
    return tl::unexpected(std::move(m_diagnostics));
  }
  expand_lanes();
  place_in_pools();
  return std::move(m_chain);
}

} // namespace chain_loading

tl::expected<Chain, Diagnostics> load_chain(const std::filesystem::path& file,
                                            const LoadOptions& options) {
  return chain_loading::Loader(file, options).load();
}

} // namespace kiln
