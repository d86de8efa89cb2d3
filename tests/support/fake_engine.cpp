#include "fake_engine.h"

#include <thread>

#include <algorithm>

#include "engine/buildah_engine.h"
#include "layer_tarball.h"
#include "util/sha256.h"

namespace kiln::testing {

namespace {

const char* k_image_id = "3f0c56e7d4a2b8c19e5f7a6d2c4b8e1f0a9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b";

} // namespace

FakeBuild FakeBuild::ok(int steps, bool cached) {
  FakeBuild build;
  build.lines.push_back("STEP 1/" + std::to_string(steps + 1) + ": FROM scratch");
  for (int k = 1; k <= steps; ++k) {
    build.lines.push_back("STEP " + std::to_string(k + 1) + "/" + std::to_string(steps + 1) +
                          ": RUN step " + std::to_string(k));
    if (cached) {
      build.lines.push_back("--> Using cache 1111111111111111111111111111111111111111111111111111"
                            "111111111111");
    }
  }
  build.lines.push_back(k_image_id);
  return build;
}

FakeBuild FakeBuild::failing(const std::string& error, int exit_code) {
  FakeBuild build;
  build.lines = {"STEP 1/2: FROM scratch", "STEP 2/2: RUN step 1", error,
                 "Error: building at STEP \"RUN step 1\": exit status " +
                     std::to_string(exit_code)};
  build.exit_code = exit_code;
  return build;
}

void FakeEngine::script(const std::string& stage, std::vector<FakeBuild> builds) {
  std::lock_guard lock(m_mutex);
  m_scripts[stage] = std::move(builds);
}

void FakeEngine::set_env(const std::string& stage, std::vector<std::string> env) {
  m_env[stage] = std::move(env);
}

std::vector<std::string> FakeEngine::builds() const {
  std::lock_guard lock(m_mutex);
  return m_builds;
}

std::vector<std::string> FakeEngine::withdrawn() const {
  std::lock_guard lock(m_mutex);
  return m_withdrawn;
}

std::vector<std::string> FakeEngine::build_argv(const BuildRequest& request) const {
  return {"fake-build", request.stage, "--tag", request.tag};
}

bool FakeEngine::has_stage_image(const NamedContext& context) const {
  std::lock_guard lock(m_mutex);
  return m_images.count(context.image) > 0;
}

std::string FakeEngine::stage_image_identity(const NamedContext& context) const {
  std::lock_guard lock(m_mutex);
  auto found = m_images.find(context.image);
  return found == m_images.end() ? std::string() : found->second;
}

ImageConfigRead FakeEngine::stage_image_config(const NamedContext& context) const {
  std::lock_guard lock(m_mutex);
  std::string id = context.identity;
  if (id.empty()) {
    auto found = m_images.find(context.image);
    id = found == m_images.end() ? std::string() : found->second;
  }
  auto built = m_configs.find(id);
  ImageConfig config = built == m_configs.end() ? ImageConfig{} : built->second;
  if (auto env = m_env.find(context.name); env != m_env.end()) {
    config.env = env->second;
  }
  return config;
}

void FakeEngine::set_layers(const std::string& stage, std::vector<std::string> layers) {
  std::lock_guard lock(m_mutex);
  m_layers[stage] = std::move(layers);
}

tl::expected<std::vector<LayoutImage>, std::string>
FakeEngine::stage_images(const NamedContext& context) const {
  std::lock_guard lock(m_mutex);
  auto layers = m_layers.find(context.name);
  std::filesystem::path dir =
      m_scratch.path() / (context.identity.empty() ? context.image : context.identity);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  write_layout(dir, {{"linux/amd64",
                      layers == m_layers.end() ? std::vector<std::string>() : layers->second}});
  return layout_images(dir);
}

tl::expected<Descriptor, std::string> FakeEngine::export_image(const NamedContext& context,
                                                               LayoutWriter& layout,
                                                               const std::string& name) const {
  (void)layout;
  (void)name;
  return tl::unexpected("the fake engine publishes nothing: " + context.name);
}

std::unique_ptr<BuildOutput> FakeEngine::read_output() const {
  return BuildahEngine("chroot").read_output();
}

tl::expected<void, std::string> FakeEngine::withdraw_image(const BuildRequest& request,
                                                           const std::string& identity,
                                                           const std::string& stable_tag) const {
  (void)identity;
  (void)stable_tag;
  std::lock_guard lock(m_mutex);
  m_withdrawn.push_back(request.tag);
  m_images.erase(request.tag);
  return {};
}

std::vector<std::string> FakeEngine::events() const {
  std::lock_guard lock(m_mutex);
  return m_events;
}

int FakeEngine::most_at_once() const {
  std::lock_guard lock(m_mutex);
  return m_most_at_once;
}

ProcessExit FakeEngine::build(const BuildRequest& request, const OutputSink& sink,
                              const BuildLimits& limits) const {
  FakeBuild build = FakeBuild::ok();
  {
    std::lock_guard lock(m_mutex);
    m_builds.push_back(request.stage);
    m_events.push_back("start " + request.stage);
    m_most_at_once = std::max(m_most_at_once, ++m_running);
    auto& script = m_scripts[request.stage];
    if (!script.empty()) {
      build = std::move(script.front());
      script.erase(script.begin());
    }
  }
  struct Ended {
    const FakeEngine& engine;
    const std::string& stage;
    ~Ended() {
      std::lock_guard lock(engine.m_mutex);
      engine.m_events.push_back("end " + stage);
      --engine.m_running;
    }
  } ended{*this, request.stage};
  ProcessExit exit;
  const CancelToken& cancel = limits.cancel != nullptr ? *limits.cancel : interrupt_token();
  // Each stage's image has an id of its own, as a real store gives it.
  const std::string id = sha256_digest(request.stage + "\n" + request.tag).substr(7);
  for (const auto& line : build.lines) {
    if (cancel.cancelled()) {
      exit.interrupted = true;
      exit.term_signal = 2;
      return exit;
    }
    sink((line == k_image_id ? id : line) + "\n");
  }
  if (build.during) {
    build.during();
  }
  if (build.stubborn) {
    auto until = std::chrono::steady_clock::now() + build.holds;
    while (cancel.level() != CancelLevel::kill && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (cancel.level() == CancelLevel::kill) {
      exit.interrupted = true;
      exit.term_signal = 9;
      return exit;
    }
  } else if (build.holds.count() > 0 && !cancel.sleep_for(build.holds)) {
    exit.interrupted = true;
    exit.term_signal = 2;
    return exit;
  }
  if ((build.stalled || build.timed_out) && limits.on_stop) {
    limits.on_stop();
  }
  if (m_clock != nullptr) {
    m_clock->advance(build.takes);
  }
  exit.exit_code = build.exit_code;
  exit.stalled = build.stalled;
  exit.timed_out = build.timed_out;
  if (build.stalled) {
    exit.silent_for = limits.stall_timeout;
  }
  if (exit.ok()) {
    std::lock_guard lock(m_mutex);
    m_images[request.tag] = id;
    ImageConfig& config = m_configs[id];
    config.labels = {request.labels.begin(), request.labels.end()};
    std::string platform = request.platform.empty() ? "linux/amd64" : request.platform;
    config.os = platform.substr(0, platform.find('/'));
    config.architecture = platform.substr(platform.find('/') + 1);
  }
  return exit;
}

} // namespace kiln::testing
