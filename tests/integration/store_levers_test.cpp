// The engine-store disk levers end to end: BuildkitStore against the fake buildctl replaying
// the real v0.11.6 du/prune recordings (and a stand-in process behind the daemon's socket, to
// locate its store), BuildahStore against real buildah 1.28 and its storage (a private store,
// so a prune never reaches another run's images).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "disk/buildah_store.h"
#include "disk/buildkit_daemon.h"
#include "disk/buildkit_store.h"
#include "kiln_harness.h"
#include "stand_in_buildkitd.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/strings.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// Sets environment variables for one test and puts the old values back after it.
class ScopedEnv {
public:
  ScopedEnv() = default;
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (auto it = m_saved.rbegin(); it != m_saved.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }

  void set(const std::string& name, const std::string& value) {
    save(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) {
    save(name);
    ::unsetenv(name.c_str());
  }

private:
  void save(const std::string& name) {
    const char* old = std::getenv(name.c_str());
    m_saved.emplace_back(name, old != nullptr ? std::optional<std::string>(old) : std::nullopt);
  }

  std::vector<std::pair<std::string, std::optional<std::string>>> m_saved;
};

std::string nonce() {
  std::random_device random;
  return std::to_string(random() % 1000000000);
}

bool contains_line(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

bool any_line_has(const std::vector<std::string>& lines, const std::string& part) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& line) { return line.find(part) != std::string::npos; });
}

// ---------------------------------------------------------------------------------------------
// BuildKit, through the fake buildctl

class StoreLevers : public ::testing::Test {
protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("kiln-store-levers-" + nonce());
    fs::create_directories(m_dir);
    std::ofstream(m_dir / "plan").flush(); // an empty plan: state (the prune) without cases
    m_log = m_dir / "buildctl.log";
    const char* path = std::getenv("PATH");
    m_env.set("PATH", std::string(KILN_FAKE_BUILDCTL_DIR) + ":" + (path != nullptr ? path : ""));
    m_env.set("KILN_FAKE_BUILDCTL_PLAN", (m_dir / "plan").string());
    m_env.set("KILN_FAKE_BUILDCTL_LOG", m_log.string());
    m_env.unset("KILN_FAKE_BUILDCTL_UNREACHABLE");
    m_env.unset("BUILDKIT_HOST");
  }

  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(m_dir, ignored);
  }

  /// The fake's log: one JSON object per buildctl invocation.
  std::vector<json> invocations() const {
    std::vector<json> entries;
    std::ifstream in(m_log);
    for (std::string line; std::getline(in, line);) {
      if (!trim(line).empty()) {
        entries.push_back(json::parse(line));
      }
    }
    return entries;
  }

  std::vector<std::vector<std::string>> argvs() const {
    std::vector<std::vector<std::string>> all;
    for (const json& entry : invocations()) {
      all.push_back(entry["argv"].get<std::vector<std::string>>());
    }
    return all;
  }

  fs::path m_dir;
  fs::path m_log;
  ScopedEnv m_env;
};

const BuildkitAddress k_default_address{"", "buildctl's default"};

TEST_F(StoreLevers, BuildkitUsageReportsTheRecordedTypes) {
  BuildkitStore store(k_default_address);
  auto usage = store.usage();
  ASSERT_TRUE(usage) << usage.error();
  EXPECT_EQ(
      usage->records_by_type,
      (std::map<std::string, int>{{"regular", 14}, {"source.local", 3}, {"exec.cachemount", 2}}));
  EXPECT_EQ(usage->bytes_by_type["exec.cachemount"], 16'380u);
  EXPECT_EQ(usage->total_bytes, 5'178'700u);
  EXPECT_EQ(argvs(), (std::vector<std::vector<std::string>>{{"du", "--verbose"}}));
}

TEST_F(StoreLevers, BuildkitPruneIsFilteredSizedAndChecked) {
  BuildkitStore store(k_default_address);
  LayerPrune prune = store.prune_layers(120);

  EXPECT_TRUE(prune.ran);
  EXPECT_EQ(prune.skipped, "");
  // du sizes the unfreeable records (3 MB of source.local + exec.cachemount), the cache mounts
  // are counted, the filtered prune keeps 120 GB of layers on top of them, and they are
  // counted again.
  std::vector<std::vector<std::string>> expected = {
      {"du", "--verbose"},
      {"du", "--verbose", "--filter", "type==exec.cachemount"},
      {"prune", "--filter", "type==regular", "--keep-storage", "120003", "--verbose"},
      {"du", "--verbose", "--filter", "type==exec.cachemount"},
  };
  EXPECT_EQ(argvs(), expected);
  for (const json& entry : invocations()) {
    EXPECT_EQ(entry["rc"], 0) << entry.dump();
  }
  std::vector<std::string> commands;
  for (const auto& argv : expected) {
    commands.push_back("buildctl " + join(argv, " "));
  }
  EXPECT_EQ(prune.commands, commands);

  EXPECT_EQ(prune.cache_mounts_before, 2);
  EXPECT_EQ(prune.cache_mounts_after, 2);
  EXPECT_TRUE(contains_line(prune.lines,
                            "[disk-store] buildkit store at unix:///run/buildkit/buildkitd.sock "
                            "(buildctl's default): pruning type==regular layer cache with "
                            "--keep-storage 120003 MB (120 GB of layers + 3 MB the filter cannot "
                            "free)"))
      << join(prune.lines, "\n");
  EXPECT_TRUE(contains_line(prune.lines,
                            "[disk-store] buildkit store at unix:///run/buildkit/buildkitd.sock "
                            "(buildctl's default): pruned 14 layer record(s), "
                            "3.16MB freed"))
      << join(prune.lines, "\n");
  EXPECT_TRUE(contains_line(prune.lines, "[disk-store] all 2 cache-mount record(s) survived"))
      << join(prune.lines, "\n");
  EXPECT_FALSE(any_line_has(prune.lines, "WARN")) << join(prune.lines, "\n");
  for (const std::string& line : prune.lines) {
    EXPECT_TRUE(line.starts_with("[disk-store] ")) << line;
  }

  // What the store holds now: the fake's recording of the store after that prune.
  auto after = store.usage();
  ASSERT_TRUE(after) << after.error();
  EXPECT_EQ(after->records_by_type,
            (std::map<std::string, int>{{"source.local", 3}, {"exec.cachemount", 2}}));
  EXPECT_FALSE(after->bytes_by_type.contains("regular"));
  EXPECT_EQ(after->reclaimable_bytes, 0u);

  // Never a prune without the filter.
  for (const auto& argv : argvs()) {
    if (std::find(argv.begin(), argv.end(), "prune") != argv.end()) {
      auto filter = std::find(argv.begin(), argv.end(), "--filter");
      ASSERT_NE(filter, argv.end());
      EXPECT_EQ(*(filter + 1), "type==regular");
    }
  }
}

TEST_F(StoreLevers, BuildkitKeepZeroReclaimsEveryLayer) {
  BuildkitStore store(k_default_address);
  LayerPrune prune = store.prune_layers(0);
  EXPECT_TRUE(prune.ran);
  ASSERT_EQ(argvs().size(), 4u);
  EXPECT_EQ(argvs()[2], (std::vector<std::string>{"prune", "--filter", "type==regular",
                                                  "--keep-storage", "0", "--verbose"}));
  EXPECT_TRUE(contains_line(prune.lines, "[disk-store] all 2 cache-mount record(s) survived"));
}

TEST_F(StoreLevers, BuildkitEveryCommandGoesToTheAddress) {
  std::string address = "unix://" + (m_dir / "buildkitd.sock").string();
  BuildkitStore store(BuildkitAddress{address, "[engine.buildkit] host"});
  LayerPrune prune = store.prune_layers(1);
  EXPECT_TRUE(prune.ran);
  std::vector<json> entries = invocations();
  ASSERT_EQ(entries.size(), 4u);
  for (const json& entry : entries) {
    auto argv = entry["argv"].get<std::vector<std::string>>();
    ASSERT_GE(argv.size(), 2u);
    EXPECT_EQ(argv[0], "--addr");
    EXPECT_EQ(argv[1], address);
    EXPECT_EQ(entry["addr"], address);
  }
  EXPECT_EQ(entries[2]["argv"].get<std::vector<std::string>>(),
            (std::vector<std::string>{"--addr", address, "prune", "--filter", "type==regular",
                                      "--keep-storage", "1003", "--verbose"}));
}

TEST_F(StoreLevers, BuildkitUnreachableDaemonIsSkippedWithOneWarn) {
  m_env.set("KILN_FAKE_BUILDCTL_UNREACHABLE", "1");
  BuildkitStore store(k_default_address);
  LayerPrune prune = store.prune_layers(120);
  EXPECT_FALSE(prune.ran);
  EXPECT_NE(prune.skipped.find("Unavailable"), std::string::npos) << prune.skipped;
  ASSERT_EQ(prune.lines.size(), 1u) << join(prune.lines, "\n");
  EXPECT_TRUE(prune.lines[0].starts_with(
      "[disk-store] WARN buildkit store at unix:///run/buildkit/buildkitd.sock (buildctl's "
      "default): layer prune skipped: "))
      << prune.lines[0];
  EXPECT_EQ(prune.cache_mounts_before, -1);
  EXPECT_EQ(prune.cache_mounts_after, -1);
  // It asked once and stopped: no prune went out.
  EXPECT_EQ(argvs(), (std::vector<std::vector<std::string>>{{"du", "--verbose"}}));
  EXPECT_EQ(invocations()[0]["rc"], 1);

  auto usage = store.usage();
  ASSERT_FALSE(usage);
  EXPECT_NE(usage.error().find("Unavailable"), std::string::npos) << usage.error();
}

TEST_F(StoreLevers, BuildkitMissingBuildctlIsSkippedWithOneWarn) {
  fs::create_directories(m_dir / "empty-bin");
  m_env.set("PATH", (m_dir / "empty-bin").string());
  BuildkitStore store(k_default_address);
  LayerPrune prune = store.prune_layers(120);
  EXPECT_FALSE(prune.ran);
  ASSERT_EQ(prune.lines.size(), 1u) << join(prune.lines, "\n");
  EXPECT_TRUE(prune.lines[0].starts_with(
      "[disk-store] WARN buildkit store at unix:///run/buildkit/buildkitd.sock (buildctl's "
      "default): layer prune skipped: "));
  EXPECT_NE(prune.skipped.find("cannot run buildctl"), std::string::npos) << prune.skipped;
  EXPECT_TRUE(invocations().empty());
}

TEST_F(StoreLevers, BuildkitLocatesALocalDaemonsStoreThroughItsSocket) {
  fs::path socket = m_dir / "buildkitd.sock";
  fs::path root = m_dir / "buildkit-root";
  fs::create_directories(root);
  testing::StandInBuildkitd daemon(
      socket, {"--addr", "unix://" + socket.string(), "--root", root.string()});
  BuildkitStore store(BuildkitAddress{"unix://" + socket.string(), "[engine.buildkit] host"});
  auto location = store.location();
  ASSERT_TRUE(location) << location.error();
  std::string proc = "/proc/" + std::to_string(daemon.pid());
  EXPECT_EQ(location->path, fs::path(proc + "/root") / root.relative_path());
  EXPECT_EQ(location->shown, "the buildkit store " + root.string() + " (buildkitd pid " +
                                 std::to_string(daemon.pid()) + ", its --root)");
  // Seen through the daemon's root, the folder is the one it named.
  EXPECT_EQ(filesystem_device(location->path).value(), filesystem_device(root).value());
  EXPECT_TRUE(invocations().empty()) << "buildctl is not asked: BuildKit does not say";
}

TEST_F(StoreLevers, BuildkitARemoteOrSilentDaemonCannotBeLocated) {
  BuildkitStore remote(BuildkitAddress{"tcp://10.0.0.5:1234", "BUILDKIT_HOST"});
  auto far = remote.location();
  ASSERT_FALSE(far);
  EXPECT_EQ(far.error(), "tcp://10.0.0.5:1234 (from BUILDKIT_HOST) is not a local unix socket, "
                         "and BuildKit does not say where its store is");
  // A listener that is not buildkitd (systemd holding the socket) tells nothing of its flags.
  fs::path held = m_dir / "activated.sock";
  testing::StandInBuildkitd systemd(held, {"--root", m_dir.string()}, "/lib/systemd/systemd");
  BuildkitStore activated(BuildkitAddress{"unix://" + held.string(), "[engine.buildkit] host"});
  auto other = activated.location();
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error(), "the process listening on " + held.string() + " (pid " +
                               std::to_string(systemd.pid()) +
                               ", /lib/systemd/systemd) is not buildkitd");

  fs::path socket = m_dir / "nobody.sock";
  BuildkitStore silent(BuildkitAddress{"unix://" + socket.string(), "[engine.buildkit] host"});
  auto none = silent.location();
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error(), "cannot connect to " + socket.string() + ": No such file or directory");
}

// ---------------------------------------------------------------------------------------------
// buildah, for real

/// A private buildah store inside a test folder: real buildah and containers/storage, but
/// nothing another run builds or removes.
struct PrivateBuildah {
  fs::path root;
  fs::path runroot;

  std::vector<std::string> flags() const {
    return {"--root", root.string(), "--runroot", runroot.string()};
  }

  std::vector<std::string> argv(std::initializer_list<std::string> args) const {
    std::vector<std::string> all = {"buildah"};
    for (const std::string& flag : flags()) {
      all.push_back(flag);
    }
    all.insert(all.end(), args);
    return all;
  }

  testing::KilnResult run(const std::vector<std::string>& command) const {
    testing::KilnResult result;
    ProcessExit exit =
        run_process({command, {}, {}}, [&](std::string_view chunk) { result.output += chunk; });
    result.exit_code = exit.ok() ? 0 : (exit.exit_code != 0 ? exit.exit_code : -1);
    return result;
  }
};

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

/// An image id as `--iidfile` writes it (`sha256:<hex>`), bare.
std::string bare(const std::string& text) {
  std::string id(trim(text));
  return id.starts_with("sha256:") ? id.substr(7) : id;
}

TEST_F(StoreLevers, BuildahPruneTakesOnlyDanglingImagesAndCacheMountsSurvive) {
  if (::geteuid() != 0 || !capture_output({"buildah", "--version"})) {
    GTEST_SKIP() << "needs root and buildah";
  }
  testing::ChainDir dir; // busybox copied in, a nonce for names
  PrivateBuildah buildah{dir.path() / "store", dir.path() / "run"};
  // buildah keeps cache mounts under $TMPDIR: a private one, so only this test's mount counts.
  fs::path tmp = dir.path() / "tmp";
  fs::create_directories(tmp);
  m_env.set("TMPDIR", tmp.string());

  std::string cache_id = "kiln-store-" + dir.nonce();
  std::string tag = "localhost/kiln-store-" + dir.nonce() + ":dev";
  dir.write("Dockerfile", std::string(testing::k_base_dockerfile) +
                              "RUN --mount=type=cache,id=" + cache_id +
                              ",target=/cache sh -c 'echo built >> /cache/log; cat /cache/log'\n"
                              "COPY marker /marker\n");
  auto build = [&](const std::string& marker) {
    dir.write("marker", marker + "\n");
    fs::path iid = dir.path() / ("iid-" + marker);
    auto result =
        buildah.run(buildah.argv({"build", "--isolation", "chroot", "--layers", "--iidfile",
                                  iid.string(), "-t", tag, dir.path().string()}));
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return bare(dir.read(iid.filename().string()));
  };
  std::string first = build("one");
  std::string second = build("two"); // the tag moves on: `first` is dangling now
  ASSERT_NE(first, second);

  fs::path cache_log = tmp / "buildah-cache" / cache_id / "log";
  ASSERT_TRUE(fs::exists(cache_log))
      << "buildah 1.28 keeps cache mounts under $TMPDIR/buildah-cache";
  std::string cache_content = dir.read("tmp/buildah-cache/" + cache_id + "/log");
  // Once: the second build took the RUN from the layer cache (only the marker changed).
  EXPECT_EQ(cache_content, "built\n");

  BuildahStore store(BuildahStoreOptions{buildah.flags(), std::chrono::seconds(0)});
  EXPECT_EQ(store.engine(), "buildah");
  auto location = store.location();
  ASSERT_TRUE(location) << location.error();
  EXPECT_EQ(location->path, buildah.root);
  EXPECT_EQ(location->shown, "the buildah store " + buildah.root.string());
  EXPECT_EQ(store.stale_images(), std::vector<std::string>{first});
  EXPECT_EQ(store.tagged_images(), std::vector<std::string>{tag});

  // The lever reads each config in place: the same steps `buildah inspect` gives.
  auto place = parse_buildah_info(buildah.run(buildah.argv({"info"})).output);
  ASSERT_TRUE(place) << place.error();
  for (const std::string& id : {first, second}) {
    auto blob = buildah_config_blob(*place, id);
    ASSERT_TRUE(blob) << "no config of " << id << " under " << place->root;
    auto in_place = parse_config_steps(*blob);
    auto inspected =
        parse_buildah_inspect(buildah.run(buildah.argv({"inspect", "--type", "image", id})).output);
    ASSERT_TRUE(in_place && inspected);
    EXPECT_EQ(in_place->history, inspected->history);
    EXPECT_EQ(in_place->diff_ids, inspected->diff_ids);
  }

  auto usage = store.usage();
  ASSERT_TRUE(usage) << usage.error();
  EXPECT_EQ(usage->records_by_type["image"], 1);
  EXPECT_EQ(usage->records_by_type["dangling"], 1);
  EXPECT_GE(usage->records_by_type["intermediate"], 1);
  EXPECT_EQ(usage->records_by_type["cache-mount"], 1);
  EXPECT_GT(usage->reclaimable_bytes, 0u);
  EXPECT_EQ(usage->bytes_by_type["cache-mount"], cache_content.size());

  // A third build leaves `second` dangling; with the default age limit it is too young to go.
  std::string third = build("three");
  BuildahStore careful(BuildahStoreOptions{buildah.flags()});
  LayerPrune kept = careful.prune_layers(0);
  EXPECT_TRUE(kept.ran);
  EXPECT_TRUE(contains_line(kept.lines, "[disk-store] buildah: kept 2 dangling image(s) younger "
                                        "than 600 s: a running build may be about to start its "
                                        "next step from them"))
      << join(kept.lines, "\n");
  EXPECT_EQ(store.stale_images().size(), 2u);

  // A dangling image a container uses stays: removal without force fails for it, and that is
  // reported, not a fault.
  auto container = buildah.run(buildah.argv({"from", second}));
  ASSERT_EQ(container.exit_code, 0) << container.output;
  LayerPrune in_use = store.prune_layers(0);
  EXPECT_TRUE(in_use.ran);
  EXPECT_TRUE(contains_line(in_use.lines, "[disk-store] buildah: kept 1 dangling image(s) a "
                                          "container uses"))
      << join(in_use.lines, "\n");
  EXPECT_FALSE(any_line_has(in_use.lines, "WARN")) << join(in_use.lines, "\n");
  EXPECT_EQ(store.stale_images(), std::vector<std::string>{second});
  auto removed_container = buildah.run(buildah.argv({"rm", first_line(container.output)}));
  ASSERT_EQ(removed_container.exit_code, 0) << removed_container.output;

  LayerPrune prune = store.prune_layers(120);
  EXPECT_TRUE(prune.ran) << prune.skipped;
  EXPECT_EQ(prune.cache_mounts_before, 1);
  EXPECT_EQ(prune.cache_mounts_after, 1);
  EXPECT_TRUE(any_line_has(prune.lines, "[disk-store] all 1 cache-mount record(s) survived (1 "
                                        "file(s) under "))
      << join(prune.lines, "\n");
  EXPECT_TRUE(any_line_has(prune.lines, "[disk-store] buildah: removing 1 dangling image(s)"))
      << join(prune.lines, "\n");
  EXPECT_FALSE(any_line_has(prune.lines, "WARN")) << join(prune.lines, "\n");
  std::string rmi = join(buildah.argv({"rmi", "--", second}), " ");
  EXPECT_TRUE(contains_line(prune.commands, rmi)) << join(prune.commands, "\n");
  for (const std::string& command : prune.commands) {
    EXPECT_EQ(command.find(" -f"), std::string::npos) << command;
    EXPECT_EQ(command.find("prune"), std::string::npos) << command;
  }

  EXPECT_TRUE(store.stale_images().empty());
  EXPECT_NE(buildah.run(buildah.argv({"inspect", "--type", "image", second})).exit_code, 0);
  EXPECT_EQ(buildah.run(buildah.argv({"inspect", "--type", "image", third})).exit_code, 0);
  EXPECT_EQ(store.tagged_images(), std::vector<std::string>{tag});
  EXPECT_EQ(dir.read("tmp/buildah-cache/" + cache_id + "/log"), cache_content);

  // The tagged image goes only when asked, by name.
  EXPECT_TRUE(store.remove_image(tag));
  EXPECT_TRUE(store.tagged_images().empty());
  EXPECT_FALSE(store.remove_image(tag));
  EXPECT_TRUE(fs::exists(cache_log));
}

TEST_F(StoreLevers, BuildahMissingIsSkippedWithOneWarn) {
  fs::create_directories(m_dir / "empty-bin");
  m_env.set("PATH", (m_dir / "empty-bin").string());
  BuildahStore store;
  LayerPrune prune = store.prune_layers(120);
  EXPECT_FALSE(prune.ran);
  ASSERT_EQ(prune.lines.size(), 1u) << join(prune.lines, "\n");
  EXPECT_TRUE(prune.lines[0].starts_with("[disk-store] WARN buildah layer prune skipped: "))
      << prune.lines[0];
  EXPECT_NE(prune.skipped.find("cannot run buildah"), std::string::npos) << prune.skipped;
  EXPECT_FALSE(store.usage());
  EXPECT_FALSE(store.location());
  EXPECT_TRUE(store.stale_images().empty());
  EXPECT_TRUE(store.tagged_images().empty());
  EXPECT_FALSE(store.remove_image("localhost/anything:dev"));
}

TEST_F(StoreLevers, ARunReclaimedByTheStoreLeverRerunsFullyCached) {
  if (::geteuid() != 0 || !capture_output({"buildah", "--version"})) {
    GTEST_SKIP() << "needs root and buildah";
  }
  testing::ChainDir dir;
  std::string conf = dir.private_buildah_store();
  m_env.set("CONTAINERS_STORAGE_CONF", conf);
  std::vector<std::pair<std::string, std::string>> env = {{"CONTAINERS_STORAGE_CONF", conf}};
  dir.write("chain.toml", "[chain]\nname = \"zero-" + dir.nonce() +
                              "\"\n\n[[stage]]\nname = \"zero\"\ndockerfile = "
                              "\"zero.Dockerfile\"\n");
  // One stage built, changed and built again, as in tests/fixtures/buildah-1.28.2/store-rebuilt:
  // FROM scratch + ARG makes a step image with no layer, which buildah lists as dangling (here
  // the old version's LABEL step, whose removal takes the shared ARG step with it; without the
  // LABEL, the ARG step itself).
  dir.write("zero.Dockerfile", "FROM scratch\nARG VERSION=1\nLABEL generation=1\n"
                               "COPY busybox /bin/busybox\n"
                               "RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n");
  testing::KilnResult first = dir.kiln({"run", "chain.toml"}, nullptr, env);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  std::string v2 = "FROM scratch\nARG VERSION=1\nCOPY busybox /bin/busybox\n"
                   "RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n"
                   "RUN echo \"$VERSION\" > /version\n";
  dir.write("zero.Dockerfile", v2);
  testing::KilnResult second = dir.kiln({"run", "chain.toml"}, nullptr, env);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  json built = dir.latest_manifest()["stages"][0]["attempts"][0];
  ASSERT_EQ(built["steps_run"], 4) << built.dump();
  EXPECT_EQ(built["steps_cached"], 1) << "the ARG step, shared with the first version";
  auto listed = capture_output({"buildah", "images", "--filter", "dangling=true", "--quiet"});
  ASSERT_TRUE(listed) << listed.error();
  EXPECT_EQ(split(trim(*listed), '\n').size(), 2u) << *listed;

  // Between runs, with no age limit: the store lever, then the image pass of a floor.
  BuildahStore store(BuildahStoreOptions{{}, std::chrono::seconds(0)});
  LayerPrune prune = store.prune_layers(0);
  ASSERT_TRUE(prune.ran) << prune.skipped;
  EXPECT_TRUE(prune.removed_any) << join(prune.lines, "\n");
  EXPECT_FALSE(any_line_has(prune.lines, "WARN")) << join(prune.lines, "\n");
  EXPECT_TRUE(any_line_has(prune.lines, "[disk-store] buildah: kept 1 dangling image(s) without "
                                        "a layer"))
      << join(prune.lines, "\n");
  EXPECT_TRUE(store.stale_images().empty());

  testing::KilnResult rerun = dir.kiln({"run", "chain.toml"}, nullptr, env);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  json attempt = dir.latest_manifest()["stages"][0]["attempts"][0];
  EXPECT_EQ(attempt["steps_run"], 4) << attempt.dump();
  EXPECT_EQ(attempt["steps_cached"], 4) << attempt.dump();
  std::string log = dir.read("records/latest/" + attempt["log"].get<std::string>());
  size_t hits = 0;
  for (size_t at = log.find("--> Using cache "); at != std::string::npos;
       at = log.find("--> Using cache ", at + 1)) {
    ++hits;
  }
  // The Dockerfile's four steps and the four LABEL steps buildah makes of kiln's labels.
  EXPECT_EQ(hits, 8u) << log;
}

} // namespace
} // namespace kiln
