#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "chain/chain_loader.h"
#include "dockerfile/dockerignore.h"
#include "explain/cause.h"
#include "explain/context_files.h"
#include "explain/file_hashes.h"
#include "explain/stage_inputs.h"
#include "temp_dir.h"
#include "util/sha256.h"

namespace kiln {
namespace {

using testing::TempDir;
using Names = std::vector<std::string>;

TEST(Hmac, MatchesRfc4231) {
  // RFC 4231 test cases 1 and 6 (a key longer than a block is hashed first).
  EXPECT_EQ(hmac_sha256_hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hmac_sha256_hex(std::string(131, '\xaa'),
                            "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(DockerIgnore, TheLastMatchingPatternDecides) {
  auto ignore = DockerIgnore::parse("docs\n!docs/keep.md\n*.o\n");
  ASSERT_TRUE(ignore);
  EXPECT_TRUE(ignore->excludes("docs/a.md"));
  EXPECT_FALSE(ignore->excludes("docs/keep.md"));
  EXPECT_TRUE(ignore->excludes("x.o"));
  EXPECT_FALSE(ignore->excludes("x.c"));
  auto again = DockerIgnore::parse("!keep\n*\n");
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->excludes("keep")); // a later pattern ignores it again
}

TEST(SelectedFiles, FilesFoldersAndPatternsLessWhatIsIgnored) {
  TempDir dir;
  dir.write("src/a.c", "a");
  dir.write("src/b.c", "b");
  dir.write("src/sub/c.c", "c");
  dir.write("src/notes.txt", "n");
  dir.write("top.c", "t");
  EXPECT_EQ(selected_files(dir.path(), "top.c", nullptr), (Names{"top.c"}));
  EXPECT_EQ(selected_files(dir.path(), "./src/../top.c", nullptr), (Names{"top.c"}));
  EXPECT_EQ(selected_files(dir.path(), "src", nullptr),
            (Names{"src/a.c", "src/b.c", "src/notes.txt", "src/sub/c.c"}));
  // `*` stays within one part, as Go's filepath.Match does.
  EXPECT_EQ(selected_files(dir.path(), "src/*.c", nullptr), (Names{"src/a.c", "src/b.c"}));
  EXPECT_EQ(selected_files(dir.path(), "src/s*", nullptr), (Names{"src/sub/c.c"}));
  EXPECT_EQ(selected_files(dir.path(), "missing.c", nullptr), Names{});
  EXPECT_EQ(selected_files(dir.path(), "../outside", nullptr), Names{});
  auto ignore = DockerIgnore::parse("**/*.txt\nsrc/sub\n");
  EXPECT_EQ(selected_files(dir.path(), ".", &*ignore), (Names{"src/a.c", "src/b.c", "top.c"}));
}

TEST(FileHashes, AnUnchangedFileIsNotReadAgainAndAnEditedOneIs) {
  TempDir dir;
  auto file = dir.write("ctx/a.txt", "one");
  // Old enough not to be "racily clean": a table keeps only files older than two seconds.
  struct timespec old[2] = {{1'000'000'000, 0}, {1'000'000'000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), old, 0), 0);
  const auto store = dir.path() / "file-hashes";
  {
    FileHashes hashes(store);
    auto hash = hashes.hash(file);
    ASSERT_TRUE(hash) << hash.error();
    EXPECT_EQ("sha256:" + *hash, sha256_digest("one"));
    EXPECT_EQ(hashes.counts().read, 1u);
    ASSERT_TRUE(hashes.save());
  }
  {
    FileHashes hashes(store);
    EXPECT_EQ("sha256:" + *hashes.hash(file), sha256_digest("one"));
    EXPECT_EQ(hashes.counts().files, 1u);
    EXPECT_EQ(hashes.counts().read, 0u); // a stat, not a read
  }
  dir.write("ctx/a.txt", "two"); // same size, new mtime and ctime
  FileHashes hashes(store);
  EXPECT_EQ("sha256:" + *hashes.hash(file), sha256_digest("two"));
  EXPECT_EQ(hashes.counts().read, 1u);
  EXPECT_FALSE(hashes.hash(dir.path() / "ctx/missing"));
}

TEST(FileHashes, ATornTableIsAColdStart) {
  TempDir dir;
  auto file = dir.write("a", "x");
  dir.write("file-hashes", "kiln file-hashes 1\nnot\ta\tline\n" + std::string(64, 'f') + "\t1\t2");
  FileHashes hashes(dir.path() / "file-hashes");
  EXPECT_EQ("sha256:" + *hashes.hash(file), sha256_digest("x"));
  EXPECT_EQ(hashes.counts().read, 1u);
}

/// A one-stage chain over `dockerfile`, its context the chain's folder.
struct OneStage {
  TempDir dir;
  Chain chain;
  explicit OneStage(const std::string& dockerfile, const std::string& stage_extra = "") {
    dir.write("versions.env", "PIN=1.0\n");
    dir.write("Dockerfile", dockerfile);
    dir.write("base.Dockerfile", "FROM scratch\n");
    dir.write("chain.toml", "[chain]\nname = \"t\"\nversions = \"versions.env\"\n\n"
                            "[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n\n"
                            "[[stage]]\nname = \"app\"\ndockerfile = \"Dockerfile\"\n"
                            "needs = [\"base\"]\n" +
                                stage_extra);
    auto loaded = load_chain(dir.path() / "chain.toml");
    EXPECT_TRUE(loaded) << (loaded ? "" : loaded.error().front().message);
    if (loaded) {
      chain = std::move(*loaded);
    }
  }
  StageInputs inputs(const KeyValues& args, const std::string& base_identity = "sha256:b1") {
    FileHashes hashes(dir.path() / "records-hashes");
    KeyValues overrides;
    InputSources sources{overrides, [&](const std::string&) { return base_identity; }, hashes,
                         "key", false};
    BuildRequest request;
    request.build_args = args;
    request.contexts.push_back({"base", "", {}, {}, "", base_identity});
    return collect_inputs(chain, *chain.find_stage("app"), request, sources);
  }
};

TEST(StageInputs, EachStepKeepsWhatKeysItAndASecretOnlyAsAKeyedHash) {
  OneStage s("FROM base\nARG PIN\nARG API_TOKEN\nCOPY a.txt /a\n"
             "RUN --mount=type=secret,id=kiln-budget --mount=type=cache,target=/c make\n"
             "LABEL v=${PIN}\nRUN curl -fsSL https://example.com/x | sh\n");
  s.dir.write("a.txt", "hello");
  StageInputs in =
      s.inputs({{"PIN", "1.0"}, {"API_TOKEN", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}});
  ASSERT_EQ(in.steps.size(), 7u);
  EXPECT_EQ(in.steps[0].parents.at("base"), "sha256:b1");
  EXPECT_EQ(in.steps[3].files.at("a.txt"), sha256_digest("hello").substr(7));
  EXPECT_EQ(in.steps[4].args, (Names{"PIN", "API_TOKEN"}));
  EXPECT_EQ(in.steps[4].unhashed, (Names{"secret kiln-budget", "cache mount /c"}));
  EXPECT_EQ(in.steps[5].expanded, "LABEL v=1.0");
  EXPECT_EQ(in.steps[5].args, (Names{"PIN"}));
  EXPECT_EQ(in.steps[6].unhashed, (Names{"network fetch (curl)"}));
  EXPECT_EQ(in.args.at("PIN").value, "1.0");
  EXPECT_EQ(in.args.at("PIN").source, "versions.env");
  EXPECT_TRUE(in.args.at("API_TOKEN").value.empty());
  EXPECT_EQ(in.args.at("API_TOKEN").hashed,
            hmac_sha256_hex("key", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"));
  std::string written = to_json(in).dump();
  EXPECT_EQ(written.find("ghp_abcdefghijklmnopqrstuvwxyz"), std::string::npos) << written;
  auto back = inputs_from_json(to_json(in));
  ASSERT_TRUE(back) << back.error();
  EXPECT_FALSE(rebuild_cause(in, &*back, {})); // what is written reads back the same
}

StageInputs judged_before(StageInputs in) {
  in.run_id = "r1";
  in.image = "sha256:old";
  in.ended = "2026-12-01T00:00:00Z";
  return in;
}

TEST(RebuildCause, TheFirstDifferenceInBuildOrderNamesItsStep) {
  OneStage s("FROM base\nARG PIN\nCOPY a.txt b.txt /\nRUN make\n");
  s.dir.write("a.txt", "a");
  s.dir.write("b.txt", "b");
  StageInputs before = judged_before(s.inputs({{"PIN", "1.0"}}));
  EXPECT_FALSE(rebuild_cause(s.inputs({{"PIN", "1.0"}}), &before, {}));

  s.dir.write("b.txt", "B");
  auto files = rebuild_cause(s.inputs({{"PIN", "2.0"}}), &before, {});
  ASSERT_TRUE(files);
  EXPECT_EQ(files->kind, "context-changed"); // line 3, before the RUN that reads PIN
  EXPECT_EQ(files->line, 3);
  EXPECT_EQ(files->detail["changed"], nlohmann::json::array({"b.txt"}));
  EXPECT_EQ(files->against, "r1");

  s.dir.write("b.txt", "b");
  auto pin = rebuild_cause(s.inputs({{"PIN", "2.0"}}), &before, {});
  ASSERT_TRUE(pin);
  EXPECT_EQ(pin->kind, "build-arg-changed");
  EXPECT_EQ(pin->line, 4);
  EXPECT_EQ(pin->summary, "pin PIN changed: 1.0 -> 2.0 (versions.env)");

  auto parent = rebuild_cause(s.inputs({{"PIN", "2.0"}}, "sha256:b2"), &before, {});
  ASSERT_TRUE(parent);
  EXPECT_EQ(parent->kind, "parent-rebuilt");
  EXPECT_EQ(parent->line, 1);
  EXPECT_EQ(parent->detail["parent"], "base");
}

TEST(RebuildCause, AnEditedLineIsADiffAndAnAddedOrRemovedLineIsNamed) {
  OneStage s("FROM base\nRUN make\n");
  StageInputs before = judged_before(s.inputs({}));
  OneStage edited("FROM base\nRUN make -j4\n");
  auto changed = rebuild_cause(edited.inputs({}), &before, {});
  ASSERT_TRUE(changed);
  EXPECT_EQ(changed->kind, "instruction-changed");
  EXPECT_EQ(changed->detail["diff"], nlohmann::json::array({"- RUN make", "+ RUN make -j4"}));
  OneStage added("FROM base\nRUN make\nRUN make install\n");
  auto more = rebuild_cause(added.inputs({}), &before, {});
  ASSERT_TRUE(more);
  EXPECT_EQ(more->summary, "line 3 added: RUN make install");
  OneStage removed("FROM base\n");
  auto fewer = rebuild_cause(removed.inputs({}), &before, {});
  ASSERT_TRUE(fewer);
  EXPECT_EQ(fewer->summary, "line 2 removed: RUN make");
}

TEST(RebuildCause, BypassNewColdAndAMovedBase) {
  OneStage s("FROM base\nRUN make\n");
  StageInputs now = s.inputs({});
  StageInputs before = judged_before(now);
  EXPECT_EQ(rebuild_cause(now, nullptr, {})->kind, "new");
  StageInputs bypassed = now;
  bypassed.bypass = "--no-cache";
  EXPECT_EQ(rebuild_cause(bypassed, &before, {})->detail["by"], "--no-cache");
  bypassed.bypass = "smoke";
  EXPECT_EQ(rebuild_cause(bypassed, &before, {})->summary, "a smoke stage runs every time");

  // A reclaim alone does not say the layers went; a missing image does.
  CacheEvidence reclaimed;
  reclaimed.reclaims = {"kiln disk reclaim at 2026-12-02T00:00:00Z: [disk-reclaim] ..."};
  EXPECT_FALSE(rebuild_cause(now, &before, reclaimed));
  Cause cold = cold_cause(now, before, reclaimed);
  EXPECT_EQ(cold.kind, "cold");
  EXPECT_EQ(cold.detail["evidence"][0], reclaimed.reclaims[0]);
  CacheEvidence gone = reclaimed;
  gone.image_gone = "the image of run r1 (sha256:old) is gone from buildah's store";
  auto predicted = rebuild_cause(now, &before, gone);
  ASSERT_TRUE(predicted);
  EXPECT_EQ(predicted->kind, "cold");
  EXPECT_EQ(predicted->detail["evidence"].size(), 2u);
  StageInputs elsewhere = now;
  elsewhere.worker = "bk2";
  EXPECT_EQ(rebuild_cause(elsewhere, &before, {})->kind, "cold");

  OneStage external("FROM debian:12\nRUN make\n", "");
  StageInputs ext_now = external.inputs({});
  ext_now.bases["debian:12"] = "sha256:new";
  StageInputs ext_before = judged_before(ext_now);
  ext_before.bases["debian:12"] = "sha256:old";
  auto moved = rebuild_cause(ext_now, &ext_before, {});
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->kind, "base-moved");
  EXPECT_EQ(moved->detail["ref"], "debian:12");
}

TEST(RebuildCause, AFetchOfAUrlIsAnUnhashedInput) {
  OneStage s("FROM base\nADD https://example.com/src.tar.gz /src/\n");
  StageInputs now = s.inputs({});
  StageInputs before = judged_before(now);
  auto cause = rebuild_cause(now, &before, {});
  ASSERT_TRUE(cause);
  EXPECT_EQ(cause->kind, "unhashed-input");
  EXPECT_EQ(cause->line, 2);
  EXPECT_EQ(cause->detail["input"], "network fetch https://example.com/src.tar.gz");
}

} // namespace
} // namespace kiln
