#include "kiln_harness.h"

#include <chrono>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <unistd.h>

#include <gtest/gtest.h>

#include "driver/record_fold.h"
#include "util/fs.h"

namespace kiln::testing {

namespace {

/// Every run record under `root` is the fold of its events, byte for byte: what `kiln records
/// replay --check` says of it. Left out: a record whose writes failed (a full disk cut its
/// events) and a run killed while it still said `running` (the kill may fall between the events
/// and the manifest that folds them; the next run marks it abandoned, through its events).
void expect_records_replay(const std::filesystem::path& root) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() != "events.jsonl") {
      continue;
    }
    std::filesystem::path run = it->path().parent_path();
    auto manifest = read_file(run / "manifest.json");
    if (!manifest) {
      continue;
    }
    auto doc = nlohmann::json::parse(*manifest, nullptr, false);
    if (!doc.is_object() || doc.value("status", "") == "running" ||
        !doc.value("record_errors", nlohmann::json::array()).empty()) {
      continue;
    }
    auto replayed = replay_manifest(it->path());
    if (!replayed) {
      ADD_FAILURE() << "kiln records replay " << run << ": " << replayed.error();
    } else if (*replayed != *manifest) {
      ADD_FAILURE() << "kiln records replay " << run
                    << ": the manifest is not the fold of its events:\n--- manifest.json\n"
                    << *manifest << "\n--- replayed\n"
                    << *replayed;
    }
  }
}

} // namespace

ChainDir::ChainDir() {
  std::random_device random;
  m_nonce = std::to_string(random() % 1000000000);
  m_path = std::filesystem::temp_directory_path() / ("kiln-it-" + m_nonce);
  std::filesystem::create_directories(m_path);
  std::filesystem::copy_file("/bin/busybox", m_path / "busybox");
}

ChainDir::~ChainDir() {
  expect_records_replay(m_path);
  remove_images();
  std::error_code ec;
  std::filesystem::remove_all(m_path, ec);
}

void ChainDir::remove_images() const {
  remove_images(m_path / "records");
}

void ChainDir::remove_images(const std::filesystem::path& records) const {
  // Remove the images this test tagged; the shared layers stay for the next test's cache. One
  // buildah call for all: it removes every name it knows and only complains of the others.
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& run : std::filesystem::directory_iterator(records / "runs", ec)) {
    std::ifstream in(run.path() / "manifest.json");
    auto doc = nlohmann::json::parse(in, nullptr, false);
    if (doc.is_discarded()) {
      continue;
    }
    for (const auto& stage : doc["stages"]) {
      for (const char* name : {"tag", "work_tag"}) {
        if (stage.contains(name) && stage[name].is_string() && !stage[name].empty()) {
          names.insert(stage[name].get<std::string>());
        }
      }
    }
  }
  if (!names.empty()) {
    std::vector<std::string> argv = {"buildah", "rmi", "-f", "--"};
    argv.insert(argv.end(), names.begin(), names.end());
    run_process({argv, {}, {}}, [](std::string_view) {});
  }
}

void write_two_stage_chain(const ChainDir& dir, const std::string& body, int attempts,
                           const std::string& extra) {
  dir.write("base.Dockerfile", k_base_dockerfile);
  dir.write("work.Dockerfile", "FROM base\n" + body);
  dir.write("chain.toml", "[chain]\nname = \"t" + dir.nonce() +
                              "\"\n[defaults]\ncooldown_s = 0\nattempts = " +
                              std::to_string(attempts) + "\n" + extra +
                              "\n[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n"
                              "[[stage]]\nname = \"work\"\ndockerfile = \"work.Dockerfile\"\n"
                              "needs = [\"base\"]\n");
}

void ChainDir::copy_demo() const {
  std::filesystem::path demo = std::filesystem::path(KILN_SOURCE_DIR) / "examples" / "hello";
  for (const char* part : {"chain.toml", "versions.env", "stages", "src"}) {
    std::filesystem::copy(demo / part, m_path / part, std::filesystem::copy_options::recursive);
  }
}

void ChainDir::copy_unique_demo() const {
  copy_demo();
  std::string chain = read("chain.toml");
  chain.replace(chain.find("name = \"hello\""), 14, "name = \"hello-" + m_nonce + "\"");
  write("chain.toml", chain);
  std::string versions = read("versions.env");
  versions.replace(versions.find("BASE_RELEASE=2026.12"), 20, "BASE_RELEASE=" + m_nonce);
  write("versions.env", versions);
}

void ChainDir::copy_demo_for_replay() const {
  copy_demo();
  std::string chain = read("chain.toml");
  const std::string kind = "kind = \"smoke\"\n";
  auto at = chain.find(kind);
  EXPECT_NE(at, std::string::npos) << "the demo chain has no smoke stage";
  if (at != std::string::npos) {
    chain.erase(at, kind.size());
  }
  for (const char* key : {"\nartifacts = ", "\nmax_layers = "}) {
    for (at = chain.find(key); at != std::string::npos; at = chain.find(key)) {
      chain.erase(at + 1, chain.find('\n', at + 1) - at);
    }
  }
  // With no smoke stage, a chain that publishes says so.
  chain.insert(chain.find("[defaults]"),
               "[publish]\nrequire_smoke = false  # a recording prints no test summary\n\n");
  write("chain.toml", chain);
}

void ChainDir::build_image(const std::string& dockerfile, const std::string& tag) const {
  write("image.Dockerfile", dockerfile);
  std::string output;
  ProcessExit exit =
      run_process({{"buildah", "build", "--isolation", "chroot", "--layers", "--force-rm", "--file",
                    (m_path / "image.Dockerfile").string(), "--tag", tag, m_path.string()},
                   {},
                   {}},
                  [&](std::string_view chunk) { output += chunk; });
  ASSERT_TRUE(exit.ok()) << output;
}

void ChainDir::remove_image(const std::string& tag) {
  run_process({{"buildah", "rmi", tag}, {}, {}}, [](std::string_view) {});
}

void ChainDir::write(const std::string& relative, const std::string& content) const {
  std::filesystem::path file = m_path / relative;
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << content;
}

std::string ChainDir::read(const std::string& relative) const {
  std::ifstream in(m_path / relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

KilnResult ChainDir::kiln(const std::vector<std::string>& args, const CancelToken* ctrl_c,
                          const std::vector<std::pair<std::string, std::string>>& env) const {
  KilnResult result;
  std::vector<std::string> argv = {KILN_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessSpec spec{argv, env, m_path};
  spec.cancel = ctrl_c != nullptr ? ctrl_c : &m_never;
  spec.grace = std::chrono::seconds(60);
  ProcessExit exit = run_process(spec, [&](std::string_view chunk) { result.output += chunk; });
  result.exit_code = exit.status_code();
  return result;
}

std::string ChainDir::private_buildah_store() const {
  write("storage.conf", "[storage]\ndriver = \"overlay\"\ngraphroot = \"" +
                            (m_path / "store").string() + "\"\nrunroot = \"" +
                            (m_path / "run").string() + "\"\n");
  return (m_path / "storage.conf").string();
}

nlohmann::json ChainDir::latest_manifest() const {
  std::ifstream in(m_path / "records" / "latest" / "manifest.json");
  return nlohmann::json::parse(in);
}

std::vector<int> processes_matching(const std::string& needle) {
  std::vector<int> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : cmdline) {
      c = c == '\0' ? ' ' : c;
    }
    if (cmdline.find(needle) != std::string::npos && std::stoi(name) != ::getpid()) {
      pids.push_back(std::stoi(name));
    }
  }
  return pids;
}

bool wait_for_process(const std::string& needle) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (processes_matching(needle).empty()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

bool wait_for_no_process(const std::string& needle) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!processes_matching(needle).empty()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

std::string rendered_dom(const ChainDir& dir, const std::filesystem::path& page) {
  // Chromium's own stderr (D-Bus and GPU notes) goes to a file of its own, so it cannot mix
  // with the DOM.
  std::filesystem::path dom = dir.path() / "dom.html";
  CapturedRun chromium = run_captured(
      {"sh", "-c", "out=$1; shift; exec \"$@\" >\"$out\" 2>\"$out.log\"", "sh", dom.string(),
       k_chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
       "--user-data-dir=" + (dir.path() / "chromium-profile").string(), "--dump-dom",
       "file://" + page.string()},
      std::chrono::seconds(120));
  EXPECT_TRUE(chromium.exit.ok()) << chromium.failure() << "\n" << dir.read("dom.html.log");
  return dir.read("dom.html");
}

FakeBuildkit::FakeBuildkit(const ChainDir& dir) : dir(dir) {
  plan("# every build: auto\n");
}

FakeBuildkit::Env FakeBuildkit::env(Env extra) const {
  Env env = {{"PATH", std::string(KILN_FAKE_BUILDCTL_DIR) + ":" + std::getenv("PATH")},
             {"KILN_FAKE_BUILDCTL_LOG", (dir.path() / "buildctl.log").string()},
             {"KILN_FAKE_BUILDCTL_PLAN", (dir.path() / "plan").string()}};
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

void FakeBuildkit::plan(const std::string& text) const {
  dir.write("plan", text);
}

std::vector<nlohmann::json> FakeBuildkit::builds() const {
  std::vector<nlohmann::json> builds;
  std::istringstream in(dir.read("buildctl.log"));
  for (std::string line; std::getline(in, line);) {
    nlohmann::json entry = nlohmann::json::parse(line);
    if (entry["command"] == "build") {
      builds.push_back(entry);
    }
  }
  return builds;
}

} // namespace kiln::testing
