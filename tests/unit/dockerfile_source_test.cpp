// What a run asks of a stage's Dockerfile, answered from its one parse: the file loaded once,
// its named stages, the secrets its RUN steps mount and the images its target reads.
#include "dockerfile/source.h"

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <gtest/gtest.h>

#include "dockerfile/external_refs.h"
#include "dockerfile/mounts.h"
#include "dockerfile/stage_names.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

Dockerfile parsed(std::string_view text) {
  auto df = parse_dockerfile(text);
  EXPECT_TRUE(df) << df.error().message;
  return df ? *df : Dockerfile{};
}

class LoadDockerfile : public ::testing::Test {
protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("kiln-dockerfile-source-" + std::to_string(::getpid()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }
  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(m_dir / name, std::ios::binary) << text;
    return m_dir / name;
  }
  fs::path m_dir;
};

TEST_F(LoadDockerfile, KeepsTheTextAndItsParse) {
  std::string text = "FROM scratch AS base\nARG VERSION\n";
  auto file = write("Dockerfile", text);
  auto source = load_dockerfile(file);
  ASSERT_TRUE(source) << source.error().message;
  EXPECT_EQ((*source)->path, file);
  EXPECT_EQ((*source)->text, text);
  ASSERT_EQ((*source)->parsed.instructions.size(), 2u);
  EXPECT_EQ((*source)->parsed.instructions[1].line_offset, 21u);
}

TEST_F(LoadDockerfile, AParseErrorNamesFileLineAndColumn) {
  auto file = write("Dockerfile", "FROM scratch\n  FOO bar\n");
  auto source = load_dockerfile(file);
  ASSERT_FALSE(source);
  EXPECT_EQ(source.error().pos.file, file.string());
  EXPECT_EQ(source.error().pos.line, 2);
  EXPECT_EQ(source.error().pos.column, 3);
  EXPECT_EQ(source.error().message, "unknown instruction: FOO");
}

TEST_F(LoadDockerfile, AnUnreadableFileSaysWhyWithoutAPosition) {
  auto source = load_dockerfile(m_dir / "absent");
  ASSERT_FALSE(source);
  EXPECT_EQ(source.error().pos.line, 0);
  EXPECT_EQ(source.error().message,
            "cannot read " + (m_dir / "absent").string() + ": No such file or directory");
}

TEST(NamedStages, LowerCasedInFileOrder) {
  EXPECT_EQ(named_stages(parsed("FROM alpine AS Build\n"
                                "FROM build\n"
                                "FROM --platform=$BUILDPLATFORM scratch as out\n"
                                "LABEL note=\"FROM x AS fake\"\n")),
            (std::vector<std::string>{"build", "out"}));
}

TEST(MountsSecret, ById) {
  auto df = parsed("FROM scratch\n"
                   "RUN --mount=type=cache,target=/c \\\n"
                   "    --mount=type=secret,id=kiln-budget \\\n"
                   "    . /run/secrets/kiln-budget && make\n");
  EXPECT_TRUE(mounts_secret(df, "kiln-budget"));
  EXPECT_FALSE(mounts_secret(df, "kiln"));
}

TEST(MountsSecret, ByTheTargetsNameWhenNoIdIsGiven) {
  EXPECT_TRUE(
      mounts_secret(parsed("FROM scratch\n"
                           "RUN --mount=TYPE=Secret,target=/run/secrets/kiln-budget true\n"),
                    "kiln-budget"));
  EXPECT_TRUE(mounts_secret(parsed("FROM scratch\nRUN --mount=type=secret,dst=kiln-budget true\n"),
                            "kiln-budget"));
}

TEST(MountsSecret, NamingItIsNotMountingIt) {
  // A comment, a label, a cache mount's id or a script reading the file mount nothing.
  EXPECT_FALSE(mounts_secret(parsed("# reads kiln-budget\n"
                                    "FROM scratch\n"
                                    "LABEL needs=kiln-budget\n"
                                    "RUN --mount=type=cache,id=kiln-budget,target=/c true\n"
                                    "RUN cat /run/secrets/kiln-budget\n"
                                    "ONBUILD RUN --mount=type=secret,id=kiln-budget true\n"),
                             "kiln-budget"));
}

std::vector<std::string> written(const std::vector<ExternalRef>& refs) {
  std::vector<std::string> out;
  for (const auto& ref : refs) {
    out.push_back(ref.written);
  }
  return out;
}

TEST(ExternalRefs, OnlyOfTheStagesTheTargetBuildsOn) {
  auto df = parsed("FROM base AS build\n"
                   "FROM scratch AS tools\n"
                   "COPY --from=toolchain /x /x\n"
                   "FROM build AS out\n"
                   "RUN --mount=from=1,target=/t --mount=type=bind,from=libs,target=/l true\n"
                   "FROM unused\n");
  auto refs = external_refs(df, "OUT", {});
  EXPECT_EQ(written(refs), (std::vector<std::string>{"FROM base", "COPY --from=toolchain",
                                                     "RUN --mount=type=bind,from=libs,target=/l"}));
  ASSERT_EQ(refs.size(), 3u);
  EXPECT_EQ(refs[2].ref, "libs");
  EXPECT_EQ(refs[2].pos.line, 5);
  EXPECT_EQ(refs[2].pos.column, 30);
  EXPECT_EQ(written(external_refs(df, "", {})), (std::vector<std::string>{"FROM unused"}));
  EXPECT_EQ(external_refs(df, "absent", {}).size(), 4u);
}

TEST(ExternalRefs, GlobalArgsExpandInFromButAVariableFromIsLeftOut) {
  auto df = parsed("ARG BASE=base\nFROM ${BASE}\nARG LIBS=libs\nCOPY --from=${LIBS} /x /x\n");
  auto refs = external_refs(df, "", {});
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_EQ(refs[0].ref, "base");
  EXPECT_EQ(refs[0].written, "FROM ${BASE}");
  EXPECT_EQ(external_refs(df, "", {{"BASE", "registry.example/base:1"}})[0].ref,
            "registry.example/base:1");
}

} // namespace
} // namespace kiln
