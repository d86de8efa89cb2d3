// The buildkit backend: the exact buildctl argv of every feature, version gates, and what its
// output reader makes of the recordings (tests/fixtures/buildkit-v0.11.6).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "driver/attempt.h"
#include "engine/buildkit_engine.h"
#include "engine/buildkit_output.h"
#include "util/fs.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(KILN_TEST_FIXTURES) + "/buildkit-v0.11.6/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::unique_ptr<BuildOutput> replay(const std::string& stderr_text) {
  auto output = BuildkitEngine({}).read_output();
  std::istringstream in(stderr_text);
  for (std::string line; std::getline(in, line);) {
    output->feed(line);
  }
  return output;
}

class TempDir {
public:
  TempDir() {
    m_path = fs::temp_directory_path() /
             ("kiln-bk-" + std::to_string(::getpid()) + "-" + std::to_string(s_count++));
    fs::create_directories(m_path);
  }
  ~TempDir() { fs::remove_all(m_path); }
  const fs::path& path() const { return m_path; }

private:
  static inline int s_count = 0;
  fs::path m_path;
};

BuildRequest minimal_request(const fs::path& records) {
  BuildRequest request;
  request.stage = "work";
  request.dockerfile = "/c/stages/work.Dockerfile";
  request.context = "/c";
  request.layout = records / "oci/work";
  request.metadata = records / "oci/work.metadata.json";
  return request;
}

TEST(BuildkitWorkers, ThePlatformsOfEveryWorkerEachOnce) {
  auto recorded = parse_buildkit_workers(fixture("debug-workers.stdout"));
  ASSERT_TRUE(recorded);
  EXPECT_EQ(*recorded, (std::vector<std::string>{"linux/amd64", "linux/amd64/v2", "linux/amd64/v3",
                                                 "linux/amd64/v4"}));
  // Two workers (an OCI and a containerd one) share platforms; one lists none.
  auto two = parse_buildkit_workers("ID\t\tPLATFORMS\nabc\tlinux/amd64,linux/arm64\n"
                                    "def   linux/arm64, linux/riscv64\nlonely\n\n");
  ASSERT_TRUE(two);
  EXPECT_EQ(*two, (std::vector<std::string>{"linux/amd64", "linux/arm64", "linux/riscv64"}));
  EXPECT_EQ(parse_buildkit_workers("ID\tPLATFORMS\n"), std::vector<std::string>{});
  // The verbose form, an error, nothing: not the table.
  EXPECT_FALSE(parse_buildkit_workers(fixture("debug-workers-verbose.stdout")));
  EXPECT_FALSE(parse_buildkit_workers(fixture("debug-workers-no-daemon.stderr")));
  EXPECT_FALSE(parse_buildkit_workers(""));
  EXPECT_FALSE(parse_buildkit_workers("IDENTITY PLATFORMS\n"));
}

TEST(BuildkitWorkers, TheGcRulesAndTheLayerCacheTheyKeep) {
  // The default policy: a rule for sources and cache mounts, one with a duration, two that
  // prune every record down to 26 GB whatever its age.
  auto defaults = parse_buildkit_gc_rules(fixture("debug-workers-verbose.stdout"));
  ASSERT_EQ(defaults.size(), 4u);
  EXPECT_EQ(defaults[0].filters,
            (std::vector<std::string>{"type==source.local", "type==exec.cachemount",
                                      "type==source.git.checkout"}));
  EXPECT_TRUE(defaults[0].has_duration);
  EXPECT_EQ(defaults[0].keep_bytes, 512'000'000u);
  EXPECT_TRUE(defaults[1].has_duration);
  EXPECT_FALSE(defaults[2].has_duration);
  EXPECT_TRUE(defaults[3].all);
  EXPECT_EQ(layer_keep_bytes(defaults), 26'000'000'000u);
  // A daemon configured with two rules (filters joined by spaces): the all-records rule's 1 GB.
  auto custom = parse_buildkit_gc_rules(fixture("debug-workers-verbose-gc.stdout"));
  ASSERT_EQ(custom.size(), 2u);
  EXPECT_EQ(custom[0].filters.size(), 3u);
  EXPECT_EQ(layer_keep_bytes(custom), 1'000'000'000u);
  // Only rules that reach layers count; none at all bounds nothing.
  EXPECT_EQ(layer_keep_bytes({{false, {"type==exec.cachemount"}, false, 5}}), std::nullopt);
  EXPECT_EQ(layer_keep_bytes({{false, {"type==regular"}, false, 7}}), 7u);
  // `type==regular,id~=x` is one filter of two conditions: not every layer.
  EXPECT_EQ(layer_keep_bytes({{false, {"type==regular", "id~=x"}, false, 7}}), std::nullopt);
  // A rule that printed no Keep Bytes line bounds nothing kiln can read.
  EXPECT_EQ(layer_keep_bytes({{true, {}, false, std::nullopt}}), std::nullopt);
  EXPECT_TRUE(parse_buildkit_gc_rules(fixture("debug-workers.stdout")).empty());
  EXPECT_TRUE(parse_buildkit_gc_rules("").empty());
}

TEST(BuildkitEngine, MinimalArgvExportsAnOciLayoutWithItsMetadata) {
  BuildkitEngine engine({});
  BuildRequest request = minimal_request("/r");
  std::vector<std::string> expected = {"buildctl",
                                       "build",
                                       "--frontend",
                                       "dockerfile.v0",
                                       "--local",
                                       "context=/c",
                                       "--local",
                                       "dockerfile=/c/stages",
                                       "--opt",
                                       "filename=work.Dockerfile",
                                       "--progress=plain",
                                       "--output",
                                       "type=oci,dest=/r/oci/work,tar=false",
                                       "--metadata-file",
                                       "/r/oci/work.metadata.json"};
  EXPECT_EQ(engine.build_argv(request), expected);
}

TEST(BuildkitEngine, EveryFeatureInItsPlace) {
  TempDir dir;
  // The stage it needs was built: its metadata names the digest the context pins.
  fs::create_directories(dir.path() / "oci");
  ASSERT_TRUE(
      write_file_atomic(dir.path() / "oci/base.metadata.json", fixture("metadata-work.json")));
  fs::create_directories(dir.path() / "cache/hello-work-amd64");
  ASSERT_TRUE(write_file_atomic(dir.path() / "cache/hello-work-amd64/index.json", "{}"));

  BuildkitEngine engine({"tcp://10.0.0.5:1234", "[engine.buildkit] host"});
  BuildRequest request = minimal_request(dir.path());
  request.target = "work";
  request.build_args = {{"GREETING", "hi"}, {"B", "x y"}};
  request.contexts = {{"base", "localhost/hello-base:latest", dir.path() / "oci/base",
                       dir.path() / "oci/base.metadata.json", ""}};
  request.tools = "/r/tools";
  request.secrets = {{"token", "TOKEN", {}, {}}, {"netrc", {}, "/home/u/.netrc", {}}};
  request.cache_slug = dir.path() / "cache/hello-work-amd64";
  request.cache_from = {"type=registry,ref=reg.example/hello/work:cache"};
  request.cache_to = {"type=registry,ref=reg.example/hello/work:cache,mode=max", "type=inline"};
  const std::string digest =
      "sha256:496b2655b00f977776f2ea5b58703904e6776d9e775185154bef6adea9c44c93";
  const std::string slug = (dir.path() / "cache/hello-work-amd64").string();
  std::vector<std::string> expected = {"buildctl",
                                       "--addr",
                                       "tcp://10.0.0.5:1234",
                                       "build",
                                       "--frontend",
                                       "dockerfile.v0",
                                       "--local",
                                       "context=/c",
                                       "--local",
                                       "dockerfile=/c/stages",
                                       "--opt",
                                       "filename=work.Dockerfile",
                                       "--opt",
                                       "target=work",
                                       "--opt",
                                       "build-arg:GREETING=hi",
                                       "--opt",
                                       "build-arg:B=x y",
                                       "--oci-layout",
                                       "base=" + (dir.path() / "oci/base").string(),
                                       "--opt",
                                       "context:base=oci-layout://base@" + digest,
                                       "--local",
                                       "kiln-tools=/r/tools",
                                       "--opt",
                                       "context:kiln-tools=local:kiln-tools",
                                       "--secret",
                                       "id=token,env=TOKEN",
                                       "--secret",
                                       "id=netrc,src=/home/u/.netrc",
                                       "--progress=plain",
                                       "--import-cache",
                                       "type=local,src=" + slug,
                                       "--import-cache",
                                       "type=registry,ref=reg.example/hello/work:cache",
                                       "--export-cache",
                                       "type=local,dest=" + slug + ",mode=max",
                                       "--export-cache",
                                       "type=registry,ref=reg.example/hello/work:cache,mode=max",
                                       "--export-cache",
                                       "type=inline",
                                       "--output",
                                       "type=oci,dest=" + (dir.path() / "oci/work").string() +
                                           ",tar=false",
                                       "--metadata-file",
                                       (dir.path() / "oci/work.metadata.json").string()};
  EXPECT_EQ(engine.build_argv(request), expected);

  // After import flakes: every registry-facing argument goes, the local tier stays.
  request.drop_registry_cache = true;
  std::vector<std::string> dropped;
  for (const auto& word : engine.build_argv(request)) {
    if (word.find("reg.example") != std::string::npos || word == "type=inline") {
      dropped.push_back(word);
    }
  }
  EXPECT_TRUE(dropped.empty());
  auto argv = engine.build_argv(request);
  EXPECT_NE(std::find(argv.begin(), argv.end(), "type=local,src=" + slug), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "type=local,dest=" + slug + ",mode=max"),
            argv.end());
}

TEST(BuildkitEngine, AnEmptyOrAbsentSlugIsACleanMissNotAnImport) {
  TempDir dir;
  BuildkitEngine engine({});
  BuildRequest request = minimal_request(dir.path());
  request.cache_slug = dir.path() / "cache/slug";
  auto count = [&](const std::string& prefix) {
    auto argv = engine.build_argv(request);
    return std::count_if(argv.begin(), argv.end(),
                         [&](const std::string& w) { return w.starts_with(prefix); });
  };
  EXPECT_EQ(count("type=local,src="), 0); // absent
  fs::create_directories(request.cache_slug);
  std::ofstream(request.cache_slug / "index.json").close();
  EXPECT_EQ(count("type=local,src="), 0);  // empty index.json
  EXPECT_EQ(count("type=local,dest="), 1); // the export still lands
  ASSERT_TRUE(write_file_atomic(request.cache_slug / "index.json", "{\"manifests\":[]}"));
  EXPECT_EQ(count("type=local,src="), 1);
  request.export_local = false;
  EXPECT_EQ(count("type=local,dest="), 0);
}

TEST(BuildkitEngine, RegistryHandoffPushesAndBindsDockerImageByDigest) {
  TempDir dir;
  fs::create_directories(dir.path() / "oci");
  ASSERT_TRUE(
      write_file_atomic(dir.path() / "oci/base.metadata.json", fixture("metadata-work.json")));
  BuildkitEngine engine({});
  BuildRequest request = minimal_request(dir.path());
  request.pushed = "reg.example:5000/team/hello-work";
  request.contexts = {{"base", "localhost/hello-base:latest", dir.path() / "oci/base",
                       dir.path() / "oci/base.metadata.json", "reg.example:5000/team/hello-base"}};
  auto argv = engine.build_argv(request);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--oci-layout"), 0);
  EXPECT_NE(std::find(argv.begin(), argv.end(),
                      "context:base=docker-image://reg.example:5000/team/hello-base@sha256:"
                      "496b2655b00f977776f2ea5b58703904e6776d9e775185154bef6adea9c44c93"),
            argv.end());
  // Pushed by digest: no tag in the registry moves before the publish transaction says.
  EXPECT_NE(std::find(argv.begin(), argv.end(),
                      "type=image,name=reg.example:5000/team/hello-work,push=true,"
                      "push-by-digest=true"),
            argv.end());
  EXPECT_TRUE(engine.has_stage_image(request.contexts[0]));
}

TEST(BuildkitEngine, AddressPrefersBuildkitHostOverTheChainFile) {
  ::setenv("BUILDKIT_HOST", "tcp://192.0.2.1:1234", 1);
  BuildkitAddress from_env = resolve_buildkit_address("unix:///chain.sock");
  ::unsetenv("BUILDKIT_HOST");
  EXPECT_EQ(from_env.address, "tcp://192.0.2.1:1234");
  EXPECT_EQ(from_env.source, "BUILDKIT_HOST");
  EXPECT_EQ(resolve_buildkit_address("unix:///chain.sock").source, "[engine.buildkit] host");
  EXPECT_EQ(resolve_buildkit_address("").address, "");
  EXPECT_EQ(BuildkitEngine({}).command({"du"}), (std::vector<std::string>{"buildctl", "du"}));
}

TEST(BuildkitEngine, VersionsCompareByNumber) {
  EXPECT_EQ(BuildkitVersion::parse("v0.11.6"), (BuildkitVersion{0, 11, 6}));
  EXPECT_EQ(BuildkitVersion::parse("v0.12.0-rc1"), (BuildkitVersion{0, 12, 0}));
  EXPECT_FALSE(BuildkitVersion::parse("0.11.6"));
  EXPECT_FALSE(BuildkitVersion::parse("v0.11"));
  EXPECT_LT(*BuildkitVersion::parse("v0.9.3"), *BuildkitVersion::parse("v0.11.0"));
}

TEST(BuildkitEngine, AVersionThatNamesNoReleaseIsUnknownNotOld) {
  // What buildctl and buildkitd v0.11.6 built from source without -ldflags print (recorded).
  BuildkitSide client = BuildkitSide::from_probe(fixture("unstamped-version.txt"));
  BuildkitSide daemon = BuildkitSide::from_probe(fixture("unstamped-debug-info.txt"));
  EXPECT_EQ(client.reported, "0.0.0+unknown");
  EXPECT_EQ(daemon.reported, "0.0.0+unknown");
  EXPECT_FALSE(client.release);
  EXPECT_FALSE(daemon.release);
  // A Go pseudo-version of an untagged commit, a bare commit, nothing at all: no release either.
  EXPECT_FALSE(BuildkitVersion::parse("v0.0.0-20230615134547-0123456789ab"));
  EXPECT_FALSE(
      BuildkitSide::from_probe("buildctl github.com/moby/buildkit 1c3e5ad8f 1c3e5ad8f\n").release);
  EXPECT_EQ(BuildkitSide::from_probe("buildctl\n").reported, "");
  // A dev build names its release, as BuildKit's own user agent reads it (v0.12-dev).
  BuildkitSide dev = BuildkitSide::from_probe(
      "BuildKit: github.com/moby/buildkit v0.12.0-rc1-23-g1c3e5ad8f.m 1c3e5ad8f\n");
  EXPECT_EQ(dev.reported, "v0.12.0-rc1-23-g1c3e5ad8f.m");
  EXPECT_EQ(dev.release, (BuildkitVersion{0, 12, 0}));
  // A stamped release, as recorded from v0.11.6.
  EXPECT_EQ(BuildkitSide::from_probe("buildctl github.com/moby/buildkit v0.11.6 "
                                     "2951a28cd7085eb18979b1f710678623d94ed578\n")
                .release,
            (BuildkitVersion{0, 11, 6}));

  // What the run records reads back as it was.
  BuildkitVersions versions{daemon, dev};
  EXPECT_EQ(versions.text(), "buildkitd 0.0.0+unknown, buildctl v0.12.0-rc1-23-g1c3e5ad8f.m");
  BuildkitVersions back = BuildkitVersions::parse(versions.text());
  EXPECT_EQ(back.daemon.reported, "0.0.0+unknown");
  EXPECT_FALSE(back.daemon.release);
  EXPECT_EQ(back.client.release, (BuildkitVersion{0, 12, 0}));
  EXPECT_EQ((BuildkitVersions{BuildkitSide::without_info(), {}}).text(),
            "buildkitd older than v0.11 (no debug info), buildctl unknown");
  EXPECT_EQ(BuildkitVersions::parse("buildkitd older than v0.11 (no debug info), buildctl v0.10.6")
                .daemon.before,
            (BuildkitVersion{0, 11, 0}));
}

/// A request that needs every option of kiln's stage handoff without a registry.
BuildRequest handoff_request() {
  BuildRequest request = minimal_request("/r");
  request.contexts = {{"base", "", "/r/oci/base", "/r/oci/base.metadata.json", ""}};
  return request;
}

TEST(BuildkitEngine, AnUnknownVersionWarnsAndGoesOn) {
  BuildkitEngine engine({});
  std::string unstamped = "buildkitd 0.0.0+unknown, buildctl 0.0.0+unknown";
  EXPECT_TRUE(engine.unsupported({handoff_request()}, unstamped).empty());
  auto warnings = engine.version_warnings({handoff_request()}, unstamped);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0],
            "buildkitd at unix:///run/buildkit/buildkitd.sock (buildctl's default) reports "
            "version 0.0.0+unknown, which names no BuildKit release (what a build without a "
            "version stamp reports); kiln cannot check what this run needs from it: named build "
            "contexts (--opt context:<name>=...) from v0.10, oci-layout:// contexts (stage "
            "handoff without a registry) from v0.11; going on: should buildkitd lack one, the "
            "stage fails with BuildKit's own reason");
  EXPECT_EQ(warnings[1],
            "buildctl at PATH reports version 0.0.0+unknown, which names no BuildKit release "
            "(what a build without a version stamp reports); kiln cannot check what this run "
            "needs from it: --metadata-file (the built image's digest) from v0.9, --oci-layout "
            "(stage handoff without a registry) from v0.11; going on: should buildctl reject a "
            "flag, the stage's failure names it and the version it needs");

  // One side known and new enough: only the other is warned about.
  auto one = engine.version_warnings({handoff_request()}, "buildkitd v0.11.6, buildctl 1c3e5ad8f");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0].starts_with("buildctl at PATH reports version 1c3e5ad8f, which names no "
                                 "BuildKit release; kiln cannot check"))
      << one[0];
  // A dev build is checked as its release: nothing to warn about, nothing refused.
  std::string dev = "buildkitd v0.12.0-rc1-23-g1c3e5ad8f.m, buildctl v0.12.0-rc1-23-g1c3e5ad8f.m";
  EXPECT_TRUE(engine.version_warnings({handoff_request()}, dev).empty());
  EXPECT_TRUE(engine.unsupported({handoff_request()}, dev).empty());
  // A known release warns about nothing.
  EXPECT_TRUE(
      engine.version_warnings({handoff_request()}, "buildkitd v0.11.6, buildctl v0.11.6").empty());
}

TEST(BuildkitEngine, AReleaseTooOldIsStillRefusedWithTheReason) {
  BuildkitEngine engine({});
  // A dev build of an old release is that old release.
  auto problems =
      engine.unsupported({handoff_request()}, "buildkitd v0.11.6, buildctl v0.10.6-12-g0123456.m");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "stage 'work' uses --oci-layout (stage handoff without a registry), which needs "
            "BuildKit v0.11 or newer, but buildctl at PATH is v0.10.6-12-g0123456.m; install "
            "buildctl v0.11 or newer, or name a registry in [chain] registry to hand stages over "
            "by push");
  EXPECT_TRUE(engine
                  .version_warnings({handoff_request()},
                                    "buildkitd v0.11.6, buildctl v0.10.6-12-g0123456.m")
                  .empty());

  // A daemon without debug info is older than v0.11: refused what needs v0.11, and what it
  // needs from before v0.11 cannot be checked.
  std::string without_info = "buildkitd older than v0.11 (no debug info), buildctl v0.11.6";
  problems = engine.unsupported({handoff_request()}, without_info);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "stage 'work' uses oci-layout:// contexts (stage handoff without a registry), which "
            "needs BuildKit v0.11 or newer, but buildkitd at unix:///run/buildkit/buildkitd.sock "
            "(buildctl's default) is older than v0.11 (no debug info); upgrade buildkitd to "
            "v0.11 or newer, or name a registry in [chain] registry to hand stages over by push");
  auto warnings = engine.version_warnings({handoff_request()}, without_info);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(warnings[0].starts_with(
      "buildkitd at unix:///run/buildkit/buildkitd.sock (buildctl's default) is older than "
      "v0.11 (no debug info); kiln cannot check what this run needs from it: named build "
      "contexts"))
      << warnings[0];
}

TEST(BuildkitEngine, UnsupportedOptionsNameTheOptionTheVersionAndTheWayOut) {
  BuildkitEngine engine({"tcp://10.0.0.5:1234", "[engine.buildkit] host"});
  BuildRequest request = minimal_request("/r");
  request.contexts = {{"base", "", "/r/oci/base", "/r/oci/base.metadata.json", ""}};
  request.cache_to = {"type=registry,ref=r/x:c,mode=max,image-manifest=true"};
  EXPECT_TRUE(engine.unsupported({request}, "buildkitd v0.12.1, buildctl v0.12.1").empty());
  auto problems = engine.unsupported({request}, "buildkitd v0.11.6, buildctl v0.10.6");
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0],
            "stage 'work' uses --oci-layout (stage handoff without a registry), which needs "
            "BuildKit v0.11 or newer, but buildctl at PATH is v0.10.6; install buildctl v0.11 "
            "or newer, or name a registry in [chain] registry to hand stages over by push");
  EXPECT_EQ(problems[1],
            "stage 'work' uses the cache attribute image-manifest=, which needs BuildKit v0.12 "
            "or newer, but buildkitd at tcp://10.0.0.5:1234 (from [engine.buildkit] host) is "
            "v0.11.6; upgrade buildkitd to v0.12 or newer, or remove image-manifest= from the "
            "cache spec");
}

TEST(BuildkitEngine, AnUnknownFlagIsExplained) {
  BuildkitEngine engine({});
  EXPECT_EQ(engine.explain_failure({"Incorrect Usage: flag provided but not defined: -oci-layout"}),
            "buildctl does not know --oci-layout: it is older than that option (kiln's stage "
            "handoff needs buildctl v0.11 or newer); install a newer buildctl");
  EXPECT_EQ(engine.explain_failure({"error: failed to solve: exit code: 3"}), "");
}

TEST(BuildkitOutput, RecordedFreshBuildCountsStepsAndVertices) {
  auto output = replay(fixture("build-fresh.stderr"));
  const BuildProgress& p = output->progress();
  EXPECT_EQ(p.steps_run, 4);
  EXPECT_EQ(p.steps_cached, 1);
  EXPECT_EQ(p.vertices, 9);
  EXPECT_EQ(p.vertices_cached, 1);
  EXPECT_EQ(output->finished_build_stages(), (std::vector<std::string>{"base", "work"}));
}

// A stage whose steps disagree on their count cannot be known to have finished. Each stage's
// record was sized by the first count seen, and step 900 of 999 wrote past it.
TEST(BuildkitOutput, AStageWhoseStepCountsDisagreeIsNotFinished) {
  auto output = replay("#1 [a 1/1] RUN x\n#1 DONE 0.1s\n\n"
                       "#2 [a 900/999] RUN y\n#2 DONE 0.1s\n\n"
                       "#3 [b 1/2] RUN x\n#3 DONE 0.1s\n\n"
                       "#4 [b 2/2] RUN y\n#4 CACHED\n");
  EXPECT_EQ(output->finished_build_stages(), (std::vector<std::string>{"b"}));
}

TEST(BuildkitOutput, RecordedCachedBuildServesEveryStep) {
  auto output = replay(fixture("build-cached.stderr"));
  EXPECT_EQ(output->progress().steps_run, 4);
  EXPECT_EQ(output->progress().steps_cached, 4);
}

TEST(BuildkitOutput, RunFailureEvidenceIsTheVertexOwnOutputWithoutTheCommand) {
  auto output = replay(fixture("build-fail-run.stderr"));
  EXPECT_EQ(output->evidence(),
            (Tail{"error: compile failed in foo.c", "about to fail",
                  "ERROR: process did not complete successfully: exit code: 3",
                  "error: failed to solve: process did not complete successfully: exit code: 3"}));
  EXPECT_EQ(output->failed_build_stage(), "broken");
  EXPECT_EQ(output->finished_build_stages(), (std::vector<std::string>{"base", "work"}));
}

TEST(BuildkitOutput, EngineEvidenceLeavesOutWhatARunStepPrinted) {
  auto output = replay(fixture("build-fail-run.stderr"));
  EXPECT_EQ(output->engine_evidence(),
            (Tail{"ERROR: process did not complete successfully: exit code: 3",
                  "error: failed to solve: process did not complete successfully: exit code: 3"}));
  // A vertex that is no RUN step (a cache import) is the engine's own work: its lines stay.
  auto import = replay(fixture("build-import-registry-unreachable.stderr"));
  EXPECT_EQ(import->engine_evidence(), import->evidence());
}

TEST(BuildkitOutput, ALostDaemonIsTheWorkerNotTheBuild) {
  // Killed, stopped (it cancels its builds), restarted too late for the build, and not there at
  // all: the worker failed, and the attempt is retried even when it failed identically.
  for (const char* name :
       {"build-daemon-killed", "build-daemon-terminated", "build-daemon-restarted",
        "build-no-daemon", "build-refused", "build-tcp-refused"}) {
    auto output = replay(fixture(std::string(name) + ".stderr"));
    Tail evidence = output->evidence();
    Tail engine = output->engine_evidence();
    FailureVerdict first =
        classify_failure(evidence, std::nullopt, 1, 3, builtin_transient_classes(), &engine);
    EXPECT_EQ(first.class_name, k_worker_lost_class) << name;
    EXPECT_EQ(first.verdict, Verdict::retry) << name;
    FailureVerdict again =
        classify_failure(evidence, evidence, 2, 3, builtin_transient_classes(), &engine);
    EXPECT_EQ(again.verdict, Verdict::retry) << name << ": " << again.reason;
  }
  // The client's own cancel (buildctl stopped while the daemon was frozen) is not the daemon's:
  // kiln's stops never reach classification, and nothing else names the worker.
  auto stopped = replay(fixture("build-daemon-stopped.stderr"));
  Tail engine = stopped->engine_evidence();
  EXPECT_NE(classify_failure(stopped->evidence(), std::nullopt, 1, 3, builtin_transient_classes(),
                             &engine)
                .class_name,
            k_worker_lost_class);
  // A RUN step that prints the daemon's words and fails is the step's failure.
  auto echoed =
      replay("#6 [slow 1/1] RUN ./test\n"
             "#6 0.2 rpc error: code = Unavailable desc = error reading from server: EOF\n"
             "#6 ERROR: process \"/bin/sh -c ./test\" did not complete successfully: "
             "exit code: 1\n"
             "error: failed to solve: process \"/bin/sh -c ./test\" did not complete "
             "successfully: exit code: 1\n");
  Tail echoed_engine = echoed->engine_evidence();
  EXPECT_EQ(classify_failure(echoed->evidence(), std::nullopt, 1, 3, builtin_transient_classes(),
                             &echoed_engine)
                .verdict,
            Verdict::permanent);
}

TEST(BuildkitOutput, AnImportThatCouldNotConnectIsNotTheFailure) {
  // The registry import failed (an ERROR vertex) but the build went on; a later failure's
  // evidence is the later vertex, and a build with no solve error has none.
  auto output = replay(fixture("build-import-registry-unreachable.stderr"));
  Tail evidence = output->evidence();
  ASSERT_FALSE(evidence.empty());
  EXPECT_EQ(evidence.back().rfind("ERROR: failed to configure registry cache importer", 0), 0u);
  auto failed = replay(fixture("build-export-registry-unreachable.stderr"));
  EXPECT_EQ(failed->evidence().back(),
            "error: failed to solve: error writing layer blob: failed to do request: Head "
            "\"http://127.0.0.1:1/v2/nothing/blobs/"
            "sha256:3907e4cb0dc8b429290241a1d3855c5e0e6b7cac4ef49cbdd6082b550fe509f8\": dial "
            "tcp 127.0.0.1:1: connect: connection refused");
}

TEST(BuildkitOutput, AFailureOutsideAnyVertexIsStillEvidence) {
  auto output = replay(fixture("build-fail-target.stderr"));
  EXPECT_EQ(output->evidence(),
            (Tail{"error: failed to solve: target stage nosuch could not be found"}));
}

TEST(BuildkitOutput, QuotedCommandsAreLeftOut) {
  EXPECT_EQ(without_quoted_command("process \"/bin/sh -c echo 'connection reset by peer'\" did "
                                   "not complete successfully: exit code: 1"),
            "process did not complete successfully: exit code: 1");
  EXPECT_EQ(without_quoted_command("no quote here"), "no quote here");
}

} // namespace
TEST(BuildkitEngine, ALanesDaemonIsProbedWithTheLanesTlsFiles) {
  BuildRequest request;
  request.host = "tcp://arm-builder.example:1234";
  request.tls_ca = "/tls/ca.pem";
  request.tls_cert = "/tls/cert.pem";
  request.tls_key = "/tls/key.pem";
  std::unique_ptr<Engine> there = BuildkitEngine({}).on_host(request);
  auto* daemon = dynamic_cast<BuildkitEngine*>(there.get());
  ASSERT_NE(daemon, nullptr);
  // The probe connects as the lane's builds do: an mTLS daemon refuses a probe without them.
  EXPECT_EQ(daemon->command({"debug", "info"}),
            (std::vector<std::string>{"buildctl", "--addr", "tcp://arm-builder.example:1234",
                                      "--tlscacert", "/tls/ca.pem", "--tlscert", "/tls/cert.pem",
                                      "--tlskey", "/tls/key.pem", "debug", "info"}));
  std::vector<std::string> argv = BuildkitEngine({}).build_argv(request);
  EXPECT_EQ(std::vector<std::string>(argv.begin(), argv.begin() + 9), daemon->command({}));
}

} // namespace kiln
