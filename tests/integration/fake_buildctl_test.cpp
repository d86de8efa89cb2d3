// The fake buildctl itself: kiln's BuildKit tests prove something only if it replays the real
// recordings faithfully and leaves on disk what a real build leaves.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path k_fake = fs::path(KILN_FAKE_BUILDCTL_DIR) / "buildctl";
const fs::path k_recordings = fs::path(KILN_TEST_FIXTURES) / "buildkit-v0.11.6";

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return quoted + "'";
}

/// The hex digest `sha256sum` (coreutils) gives for a file: a check independent of the fake's.
std::string coreutils_sha256(const fs::path& path) {
  std::string command = "sha256sum < " + shell_quote(path.string());
  FILE* pipe = ::popen(command.c_str(), "r");
  char hex[65] = {};
  size_t n = pipe != nullptr ? std::fread(hex, 1, 64, pipe) : 0;
  if (pipe != nullptr) {
    ::pclose(pipe);
  }
  return std::string(hex, n);
}

struct Result {
  int rc = -1;
  std::string out;
  std::string err;
};

class FakeBuildctl : public ::testing::Test {
protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    m_dir = fs::temp_directory_path() /
            ("kiln-fake-buildctl-" + std::to_string(::getpid()) + "-" + test->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir / "ctx");
    write("ctx/Dockerfile", "FROM scratch\n");
  }

  void TearDown() override { fs::remove_all(m_dir); }

  void write(const std::string& relative, const std::string& content) const {
    std::ofstream(m_dir / relative, std::ios::binary) << content;
  }

  /// Runs the fake from the scratch folder with a clean fake environment plus `env`
  /// (`NAME=value` words), logging to log.jsonl there.
  Result run(const std::vector<std::string>& args, const std::string& env = "") const {
    std::string command = "cd " + shell_quote(m_dir.string()) +
                          " && env -u KILN_FAKE_BUILDCTL_PLAN -u KILN_FAKE_BUILDCTL_UNREACHABLE"
                          " -u KILN_FAKE_BUILDCTL_DELAY_MS -u KILN_FAKE_BUILDCTL_PROBE_MS -u "
                          "KILN_FAKE_BUILDCTL_LOG_MB"
                          " -u KILN_FAKE_BUILDKIT_VERSION -u BUILDKIT_HOST"
                          " KILN_FAKE_BUILDCTL_LOG=log.jsonl " +
                          env + " " + shell_quote(k_fake.string());
    for (const std::string& arg : args) {
      command += " " + shell_quote(arg);
    }
    command += " >out.txt 2>err.txt";
    int status = std::system(command.c_str());
    Result result;
    result.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = slurp(m_dir / "out.txt");
    result.err = slurp(m_dir / "err.txt");
    return result;
  }

  /// A build of ctx/Dockerfile's `work` target with `extra` flags.
  Result build(const std::vector<std::string>& extra, const std::string& env = "") const {
    std::vector<std::string> args = {"build",       "--frontend",      "dockerfile.v0",  "--local",
                                     "context=ctx", "--local",         "dockerfile=ctx", "--opt",
                                     "target=work", "--progress=plain"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args, env);
  }

  std::vector<json> log() const {
    std::vector<json> lines;
    std::istringstream text(slurp(m_dir / "log.jsonl"));
    for (std::string line; std::getline(text, line);) {
      lines.push_back(json::parse(line));
    }
    return lines;
  }

  json read_json(const std::string& relative) const { return json::parse(slurp(m_dir / relative)); }

  fs::path m_dir;
};

TEST_F(FakeBuildctl, SuccessWritesAnOciLayoutWhoseManifestTheMetadataNames) {
  Result result = build({"--output", "type=oci,dest=out,tar=false", "--metadata-file", "meta.json",
                         "--export-cache", "type=local,dest=cache,mode=max"});
  ASSERT_EQ(result.rc, 0) << result.err;

  EXPECT_EQ(read_json("out/oci-layout"), json::parse(R"({"imageLayoutVersion":"1.0.0"})"));
  json index = read_json("out/index.json");
  EXPECT_EQ(index["schemaVersion"], 2);
  ASSERT_EQ(index["manifests"].size(), 1u);
  const json& entry = index["manifests"][0];
  EXPECT_EQ(entry["mediaType"], "application/vnd.oci.image.manifest.v1+json");
  EXPECT_TRUE(entry["annotations"].contains("org.opencontainers.image.created"));
  std::string digest = entry["digest"];

  // Blobs are named by the real SHA-256 of their bytes.
  fs::path manifest_blob = m_dir / "out/blobs/sha256" / digest.substr(7);
  ASSERT_TRUE(fs::exists(manifest_blob)) << digest;
  EXPECT_EQ("sha256:" + coreutils_sha256(manifest_blob), digest);
  EXPECT_EQ(entry["size"], fs::file_size(manifest_blob));
  json manifest = json::parse(slurp(manifest_blob));
  EXPECT_EQ(manifest["layers"], json::array());
  std::string config_digest = manifest["config"]["digest"];
  fs::path config_blob = m_dir / "out/blobs/sha256" / config_digest.substr(7);
  EXPECT_EQ("sha256:" + coreutils_sha256(config_blob), config_digest);
  json config = json::parse(slurp(config_blob));
  EXPECT_EQ(config["architecture"], "amd64");
  EXPECT_EQ(config["os"], "linux");

  // The metadata has exactly the recorded keys and names what was written.
  json metadata = read_json("meta.json");
  json recorded = json::parse(slurp(k_recordings / "metadata-work.json"));
  std::vector<std::string> keys, recorded_keys;
  for (const auto& [key, value] : metadata.items()) {
    keys.push_back(key);
  }
  for (const auto& [key, value] : recorded.items()) {
    recorded_keys.push_back(key);
  }
  EXPECT_EQ(keys, recorded_keys);
  EXPECT_EQ(metadata["containerimage.digest"], digest);
  EXPECT_EQ(metadata["containerimage.descriptor"]["digest"], digest);
  EXPECT_EQ(metadata["containerimage.config.digest"], config_digest);
  EXPECT_EQ(metadata["containerimage.buildinfo"]["attrs"], json({{"target", "work"}}));

  // A local cache export, like BuildKit's: a non-empty index naming a blob it wrote.
  json cache = read_json("cache/index.json");
  ASSERT_EQ(cache["manifests"].size(), 1u);
  std::string cache_digest = cache["manifests"][0]["digest"];
  EXPECT_TRUE(fs::exists(m_dir / "cache/blobs/sha256" / cache_digest.substr(7)));
}

TEST_F(FakeBuildctl, ReplaysTheRecordingByteForByteAndAFailureWritesNothing) {
  Result fresh = build({});
  EXPECT_EQ(fresh.rc, 0);
  EXPECT_EQ(fresh.err, slurp(k_recordings / "build-fresh.stderr"));
  EXPECT_EQ(fresh.out, slurp(k_recordings / "build-fresh.stdout"));

  write("plan", "Dockerfile build-fail-run\n");
  Result failed = build({"--output", "type=oci,dest=out,tar=false", "--metadata-file", "m.json"},
                        "KILN_FAKE_BUILDCTL_PLAN=plan");
  EXPECT_EQ(failed.rc, 1);
  EXPECT_EQ(failed.err, slurp(k_recordings / "build-fail-run.stderr"));
  EXPECT_EQ(failed.out, "");
  EXPECT_FALSE(fs::exists(m_dir / "out"));
  EXPECT_FALSE(fs::exists(m_dir / "m.json"));
}

TEST_F(FakeBuildctl, PlanGivesEachKeyItsNextCaseAndRepeatsTheLast) {
  write("plan", "# stage Dockerfile fails once, every other file flakes\n"
                "Dockerfile build-fail-run build-fresh\n"
                "* import-flake\n");
  write("ctx/other.Dockerfile", "FROM scratch\n");
  std::vector<int> rcs;
  for (int i = 0; i < 3; ++i) {
    rcs.push_back(build({}, "KILN_FAKE_BUILDCTL_PLAN=plan").rc);
  }
  Result other = build({"--opt", "filename=other.Dockerfile"}, "KILN_FAKE_BUILDCTL_PLAN=plan");
  EXPECT_EQ(rcs, (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(other.rc, 1);
  EXPECT_EQ(other.err, slurp(k_recordings / "composed/import-flake.stderr"));

  std::vector<std::string> cases;
  for (const json& line : log()) {
    EXPECT_EQ(line["command"], "build");
    EXPECT_EQ(line["addr"], "unix:///run/buildkit/buildkitd.sock");
    cases.push_back(line["case"]);
  }
  EXPECT_EQ(cases, (std::vector<std::string>{"build-fail-run", "build-fresh", "build-fresh",
                                             "import-flake"}));
}

TEST_F(FakeBuildctl, LocalImportWithoutIndexPrintsTheRecordedWarningForItsFolder) {
  std::string missing = (m_dir / "no-cache-here").string();
  Result result = build({"--import-cache", "type=local,src=" + missing});
  EXPECT_EQ(result.rc, 0);

  std::string recorded = slurp(k_recordings / "build-import-missing.stderr");
  std::string warning = recorded.substr(0, recorded.find('\n') + 1);
  const std::string recorded_folder = "/srv/kiln-fixtures/empty-nonexistent";
  for (size_t at = warning.find(recorded_folder); at != std::string::npos;
       at = warning.find(recorded_folder, at + missing.size())) {
    warning.replace(at, recorded_folder.size(), missing);
  }
  EXPECT_EQ(result.err, warning + slurp(k_recordings / "build-fresh.stderr"));

  // For the recorded folder itself, the recorded case comes out unchanged.
  write("plan", "* build-import-missing\n");
  Result replayed = build({"--import-cache", "type=local,src=" + recorded_folder},
                          "KILN_FAKE_BUILDCTL_PLAN=plan");
  EXPECT_EQ(replayed.err, recorded);
}

TEST_F(FakeBuildctl, AutoReplaysTheCachedBuildOnceTheLocalCacheHasAnIndex) {
  ASSERT_EQ(build({"--export-cache", "type=local,dest=cache,mode=max"}).rc, 0);
  Result cached = build({"--import-cache", "type=local,src=cache"});
  EXPECT_EQ(cached.rc, 0);
  EXPECT_EQ(cached.err, slurp(k_recordings / "build-cached.stderr"));
}

TEST_F(FakeBuildctl, ContextDigestMissingFromTheLayoutFailsTheSolve) {
  ASSERT_EQ(build({"--output", "type=oci,dest=base,tar=false"}).rc, 0);
  std::string digest = read_json("base/index.json")["manifests"][0]["digest"];
  std::string wrong = "sha256:" + std::string(64, '0');

  Result result =
      build({"--oci-layout", "base=base", "--opt", "context:base=oci-layout://base@" + wrong,
             "--output", "type=oci,dest=next,tar=false"});
  EXPECT_EQ(result.rc, 1);
  EXPECT_EQ(result.err.rfind("error: failed to solve: ", 0), 0u) << result.err;
  EXPECT_NE(result.err.find("--oci-layout base="), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(m_dir / "next"));
  EXPECT_EQ(log().back()["rc"], 1);
  EXPECT_EQ(log().back()["case"], "");

  Result right =
      build({"--oci-layout", "base=base", "--opt", "context:base=oci-layout://base@" + digest,
             "--output", "type=oci,dest=next,tar=false"});
  EXPECT_EQ(right.rc, 0) << right.err;
  EXPECT_TRUE(fs::exists(m_dir / "next/index.json"));
}

TEST_F(FakeBuildctl, VersionProbesPrintWhatTheRealOnesPrintAndLogWhenTheyRan) {
  Result client = run({"--version"});
  EXPECT_EQ(client.rc, 0);
  EXPECT_EQ(client.out, "buildctl github.com/moby/buildkit v0.11.6 "
                        "2951a28cd7085eb18979b1f710678623d94ed578\n");
  EXPECT_EQ(run({"debug", "info"}).out, "BuildKit: github.com/moby/buildkit v0.11.6 "
                                        "2951a28cd7085eb18979b1f710678623d94ed578\n");
  // Built from source without a version stamp: recorded from v0.11.6 built without -ldflags.
  std::string unstamped = "KILN_FAKE_BUILDKIT_VERSION=0.0.0+unknown";
  EXPECT_EQ(run({"--version"}, unstamped).out, slurp(k_recordings / "unstamped-version.txt"));
  EXPECT_EQ(run({"debug", "info"}, unstamped).out,
            slurp(k_recordings / "unstamped-debug-info.txt"));

  // Each invocation logs when it started and ended on the host's monotonic clock, so a test
  // can tell invocations that overlapped from ones that ran one after the other.
  Result slow = run({"--version"}, "KILN_FAKE_BUILDCTL_PROBE_MS=50");
  EXPECT_EQ(slow.rc, 0);
  std::vector<json> lines = log();
  ASSERT_EQ(lines.size(), 5u);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_LE(lines[i]["started_ns"].get<int64_t>(), lines[i]["ended_ns"].get<int64_t>());
    if (i > 0) {
      EXPECT_LE(lines[i - 1]["ended_ns"].get<int64_t>(), lines[i]["started_ns"].get<int64_t>());
    }
  }
  EXPECT_EQ(lines[1]["command"], "debug info");
  EXPECT_GE(lines[4]["ended_ns"].get<int64_t>() - lines[4]["started_ns"].get<int64_t>(),
            50'000'000);
}

TEST_F(FakeBuildctl, PruneChangesWhatDuReportsAndUnknownFlagsAreUsageErrors) {
  write("plan", "* auto\n");
  std::string plan = "KILN_FAKE_BUILDCTL_PLAN=plan";
  EXPECT_EQ(run({"du", "--verbose"}, plan).out, slurp(k_recordings / "du-verbose.txt"));
  Result prune =
      run({"prune", "--filter", "type==regular", "--keep-storage", "1", "--verbose"}, plan);
  EXPECT_EQ(prune.rc, 0);
  EXPECT_EQ(prune.out, slurp(k_recordings / "prune-regular-keep1.txt"));
  EXPECT_EQ(run({"du", "--verbose"}, plan).out, slurp(k_recordings / "du-verbose-after-prune.txt"));

  Result unknown = run({"build", "--platform", "linux/arm64"});
  EXPECT_EQ(unknown.rc, 1);
  EXPECT_EQ(unknown.err, "Incorrect Usage: flag provided but not defined: -platform\n");
}

} // namespace
