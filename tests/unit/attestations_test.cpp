// What a published image carries and how kiln reads it back: redacted commands, the build args
// a history spells out, an inherited run command, the provenance statement, and the check of an
// index's attestations, on composed documents in memory.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dockerfile/parser.h"
#include "driver/attestations.h"
#include "driver/image_gates.h"
#include "driver/shown_command.h"
#include "engine/oci_writer.h"
#include "temp_dir.h"
#include "util/sha256.h"

namespace kiln {
namespace {

using json = nlohmann::json;

const std::string k_token = "ghp_0123456789abcdef0123456789abcdefABCD";

TEST(ShownCommand, ASecretBuildArgIsShownRedactedInEitherEnginesSpelling) {
  KeyValues args = {{"GITHUB_TOKEN", k_token},
                    {"CACHE_URL", "http://ci:s3cret@cache.lan:8080/"},
                    {"DB_PASSWORD", "x"},
                    {"LIB_FLAGS", "-O2"}};
  std::string buildah =
      shown_command({"buildah", "build", "--build-arg", "GITHUB_TOKEN=" + k_token, "--build-arg",
                     "CACHE_URL=http://ci:s3cret@cache.lan:8080/", "--build-arg", "DB_PASSWORD=x",
                     "--build-arg", "LIB_FLAGS=-O2"},
                    args);
  EXPECT_EQ(buildah.find(k_token), std::string::npos) << buildah;
  EXPECT_NE(buildah.find("'GITHUB_TOKEN=<redacted: ghp_… (40 characters)>'"), std::string::npos)
      << buildah;
  EXPECT_NE(buildah.find("'CACHE_URL=http://ci:***@cache.lan:8080/'"), std::string::npos)
      << buildah;
  EXPECT_EQ(buildah.find("s3cret"), std::string::npos) << buildah;
  EXPECT_NE(buildah.find("'DB_PASSWORD=<redacted: (1 characters)>'"), std::string::npos) << buildah;
  EXPECT_NE(buildah.find("LIB_FLAGS=-O2"), std::string::npos) << buildah;
  std::string buildkit =
      shown_command({"buildctl", "build", "--opt", "build-arg:GITHUB_TOKEN=" + k_token}, args);
  EXPECT_EQ(buildkit.find(k_token), std::string::npos) << buildkit;
  // A value equal to a secret's elsewhere in the argv is not a build arg: left as it is.
  EXPECT_NE(shown_command({"echo", k_token}, args).find(k_token), std::string::npos);
}

TEST(HistoryBuildArgs, BothEnginesSpellingsOfARunsArgs) {
  EXPECT_EQ(history_build_args("|2 GITHUB_TOKEN=" + k_token + " OTHER=1 /bin/sh -c true"),
            (std::vector<std::pair<std::string, std::string>>{{"GITHUB_TOKEN", k_token},
                                                              {"OTHER", "1"}}));
  EXPECT_EQ(history_build_args("RUN |1 MIRROR=http://10.0.0.5/ /bin/sh -c make"),
            (std::vector<std::pair<std::string, std::string>>{{"MIRROR", "http://10.0.0.5/"}}));
  EXPECT_TRUE(history_build_args("/bin/sh -c #(nop) ARG GITHUB_TOKEN").empty());
  EXPECT_TRUE(history_build_args("|x A=1 sh").empty());
  EXPECT_TRUE(history_build_args("|3 A=1").size() == 1);
}

TEST(InheritedRunCommand, OnlyACommandNoStageOfTheFileSetsIsInherited) {
  auto parse = [](const std::string& text) {
    auto df = parse_dockerfile(text);
    EXPECT_TRUE(df);
    return *df;
  };
  EXPECT_EQ(inherited_run_command(parse("FROM toolchain\nRUN make\n"), ""), "toolchain");
  EXPECT_FALSE(inherited_run_command(parse("FROM toolchain\nCMD [\"/app\"]\n"), ""));
  // Built FROM a stage of the same file that sets it: the file chose it.
  EXPECT_FALSE(inherited_run_command(
      parse("FROM base AS run\nENTRYPOINT [\"/app\"]\nFROM run AS final\nRUN true\n"), "final"));
  EXPECT_EQ(inherited_run_command(parse("FROM gcc AS build\nRUN make\nFROM build\nRUN x\n"), ""),
            "gcc");
}

/// An index in a layout as kiln publishes one: an image and its attestation manifest.
struct Published {
  testing::TempDir dir;
  std::map<std::string, std::string> blobs; // digest -> bytes
  std::string index;
  std::string image;

  explicit Published(bool with_sbom = true, const std::string& about = "") {
    auto layout = LayoutWriter::create(dir.path());
    auto put = [&](const std::string& bytes, const char* type) {
      auto d = layout->put(bytes, type);
      blobs[d->digest] = bytes;
      return *d;
    };
    Descriptor manifest = put(R"({"schemaVersion":2,"layers":[]})", k_oci_manifest_type);
    manifest.platform = "linux/amd64";
    image = manifest.digest;
    std::string subject = about.empty() ? image : about;
    ProvenanceFacts facts;
    facts.subject_name = "reg/app:1";
    facts.subject_digest = subject;
    facts.build_args = {{"GITHUB_TOKEN", k_token}, {"LIB_FLAGS", "-O2"}};
    facts.materials = {{"stage base", "localhost/base:latest", "sha256:" + std::string(64, 'a')}};
    std::vector<json> statements = {provenance_statement(facts)};
    if (with_sbom) {
      statements.push_back(statement(k_spdx_predicate, "reg/app:1", subject,
                                     {{"spdxVersion", "SPDX-2.3"}, {"packages", json::array()}}));
    }
    auto attestation = write_attestation_manifest(*layout, image, statements);
    for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "blobs/sha256")) {
      std::string digest = "sha256:" + entry.path().filename().string();
      blobs[digest] = *layout->blob(digest);
    }
    index = json({{"schemaVersion", 2},
                  {"mediaType", k_oci_index_type},
                  {"manifests", {manifest.to_json(), attestation->to_json()}}})
                .dump();
  }

  tl::expected<std::vector<PlatformAttestations>, std::string> check() const {
    DigestReader read = [&](const std::string& digest) -> tl::expected<std::string, std::string> {
      auto found = blobs.find(digest);
      if (found == blobs.end()) {
        return tl::unexpected("no blob " + digest);
      }
      return found->second;
    };
    return check_attestations(index, read, read);
  }
};

TEST(Attestations, TheProvenanceNamesItsSubjectAndNeverASecretValue) {
  Published published;
  auto checked = published.check();
  ASSERT_TRUE(checked) << checked.error();
  ASSERT_EQ(checked->size(), 1U);
  EXPECT_TRUE((*checked)[0].problems.empty());
  EXPECT_EQ((*checked)[0].platform, "linux/amd64");
  EXPECT_EQ((*checked)[0].dependencies, 1);
  EXPECT_EQ((*checked)[0].packages, 0);
  for (const auto& [digest, bytes] : published.blobs) {
    EXPECT_EQ(bytes.find(k_token), std::string::npos) << digest;
    EXPECT_EQ(sha256_digest(bytes), digest) << "a blob is named by its own hash";
  }
}

TEST(Attestations, WhatAPlatformLacksIsItsProblem) {
  auto no_sbom = Published(false).check();
  ASSERT_TRUE(no_sbom);
  EXPECT_EQ((*no_sbom)[0].problems,
            std::vector<std::string>{"no SPDX 2.3 SBOM statement about it"});
  auto elsewhere = Published(true, "sha256:" + std::string(64, 'b')).check();
  ASSERT_TRUE(elsewhere);
  ASSERT_EQ((*elsewhere)[0].problems.size(), 4U);
  EXPECT_EQ((*elsewhere)[0].problems[0],
            "its provenance is about sha256:" + std::string(64, 'b') + ", not this image");
  Published lost;
  json index = json::parse(lost.index);
  index["manifests"].erase(1);
  lost.index = index.dump();
  auto missing = lost.check();
  ASSERT_TRUE(missing);
  EXPECT_EQ((*missing)[0].problems,
            std::vector<std::string>{"no attestation manifest refers to it"});
  lost.index = "{}";
  EXPECT_FALSE(lost.check());
}

TEST(Attestations, AnIndexAsTheRegistryServedItVerifies) {
  const std::filesystem::path folder =
      std::filesystem::path(KILN_TEST_FIXTURES) / "attestations" / "published";
  auto file = [&](const std::string& name) -> tl::expected<std::string, std::string> {
    std::ifstream in(folder / name, std::ios::binary);
    if (!in) {
      return tl::unexpected("no " + name);
    }
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  DigestReader read = [&](const std::string& digest) {
    std::string name = digest;
    std::replace(name.begin(), name.end(), ':', '-');
    return file(name);
  };
  auto checked = check_attestations(*file("index"), read, read);
  ASSERT_TRUE(checked) << checked.error();
  ASSERT_EQ(checked->size(), 1U);
  const PlatformAttestations& amd64 = (*checked)[0];
  EXPECT_TRUE(amd64.problems.empty());
  EXPECT_EQ(amd64.platform, "linux/amd64");
  EXPECT_EQ(amd64.digest,
            "sha256:8edf082666164ddbc3ec62712563def3a5d85436a5d723b1ab763b0967b681b7");
  EXPECT_EQ(amd64.dependencies,
            7); // four Dockerfiles (its own, its three parents') and three images
}

} // namespace
} // namespace kiln
