#include "engine/buildkit_engine.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <future>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "disk/sizes.h"
#include "engine/buildkit_output.h"
#include "engine/image_config.h"
#include "util/diagnostic.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/strings.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;

// What version() records for a buildkitd that answers but has no `debug info`.
constexpr std::string_view k_without_info = "older than v0.11 (no debug info)";
// BuildKit's version.Version unless the build stamps one (-ldflags -X ...version.Version=).
constexpr std::string_view k_unstamped = "0.0.0+unknown";
// A reported version is quoted in messages and the record: at most this much of it.
constexpr size_t k_reported_max = 80;

/// What one option of kiln's argv needs from buildctl (the client) or buildkitd (the daemon).
struct Requirement {
  const char* what;
  bool client; // a buildctl flag; otherwise the daemon's frontend or cache backend
  BuildkitVersion since;
  const char* otherwise; // what the user can do instead
};

// From BuildKit's sources: --metadata-file appeared in buildctl v0.9, named contexts
// (`--opt context:<name>=`) in the v0.10 Dockerfile frontend, --oci-layout and `oci-layout://`
// contexts in v0.11, the `image-manifest` cache attribute in v0.12.
const Requirement k_metadata_file = {"--metadata-file (the built image's digest)",
                                     true,
                                     {0, 9, 0},
                                     "install buildctl v0.9 or newer"};
const Requirement k_named_contexts = {"named build contexts (--opt context:<name>=...)",
                                      false,
                                      {0, 10, 0},
                                      "upgrade buildkitd to v0.10 or newer"};
const Requirement k_oci_layout_client = {"--oci-layout (stage handoff without a registry)",
                                         true,
                                         {0, 11, 0},
                                         "install buildctl v0.11 or newer, or name a registry in "
                                         "[chain] registry to hand stages over by push"};
const Requirement k_oci_layout_daemon = {"oci-layout:// contexts (stage handoff without a "
                                         "registry)",
                                         false,
                                         {0, 11, 0},
                                         "upgrade buildkitd to v0.11 or newer, or name a registry "
                                         "in [chain] registry to hand stages over by push"};
const Requirement k_image_manifest = {"the cache attribute image-manifest=",
                                      false,
                                      {0, 12, 0},
                                      "upgrade buildkitd to v0.12 or newer, or remove "
                                      "image-manifest= from the cache spec"};

bool uses_image_manifest(const BuildRequest& request) {
  for (const auto* specs : {&request.cache_from, &request.cache_to}) {
    for (const auto& spec : *specs) {
      if (spec.find("image-manifest=") != std::string::npos) {
        return true;
      }
    }
  }
  return false;
}

} // namespace

std::optional<BuildkitVersion> BuildkitVersion::parse(std::string_view text) {
  if (!text.starts_with("v")) {
    return std::nullopt;
  }
  text.remove_prefix(1);
  BuildkitVersion version;
  int* parts[] = {&version.major, &version.minor, &version.patch};
  for (size_t i = 0; i < 3; ++i) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *parts[i]);
    if (ec != std::errc() || end == text.data()) {
      return std::nullopt;
    }
    text.remove_prefix(static_cast<size_t>(end - text.data()));
    if (i < 2) {
      if (!text.starts_with(".")) {
        return std::nullopt;
      }
      text.remove_prefix(1);
    }
  }
  if (version == BuildkitVersion{}) {
    return std::nullopt;
  }
  return version; // a suffix (-rc1, +dirty) does not change what the release supports
}

BuildkitSide BuildkitSide::from_probe(std::string_view output) {
  std::string line(output.substr(0, output.find('\n')));
  std::replace(line.begin(), line.end(), '\t', ' ');
  std::vector<std::string> words;
  for (const auto& word : split(line, ' ')) {
    if (std::string_view w = trim(word); !w.empty()) {
      words.emplace_back(w);
    }
  }
  BuildkitSide side;
  // A Go package path has a slash, a version never does; the first word is the program's.
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i].find('/') == std::string::npos) {
      side.reported = printable(words[i].substr(0, k_reported_max));
      break;
    }
  }
  side.release = BuildkitVersion::parse(side.reported);
  return side;
}

BuildkitSide BuildkitSide::without_info() {
  BuildkitSide side;
  side.before = BuildkitVersion{0, 11, 0};
  return side;
}

std::string BuildkitSide::shown() const {
  if (before && !release) {
    return std::string(k_without_info);
  }
  return reported.empty() ? "unknown" : reported;
}

std::string BuildkitVersions::text() const {
  return fmt::format("buildkitd {}, buildctl {}", daemon.shown(), client.shown());
}

BuildkitVersions BuildkitVersions::parse(std::string_view text) {
  constexpr std::string_view k_daemon = "buildkitd ";
  constexpr std::string_view k_client = ", buildctl ";
  BuildkitVersions versions;
  size_t client_at = text.rfind(k_client);
  if (!text.starts_with(k_daemon) || client_at == std::string_view::npos) {
    return versions; // nothing known of either side
  }
  auto side = [](std::string_view shown) {
    if (shown == k_without_info) {
      return BuildkitSide::without_info();
    }
    BuildkitSide known;
    known.reported = shown == "unknown" ? "" : std::string(shown);
    known.release = BuildkitVersion::parse(known.reported);
    return known;
  };
  versions.daemon = side(text.substr(k_daemon.size(), client_at - k_daemon.size()));
  versions.client = side(text.substr(client_at + k_client.size()));
  return versions;
}

std::string BuildkitAddress::shown() const {
  return address.empty() ? "unix:///run/buildkit/buildkitd.sock (buildctl's default)"
                         : fmt::format("{} (from {})", address, source);
}

BuildkitAddress resolve_buildkit_address(const std::string& chain_host) {
  if (const char* env = std::getenv("BUILDKIT_HOST"); env != nullptr && *env != '\0') {
    return {env, "BUILDKIT_HOST"};
  }
  if (!chain_host.empty()) {
    return {chain_host, "[engine.buildkit] host"};
  }
  return {"", "buildctl's default"};
}

std::vector<std::string> BuildkitAddress::flags() const {
  std::vector<std::string> flags;
  if (address.empty()) {
    return flags;
  }
  flags = {"--addr", address};
  for (const auto& [flag, file] :
       {std::pair{"--tlscacert", &tls_ca}, std::pair{"--tlscert", &tls_cert},
        std::pair{"--tlskey", &tls_key}}) {
    if (!file->empty()) {
      flags.insert(flags.end(), {flag, file->string()});
    }
  }
  return flags;
}

std::vector<std::string> BuildkitEngine::command(std::initializer_list<std::string> args) const {
  std::vector<std::string> argv = {"buildctl"};
  std::vector<std::string> connect = m_address.flags();
  argv.insert(argv.end(), connect.begin(), connect.end());
  argv.insert(argv.end(), args);
  return argv;
}

tl::expected<std::string, std::string> BuildkitEngine::version() const {
  // Both at once, since neither needs the other: each is a Go program's start (about 15 ms of
  // CPU), `debug info` a round trip to the daemon besides, and a remote daemon's is the longer.
  auto client_probe = std::async(std::launch::async, [] {
    return capture_output({"buildctl", "--version"});
  });
  // Bounded: a daemon frozen at the start must not hold the run there.
  CapturedRun info = run_captured(command({"debug", "info"}), k_daemon_answer_limit);
  auto client = client_probe.get();
  if (!client) {
    return tl::unexpected(fmt::format("buildctl is not usable ({}); install BuildKit's buildctl "
                                      "(v0.11 or newer) on PATH",
                                      client.error()));
  }
  BuildkitVersions versions;
  versions.client = BuildkitSide::from_probe(*client);
  if (info.exit.ok()) {
    versions.daemon = BuildkitSide::from_probe(info.output);
  } else {
    std::string said = info.failure();
    // v0.10 and older have no Info call: reachable, but older than v0.11.
    if (said.find("Unimplemented") == std::string::npos &&
        said.find("unknown method") == std::string::npos) {
      // A lane's or a worker's address comes from its table, not from BUILDKIT_HOST.
      return tl::unexpected(
          fmt::format("buildkitd is unreachable at {}: {}; start buildkitd there, or {}",
                      m_address.shown(), said,
                      m_address.source.starts_with("[[")
                          ? "correct its host in the chain file"
                          : "point BUILDKIT_HOST or [engine.buildkit] host at a running one"));
    }
    versions.daemon = BuildkitSide::without_info();
  }
  return versions.text();
}

std::optional<std::vector<std::string>> parse_buildkit_workers(std::string_view text) {
  std::vector<std::string> platforms;
  bool header = false;
  LineSplitter lines([&](std::string_view line) {
    std::string_view row = trim(line);
    if (row.empty()) {
      return;
    }
    if (!header) {
      // v0.11.6 cmd/buildctl/debug/workers.go: "ID\tPLATFORMS" through a tabwriter.
      header = row.starts_with("ID") && trim(row.substr(2)) == "PLATFORMS";
      return;
    }
    size_t gap = row.find_first_of(" \t");
    if (gap == std::string_view::npos) {
      return; // a worker that lists no platform
    }
    for (std::string_view platform : split(trim(row.substr(gap)), ',')) {
      std::string one(trim(platform));
      if (!one.empty() && std::find(platforms.begin(), platforms.end(), one) == platforms.end()) {
        platforms.push_back(std::move(one));
      }
    }
  });
  lines.feed(text);
  lines.finish();
  if (!header) {
    return std::nullopt;
  }
  return platforms;
}

std::optional<std::string> BuildkitEngine::unresponsive(std::chrono::milliseconds limit) const {
  CapturedRun info = run_captured(command({"debug", "info"}), limit);
  if (info.exit.timed_out) {
    return fmt::format("buildkitd at {} did not answer buildctl debug info within {}s",
                       m_address.shown(),
                       std::chrono::duration_cast<std::chrono::seconds>(limit).count());
  }
  if (!info.exit.ok()) {
    return fmt::format("buildkitd at {} does not answer: {}", m_address.shown(), info.failure());
  }
  return std::nullopt;
}

std::vector<BuildkitGcRule> parse_buildkit_gc_rules(std::string_view text) {
  std::vector<BuildkitGcRule> rules;
  bool in_rule = false;
  LineSplitter lines([&](std::string_view line) {
    if (line.starts_with("GC Policy rule#")) {
      rules.emplace_back();
      in_rule = true;
      return;
    }
    // v0.11.6 cmd/buildctl/debug/workers.go: a rule's fields are indented by one tab; any other
    // line (the next worker's `ID:`) ends the rule.
    if (!line.starts_with('\t')) {
      in_rule = false;
      return;
    }
    if (!in_rule) {
      return; // a label under `Labels:`
    }
    std::string_view field = trim(line);
    size_t colon = field.find(':');
    if (colon == std::string_view::npos) {
      return;
    }
    std::string_view key = field.substr(0, colon);
    std::string_view value = trim(field.substr(colon + 1));
    BuildkitGcRule& rule = rules.back();
    if (key == "All") {
      rule.all = value == "true";
    } else if (key == "Filters") {
      for (std::string_view filter : split(value, ',')) {
        for (std::string_view one : split(filter, ' ')) {
          if (!trim(one).empty()) {
            rule.filters.emplace_back(trim(one));
          }
        }
      }
    } else if (key == "Keep Duration") {
      rule.has_duration = true;
    } else if (key == "Keep Bytes") {
      rule.keep_bytes = parse_human_size(value);
    }
  });
  lines.feed(text);
  lines.finish();
  return rules;
}

std::optional<uint64_t> layer_keep_bytes(const std::vector<BuildkitGcRule>& rules) {
  std::optional<uint64_t> keep;
  for (const BuildkitGcRule& rule : rules) {
    // Filters are read split at commas and blanks, and a comma inside one filter is an AND:
    // only a rule over nothing but layers is sure to prune them.
    bool layers = rule.filters.empty() ||
                  (rule.filters.size() == 1 && rule.filters.front() == "type==regular");
    if (layers && !rule.has_duration && rule.keep_bytes) {
      keep = std::min(keep.value_or(*rule.keep_bytes), *rule.keep_bytes);
    }
  }
  return keep;
}

tl::expected<std::optional<uint64_t>, std::string> BuildkitEngine::layer_cache_keep() const {
  CapturedRun workers = run_captured(command({"debug", "workers", "-v"}), k_daemon_answer_limit);
  if (!workers.exit.ok()) {
    return tl::unexpected(fmt::format("buildctl debug workers -v at {} failed: {}",
                                      m_address.shown(), workers.failure()));
  }
  return layer_keep_bytes(parse_buildkit_gc_rules(workers.output));
}

tl::expected<std::vector<std::string>, std::string> BuildkitEngine::platforms() const {
  CapturedRun workers = run_captured(command({"debug", "workers"}), k_daemon_answer_limit);
  if (!workers.exit.ok()) {
    return tl::unexpected(fmt::format("buildctl debug workers at {} failed: {}", m_address.shown(),
                                      workers.failure()));
  }
  auto listed = parse_buildkit_workers(workers.output);
  if (!listed) {
    return tl::unexpected(
        fmt::format("buildctl debug workers at {} printed no worker table", m_address.shown()));
  }
  return *listed;
}

std::string BuildkitEngine::version_key() const {
  constexpr std::string_view k_unix = "unix://";
  std::string_view address = m_address.address;
  if (address.empty()) {
    address = "unix:///run/buildkit/buildkitd.sock"; // buildctl's default
  }
  if (!address.starts_with(k_unix)) {
    return {};
  }
  std::string socket(address.substr(k_unix.size()));
  std::string buildctl = program_identity("buildctl");
  if (buildctl.empty() || !unix_socket_listening(socket)) {
    return {};
  }
  std::string daemon = file_identity(socket);
  return daemon.empty() ? std::string()
                        : fmt::format("buildctl {}; buildkitd {} {}", buildctl, socket, daemon);
}

std::vector<std::string> BuildkitEngine::unsupported(const std::vector<BuildRequest>& requests,
                                                     const std::string& version) const {
  return check_versions(requests, BuildkitVersions::parse(version)).problems;
}

std::vector<std::string> BuildkitEngine::version_warnings(const std::vector<BuildRequest>& requests,
                                                          const std::string& version) const {
  return check_versions(requests, BuildkitVersions::parse(version)).warnings;
}

BuildkitVersionCheck BuildkitEngine::check_versions(const std::vector<BuildRequest>& requests,
                                                    const BuildkitVersions& versions) const {
  BuildkitVersionCheck check;
  std::vector<const Requirement*> seen;
  // What each side could not be checked for, in the order the requests first needed it.
  std::vector<const Requirement*> unchecked[2];
  auto need = [&](const Requirement& requirement, const BuildRequest& request) {
    if (std::find(seen.begin(), seen.end(), &requirement) != seen.end()) {
      return;
    }
    seen.push_back(&requirement);
    const BuildkitSide& side = requirement.client ? versions.client : versions.daemon;
    std::string have;
    if (side.release) {
      if (*side.release >= requirement.since) {
        return;
      }
      have = side.reported;
    } else if (side.before && *side.before <= requirement.since) {
      have = std::string(k_without_info);
    } else {
      // A version that names no release (a build from source says 0.0.0+unknown): refusing
      // it would refuse a BuildKit that may well be new enough. A flag it lacks is explained
      // when the build fails (explain_failure).
      unchecked[requirement.client ? 1 : 0].push_back(&requirement);
      return;
    }
    check.problems.push_back(fmt::format(
        "stage '{}' uses {}, which needs BuildKit v{}.{} or newer, but {} at {} is {}; {}",
        request.stage, requirement.what, requirement.since.major, requirement.since.minor,
        requirement.client ? "buildctl" : "buildkitd",
        requirement.client ? std::string("PATH") : m_address.shown(), have, requirement.otherwise));
  };
  for (const auto& request : requests) {
    need(k_metadata_file, request);
    if (!request.contexts.empty() || !request.tools.empty()) {
      need(k_named_contexts, request);
    }
    for (const auto& context : request.contexts) {
      if (context.pushed.empty()) {
        need(k_oci_layout_client, request);
        need(k_oci_layout_daemon, request);
      }
    }
    if (uses_image_manifest(request)) {
      need(k_image_manifest, request);
    }
  }
  for (bool client : {false, true}) {
    const auto& needs = unchecked[client ? 1 : 0];
    if (needs.empty()) {
      continue;
    }
    const BuildkitSide& side = client ? versions.client : versions.daemon;
    std::vector<std::string> named;
    for (const Requirement* requirement : needs) {
      named.push_back(fmt::format("{} from v{}.{}", requirement->what, requirement->since.major,
                                  requirement->since.minor));
    }
    std::string is;
    if (side.before) {
      is = fmt::format("is {}", k_without_info);
    } else if (side.reported.empty()) {
      is = "reports no version";
    } else {
      is = fmt::format("reports version {}, which names no BuildKit release{}", side.reported,
                       side.reported == k_unstamped ? " (what a build without a version stamp "
                                                      "reports)"
                                                    : "");
    }
    check.warnings.push_back(fmt::format(
        "{} at {} {}; kiln cannot check what this run needs from it: {}; going on: {}",
        client ? "buildctl" : "buildkitd", client ? std::string("PATH") : m_address.shown(), is,
        join(named, ", "),
        client ? "should buildctl reject a flag, the stage's failure names it and the version "
                 "it needs"
               : "should buildkitd lack one, the stage fails with BuildKit's own reason"));
  }
  return check;
}

std::vector<std::string> BuildkitEngine::build_argv(const BuildRequest& request) const {
  std::vector<std::string> argv = {"buildctl"};
  auto add = [&](std::initializer_list<std::string> words) { argv.insert(argv.end(), words); };
  // A lane's daemon, else the engine's.
  std::vector<std::string> connect =
      request.host.empty()
          ? m_address.flags()
          : BuildkitAddress{request.host, "", request.tls_ca, request.tls_cert, request.tls_key}
                .flags();
  argv.insert(argv.end(), connect.begin(), connect.end());
  add({"build", "--frontend", "dockerfile.v0"});
  add({"--local", "context=" + request.context.string()});
  add({"--local", "dockerfile=" + request.dockerfile.parent_path().string()});
  add({"--opt", "filename=" + request.dockerfile.filename().string()});
  if (!request.target.empty()) {
    add({"--opt", "target=" + request.target});
  }
  if (!request.platform.empty()) {
    add({"--opt", "platform=" + request.platform});
  }
  if (request.no_cache) {
    add({"--no-cache"});
  }
  for (const auto& [key, value] : request.build_args) {
    add({"--opt", fmt::format("build-arg:{}={}", key, value)});
  }
  for (const auto& [key, value] : request.labels) {
    add({"--opt", fmt::format("label:{}={}", key, value)});
  }
  for (const auto& context : request.contexts) {
    std::string digest =
        context.identity.empty() ? metadata_digest(context.metadata) : context.identity;
    if (digest.empty()) {
      // Only a dry run gets here: a run refuses a need with no build on record.
      digest = fmt::format("<digest of {}: no build on record>", context.name);
    }
    if (!context.pushed.empty()) {
      add({"--opt",
           fmt::format("context:{}=docker-image://{}@{}", context.name, context.pushed, digest)});
    } else {
      add({"--oci-layout", fmt::format("{}={}", context.name, context.layout.string())});
      add({"--opt",
           fmt::format("context:{}=oci-layout://{}@{}", context.name, context.name, digest)});
    }
  }
  if (!request.tools.empty()) {
    add({"--local", "kiln-tools=" + request.tools.string()});
    add({"--opt", "context:kiln-tools=local:kiln-tools"});
  }
  for (const auto& secret : request.secrets) {
    add({"--secret", secret.env.empty()
                         ? fmt::format("id={},src={}", secret.id, secret.file.string())
                         : fmt::format("id={},env={}", secret.id, secret.env)});
  }
  add({"--progress=plain"});
  // Imports, then exports; the local tier first in each, so it is the one that always stays.
  if (!request.cache_slug.empty() && cache_slug_ready(request.cache_slug)) {
    add({"--import-cache", "type=local,src=" + request.cache_slug.string()});
  }
  for (const auto& spec : request.cache_from) {
    if (!(request.drop_registry_cache && registry_facing(spec))) {
      add({"--import-cache", spec});
    }
  }
  if (!request.cache_slug.empty() && request.export_local) {
    add({"--export-cache",
         fmt::format("type=local,dest={},mode=max", request.cache_slug.string())});
  }
  for (const auto& spec : request.cache_to) {
    if (!(request.drop_registry_cache && registry_facing(spec))) {
      add({"--export-cache", spec});
    }
  }
  if (!request.pushed.empty()) {
    // By digest, no tag: a tag in the registry moves only when the publish transaction says.
    add({"--output",
         fmt::format("type=image,name={},push=true,push-by-digest=true", request.pushed)});
  } else {
    add({"--output", fmt::format("type=oci,dest={},tar=false", request.layout.string())});
  }
  add({"--metadata-file", request.metadata.string()});
  return argv;
}

bool BuildkitEngine::has_stage_image(const NamedContext& context) const {
  std::string digest = metadata_digest(context.metadata);
  if (digest.empty()) {
    return false;
  }
  if (!context.pushed.empty()) {
    return true; // the registry holds it; the build resolves it by digest
  }
  auto index = read_file(context.layout / "index.json", k_image_json_limit);
  return index && index->find(digest) != std::string::npos;
}

std::string BuildkitEngine::stage_image_identity(const NamedContext& context) const {
  return metadata_digest(context.metadata);
}

tl::expected<ImageLayout, std::string>
BuildkitEngine::stage_layout(const NamedContext& context) const {
  std::string digest =
      context.identity.empty() ? metadata_digest(context.metadata) : context.identity;
  if (digest.empty()) {
    return tl::unexpected(fmt::format("no build of stage '{}' is on record ({} names no digest)",
                                      context.name, context.metadata.string()));
  }
  if (!context.pushed.empty()) {
    return tl::unexpected(fmt::format(
        "stage '{}' was handed over through the registry ({}@{}) and kiln reads images from "
        "OCI layouts only; rebuild it in this run, where its Dockerfile is linted first",
        context.name, context.pushed, digest));
  }
  return ImageLayout{context.layout, digest};
}

ImageConfigRead BuildkitEngine::stage_image_config(const NamedContext& context) const {
  return stage_layout(context).and_then([](const ImageLayout& layout) {
    return image_config_from_layout(layout.path, layout.digest);
  });
}

tl::expected<std::vector<LayoutImage>, std::string>
BuildkitEngine::stage_images(const NamedContext& context) const {
  return stage_layout(context).and_then(
      [](const ImageLayout& layout) { return layout_images(layout.path, layout.digest); });
}

tl::expected<Descriptor, std::string> BuildkitEngine::export_image(const NamedContext& context,
                                                                   LayoutWriter& layout,
                                                                   const std::string& name) const {
  (void)name; // the layout's index names what it publishes, not each image
  auto source = stage_layout(context);
  if (!source) {
    return tl::unexpected(source.error());
  }
  return layout.take_manifest(source->path, source->digest);
}

std::string BuildkitEngine::external_image_digest(const std::string& ref,
                                                  const NamedContext& built_by) const {
  auto text = read_file(built_by.metadata, k_image_json_limit);
  nlohmann::json doc = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  if (!doc.is_object() || !doc.contains("containerimage.buildinfo")) {
    return {};
  }
  nlohmann::json info = doc["containerimage.buildinfo"];
  if (info.is_string()) { // base64 of the JSON, as buildctl writes it
    auto decoded = base64_decode(info.get<std::string>());
    info = decoded ? nlohmann::json::parse(*decoded, nullptr, false) : nlohmann::json();
  }
  if (!info.is_object() || !info.contains("sources") || !info["sources"].is_array()) {
    return {};
  }
  // BuildKit names a source by its normalised reference (docker.io/library/debian:12).
  for (const auto& source : info["sources"]) {
    if (!source.is_object() || !source.contains("ref") || !source["ref"].is_string() ||
        !source.contains("pin") || !source["pin"].is_string()) {
      continue;
    }
    std::string named = source["ref"].get<std::string>();
    if (named == ref || named.ends_with("/" + ref) || named.ends_with("/library/" + ref)) {
      std::string pin = source["pin"].get<std::string>();
      return is_oci_digest(pin) ? pin : std::string();
    }
  }
  return {};
}

std::unique_ptr<BuildOutput> BuildkitEngine::read_output() const {
  return std::make_unique<BuildkitOutput>();
}

std::string BuildkitEngine::built_image(const BuildRequest& request,
                                        const BuildProgress& progress) const {
  (void)progress; // BuildKit's plain progress names no image id; the metadata file does
  return metadata_digest(request.metadata);
}

std::string BuildkitEngine::explain_failure(const Tail& evidence) const {
  // urfave/cli, which buildctl uses, says "flag provided but not defined: -oci-layout".
  constexpr std::string_view k_unknown_flag = "flag provided but not defined: -";
  for (const auto& line : evidence) {
    size_t at = line.find(k_unknown_flag);
    if (at == std::string::npos) {
      continue;
    }
    std::string flag(trim(std::string_view(line).substr(at + k_unknown_flag.size())));
    if (!flag.empty() && flag[0] == '-') {
      flag.erase(0, 1);
    }
    return fmt::format("buildctl does not know --{}: it is older than that option (kiln's stage "
                       "handoff needs buildctl v0.11 or newer); install a newer buildctl",
                       flag);
  }
  return {};
}

std::string metadata_digest(const fs::path& metadata) {
  auto text = read_file(metadata, k_image_json_limit);
  if (!text) {
    return {};
  }
  auto json = nlohmann::json::parse(*text, nullptr, false);
  if (!json.is_object() || !json.contains("containerimage.digest") ||
      !json["containerimage.digest"].is_string()) {
    return {};
  }
  // It names a file under the layout's blobs/, and is looked for in its index.json.
  std::string digest = json["containerimage.digest"].get<std::string>();
  return is_oci_digest(digest) ? digest : std::string();
}

bool cache_slug_ready(const fs::path& slug) {
  std::error_code error;
  auto size = fs::file_size(slug / "index.json", error);
  return !error && size > 0;
}

bool registry_facing(std::string_view spec) {
  for (const auto& field : split(spec, ',')) {
    if (trim(field) == "type=local") {
      return false;
    }
  }
  return true;
}

tl::expected<void, std::string>
BuildkitEngine::withdraw_image(const BuildRequest& request, const std::string& identity,
                               const std::string& stable_tag) const {
  (void)identity;   // the layout is this records folder's alone: nothing else names it
  (void)stable_tag; // nothing local carries a stable name

  std::error_code error;
  std::filesystem::remove(request.metadata, error);
  if (error) {
    return tl::unexpected("cannot remove " + request.metadata.string() + ": " + error.message());
  }
  return {};
}

} // namespace kiln
