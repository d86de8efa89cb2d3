#include "engine/buildah_engine.h"

#include <charconv>
#include <deque>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/buildah_layers.h"
#include "engine/image_config.h"
#include "util/fs.h"
#include "util/pattern.h"
#include "util/strings.h"

namespace kiln {

namespace {

/// Parse a leading unsigned number, advancing `text` past it.
bool take_number(std::string_view& text, int& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) {
    return false;
  }
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  return true;
}

bool take(std::string_view& text, std::string_view prefix) {
  if (!text.starts_with(prefix)) {
    return false;
  }
  text.remove_prefix(prefix.size());
  return true;
}

bool is_from(std::string_view instruction) {
  return instruction.size() >= 5 &&
         (instruction.substr(0, 5) == "FROM " || instruction.substr(0, 5) == "from ");
}

struct StepHeader {
  int build_stage = 0;
  int build_stages = 0;
  int step = 0;
  int steps = 0;
};

/// "STEP 2/5: " or "[1/2] STEP 2/2: ", leaving `line` at the instruction.
bool take_step_header(std::string_view& line, StepHeader& header) {
  if (take(line, "[")) {
    if (!take_number(line, header.build_stage) || !take(line, "/") ||
        !take_number(line, header.build_stages) || !take(line, "] ")) {
      return false;
    }
  }
  return take(line, "STEP ") && take_number(line, header.step) && take(line, "/") &&
         take_number(line, header.steps) && take(line, ": ");
}

} // namespace

tl::expected<std::string, std::string> BuildahEngine::version() const {
  auto output = capture_output({"buildah", "--version"});
  if (!output) {
    return tl::unexpected(fmt::format("buildah is not usable ({}); install it with "
                                      "`apt-get install buildah`",
                                      output.error()));
  }
  // "buildah version 1.28.2 (image-spec 1.1.0-rc2, runtime-spec 1.0.2-dev)"
  std::string_view text = trim(*output);
  if (take(text, "buildah version ")) {
    return std::string(text.substr(0, text.find(' ')));
  }
  return std::string(text);
}

std::string BuildahEngine::version_key() const {
  std::string buildah = program_identity("buildah");
  return buildah.empty() ? std::string() : "buildah " + buildah;
}

void BuildahEngine::look_ahead() const {
  m_looking_ahead = std::async(std::launch::async, [] { locate_buildah_store(); });
}

std::vector<std::string> BuildahEngine::build_argv(const BuildRequest& request) const {
  std::vector<std::string> argv = {"buildah", "build", "--isolation", m_isolation, "--layers",
                                   // A failed build otherwise leaves its working container,
                                   // and its writes, behind on every failed attempt.
                                   "--force-rm", "--file", request.dockerfile.string(), "--tag",
                                   request.tag};
  if (!request.target.empty()) {
    argv.insert(argv.end(), {"--target", request.target});
  }
  if (!request.platform.empty()) {
    argv.insert(argv.end(), {"--platform", request.platform});
  }
  if (request.no_cache) {
    argv.push_back("--no-cache");
  }
  for (const auto& context : request.contexts) {
    // By id: a tag another run can move between this run's stages never reaches a build.
    argv.insert(argv.end(),
                {"--build-context",
                 fmt::format("{}=container-image://{}", context.name,
                             context.identity.empty() ? context.image : context.identity)});
  }
  if (!request.tools.empty()) {
    argv.insert(argv.end(), {"--build-context", "kiln-tools=" + request.tools.string()});
  }
  for (const auto& [key, value] : request.build_args) {
    argv.insert(argv.end(), {"--build-arg", key + "=" + value});
  }
  for (const auto& [key, value] : request.labels) {
    argv.insert(argv.end(), {"--label", key + "=" + value});
  }
  for (const auto& secret : request.secrets) {
    argv.insert(argv.end(),
                {"--secret", secret.env.empty()
                                 ? fmt::format("id={},src={}", secret.id, secret.file.string())
                                 : fmt::format("id={},env={}", secret.id, secret.env)});
  }
  argv.insert(argv.end(), {"--", request.context.string()});
  return argv;
}

bool BuildahEngine::has_stage_image(const NamedContext& context) const {
  return run_process({{"buildah", "inspect", "--type", "image", "--", context.image}, {}, {}},
                     [](std::string_view) {})
      .ok();
}

namespace {

/// The image id a name in the store stands for; "" when it names none.
std::string image_id_of(const std::string& name) {
  CapturedRun inspected = run_captured(
      {"buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}", "--", name});
  std::string id(trim(inspected.output));
  return inspected.exit.ok() && is_image_id(id) ? id : std::string();
}

const std::string& shown(const NamedContext& context) {
  return context.identity.empty() ? context.image : context.identity;
}

} // namespace

std::string BuildahEngine::stage_image_identity(const NamedContext& context) const {
  return image_id_of(context.image);
}

bool BuildahEngine::holds_stage_image(const NamedContext& context,
                                      const std::string& identity) const {
  return buildah_store_names(context.image, identity) ||
         image_id_of(context.image) == bare_image_id(identity);
}

ImageConfigRead BuildahEngine::stage_image_config(const NamedContext& context) const {
  return buildah_image_config(shown(context));
}

tl::expected<std::vector<LayoutImage>, std::string>
BuildahEngine::stage_images(const NamedContext& context) const {
  std::string id = context.identity.empty() ? image_id_of(context.image) : context.identity;
  if (id.empty()) {
    return tl::unexpected(fmt::format("buildah's store has no image {}", context.image));
  }
  auto image = buildah_store_image(id);
  if (!image) {
    return tl::unexpected(image.error());
  }
  return std::vector<LayoutImage>{std::move(*image)};
}

tl::expected<Descriptor, std::string> BuildahEngine::export_image(const NamedContext& context,
                                                                  LayoutWriter& layout,
                                                                  const std::string& name) const {
  const std::string& id = shown(context);
  CapturedRun pushed = run_captured({"buildah", "push", "--quiet", "--format", "oci", "--", id,
                                     "oci:" + layout.dir().string() + ":" + name});
  if (!pushed.exit.ok()) {
    return tl::unexpected(fmt::format("buildah push of image {} into {} failed: {}", id,
                                      layout.dir().string(), pushed.failure()));
  }
  auto written = layout.named(name);
  if (!written) {
    return written;
  }
  // The config is the image: a push that changed it would publish another image.
  auto manifest = layout.blob(written->digest);
  nlohmann::json doc =
      manifest ? nlohmann::json::parse(*manifest, nullptr, false) : nlohmann::json();
  std::string config = doc.is_object() && doc.contains("config") && doc["config"].is_object()
                           ? doc["config"].value("digest", "")
                           : "";
  if (config != "sha256:" + id) {
    return tl::unexpected(fmt::format("the image buildah wrote for {} has config {}, not the "
                                      "gated image's sha256:{}",
                                      context.name, config.empty() ? "(none)" : config, id));
  }
  return written;
}

tl::expected<void, std::string> BuildahEngine::move_tag(const std::string& identity,
                                                        const std::string& tag) const {
  // A run that rebuilt nothing finds every stable name already right: one read of the store's
  // index instead of a buildah process per stage.
  if (buildah_store_names(tag, identity)) {
    return {};
  }
  CapturedRun tagged = run_captured({"buildah", "tag", "--", identity, tag});
  if (!tagged.exit.ok()) {
    return tl::unexpected(fmt::format("buildah tag {} {}: {}", identity, tag, tagged.failure()));
  }
  return {};
}

tl::expected<void, std::string> BuildahEngine::withdraw_image(const BuildRequest& request,
                                                              const std::string& identity,
                                                              const std::string& stable_tag) const {
  // The names only: the image's parents stay, as the layer cache of the next build. The stable
  // name goes too when an earlier run gave it this very image.
  std::vector<std::string> names = {request.tag};
  if (!identity.empty() && !stable_tag.empty() && image_id_of(stable_tag) == identity) {
    names.push_back(stable_tag);
  }
  for (const auto& name : names) {
    CapturedRun removed = run_captured({"buildah", "rmi", "--", name});
    if (!removed.exit.ok() && removed.output.find("image not known") == std::string::npos) {
      return tl::unexpected("buildah rmi " + name + ": " + removed.failure());
    }
  }
  return {};
}

std::string BuildahEngine::external_image_digest(const std::string& ref,
                                                 const NamedContext& built_by) const {
  (void)built_by; // one store: the image a build pulled is the one under its name
  CapturedRun inspected = run_captured(
      {"buildah", "inspect", "--type", "image", "--format", "{{.FromImageDigest}}", "--", ref});
  std::string digest(trim(inspected.output));
  return inspected.exit.ok() && is_oci_digest(digest) ? digest : std::string();
}

std::optional<ImageEnv> BuildahEngine::external_image_env(const std::string& ref) const {
  if (ImageEnv env = image_env(image_config_from_buildah(ref))) {
    return env;
  }
  // The build would pull it anyway; pulling first lets the gate grade what the build will use.
  CapturedRun pull = run_captured({"buildah", "pull", "--quiet", "--", ref});
  if (!pull.exit.ok()) {
    return tl::unexpected(fmt::format(
        "{} is not in buildah's store and `buildah pull {}` failed: {}", ref, ref, pull.failure()));
  }
  return image_env(image_config_from_buildah(ref));
}

namespace {

/// Recorded forms (tests/fixtures/buildah-1.28.2): "STEP 2/5: COPY ...", in multi-stage builds
/// "[1/2] STEP 2/2: RUN ...", "--> Using cache <id>" after a step the cache served, and the full
/// id of the built image alone on the last line.
class BuildahOutput : public BuildOutput {
public:
  bool feed(std::string_view line) override {
    bool changed = update(line);
    if (changed &&
        (m_progress.step != m_evidence_step || m_progress.build_stage != m_evidence_build_stage)) {
      // Earlier steps' lines differ between attempts (built, then served from the cache) and
      // say nothing about the failure, so the evidence starts over with every step.
      m_evidence.clear();
      m_engine_evidence.clear();
      m_evidence_step = m_progress.step;
      m_evidence_build_stage = m_progress.build_stage;
    }
    if (!echoes_instruction(line)) {
      keep_last(m_evidence, line);
      if (!m_run_step || printed_by_buildah(line)) {
        keep_last(m_engine_evidence, line);
      }
    }
    return changed;
  }

  const BuildProgress& progress() const override { return m_progress; }

  Tail evidence() const override { return Tail(m_evidence.begin(), m_evidence.end()); }

  Tail engine_evidence() const override {
    return Tail(m_engine_evidence.begin(), m_engine_evidence.end());
  }

  std::vector<StepSeen> steps() const override { return m_steps; }

private:
  bool update(std::string_view line) {
    if (is_image_id(line)) {
      m_progress.image_id = std::string(line);
      return true;
    }
    if (take(line, "--> Using cache ")) {
      if (m_kiln_step) {
        return false;
      }
      ++m_progress.steps_cached;
      if (!m_steps.empty()) {
        m_steps.back().cached = true;
      }
      return true;
    }
    StepHeader header;
    if (!take_step_header(line, header)) {
      return false;
    }
    m_progress.build_stage = header.build_stage;
    m_progress.build_stages = header.build_stages;
    m_progress.step = header.step;
    m_progress.steps = header.steps;
    m_progress.instruction = std::string(line);
    std::string_view instruction = line;
    take_step_header(instruction, header);
    m_run_step = instruction.size() > 4 &&
                 (instruction.substr(0, 4) == "RUN " || instruction.substr(0, 4) == "run ");
    // buildah makes each `--label` a LABEL step of its own after the Dockerfile's last; kiln's
    // provenance is not the Dockerfile's work, and a step count must not change with it.
    m_kiln_step = line.starts_with(k_kiln_label_step);
    if (!is_from(line) && !m_kiln_step) {
      ++m_progress.steps_run;
      m_steps.push_back({std::string(line), false});
    }
    return true;
  }

  static void keep_last(std::deque<std::string>& lines, std::string_view line) {
    lines.emplace_back(line);
    if (lines.size() > k_failure_tail_lines) {
      lines.pop_front();
    }
  }

  /// buildah's own lines inside a RUN step, as it prints them (tests/fixtures/buildah-1.28.2):
  /// its error, its logrus lines (`time="..." level=warning msg=...`, or `WARN[0000] ...` on a
  /// terminal), and the runtime's verdict on the step's command.
  static bool printed_by_buildah(std::string_view line) {
    static const Pattern k_own = Pattern::builtin(
        R"(^(Error: |error building at STEP |time="[^"]*" level=|(WARN|ERRO|FATA)\[\d+\] |)"
        R"(subprocess exited with status |error running container: ))");
    return k_own.search(line);
  }

  /// A step header, or the error quoting the step: the Dockerfile's text, not the build's.
  static bool echoes_instruction(std::string_view line) {
    StepHeader header;
    return take_step_header(line, header) || line.starts_with("Error: building at STEP \"");
  }

  static constexpr std::string_view k_kiln_label_step = "LABEL \"dev.kiln.";

  BuildProgress m_progress;
  bool m_kiln_step = false; // the step running is one of kiln's labels
  bool m_run_step = false;  // the step running is a RUN: what it prints is its command's
  std::vector<StepSeen> m_steps;
  std::deque<std::string> m_evidence;
  std::deque<std::string> m_engine_evidence; // of m_evidence, buildah's own lines
  int m_evidence_step = 0;
  int m_evidence_build_stage = 0;
};

} // namespace

std::unique_ptr<BuildOutput> BuildahEngine::read_output() const {
  return std::make_unique<BuildahOutput>();
}

} // namespace kiln
