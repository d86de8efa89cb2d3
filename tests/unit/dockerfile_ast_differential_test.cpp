// npm's dockerfile-ast (the parser behind VS Code's Dockerfile support) as a differential
// oracle for kiln's parser. Its outlines of the golden corpus and of one small case per known
// difference are recorded in tests/fixtures/dockerfile-ast/ (bench/parser_differential.sh
// --record), so this runs without node. kiln must agree with every recording except where
// differences.json documents a class on which BuildKit's rules and dockerfile-ast's differ, and
// there the documented patch must turn dockerfile-ast's outline into kiln's exactly: its "test"
// operations pin what dockerfile-ast says, its replacements what kiln says, and no other field
// may differ. The per-class tests below pin kiln's side on BuildKit's rule directly.
#include "dockerfile/outline.h"
#include "dockerfile/parser.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Names = std::vector<std::string>;

const fs::path k_fixtures = fs::path(KILN_TEST_FIXTURES);
const fs::path k_ast = k_fixtures / "dockerfile-ast";
const fs::path k_cases = k_ast / "cases";

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

json load(const fs::path& file) {
  std::string text = slurp(file);
  EXPECT_FALSE(text.empty()) << file;
  return json::parse(text);
}

const json& differences() {
  static const json k_differences = load(k_ast / "differences.json");
  return k_differences;
}

std::vector<fs::path> dockerfiles(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".Dockerfile") {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// `key` names the file in differences.json: "dockerfile-corpus/<case>" or "cases/<case>".
void expect_documented(const std::string& key, const fs::path& dockerfile, const json& recorded) {
  SCOPED_TRACE(key);
  json kiln = outline_dockerfile(slurp(dockerfile));
  const json& files = differences().at("files");
  if (!files.contains(key)) {
    EXPECT_EQ(recorded, kiln) << "kiln and dockerfile-ast differ where no difference is "
                                 "documented; patch from dockerfile-ast to kiln: "
                              << json::diff(recorded, kiln).dump();
    return;
  }
  const json& patch = files[key].at("patch");
  EXPECT_FALSE(patch.empty());
  EXPECT_NE(recorded, kiln) << "a documented difference that no longer shows";
  json patched;
  try {
    patched = recorded.patch(patch);
  } catch (const json::exception& e) {
    // A failed "test" operation: dockerfile-ast's recording is not what was documented.
    ADD_FAILURE() << "the documented patch does not apply to dockerfile-ast's outline: "
                  << e.what();
    return;
  }
  EXPECT_EQ(patched, kiln) << "kiln differs from dockerfile-ast other than documented; what is "
                              "left: "
                           << json::diff(patched, kiln).dump();
}

TEST(DockerfileAstDifferential, GoldenCorpusAgreesExceptWhereDocumented) {
  json recorded = load(k_ast / "dockerfile-corpus.json");
  auto cases = dockerfiles(k_fixtures / "dockerfile-corpus");
  ASSERT_GE(cases.size(), 35u);
  for (const auto& dockerfile : cases) {
    std::string name = dockerfile.stem().string();
    ASSERT_TRUE(recorded.contains(name))
        << name << ": no dockerfile-ast outline recorded; run bench/parser_differential.sh "
        << "--record BUILD_DIR and document any difference in differences.json";
    expect_documented("dockerfile-corpus/" + name, dockerfile, recorded[name]);
  }
  EXPECT_EQ(recorded.size(), cases.size()) << "an outline recorded for a case that is gone";
}

TEST(DockerfileAstDifferential, EachCaseDiffersOnlyAsDocumented) {
  auto cases = dockerfiles(k_cases);
  ASSERT_FALSE(cases.empty());
  for (const auto& dockerfile : cases) {
    std::string name = dockerfile.stem().string();
    fs::path recorded = k_cases / (name + ".json");
    ASSERT_TRUE(fs::exists(recorded)) << recorded;
    ASSERT_TRUE(differences().at("files").contains("cases/" + name))
        << name << ": a case exists to show one documented difference";
    expect_documented("cases/" + name, dockerfile, load(recorded));
  }
}

TEST(DockerfileAstDifferential, EveryClassHasItsCaseAndEveryEntryItsFile) {
  const json& classes = differences().at("classes");
  const json& files = differences().at("files");
  ASSERT_FALSE(classes.empty());
  for (const auto& [name, info] : classes.items()) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(info.at("why").get<std::string>().empty());
    EXPECT_FALSE(info.at("buildkit").get<std::string>().empty());
    EXPECT_TRUE(fs::exists(k_cases / (name + ".Dockerfile")));
    ASSERT_TRUE(files.contains("cases/" + name));
    EXPECT_EQ(files["cases/" + name].at("classes"), json::array({name}))
        << "a class's own case shows that class alone";
  }
  for (const auto& [key, entry] : files.items()) {
    SCOPED_TRACE(key);
    fs::path dockerfile = key.starts_with("cases/") ? k_ast / (key + ".Dockerfile")
                                                    : k_fixtures / (key + ".Dockerfile");
    EXPECT_TRUE(fs::exists(dockerfile)) << dockerfile;
    ASSERT_FALSE(entry.at("classes").empty());
    for (const auto& cls : entry["classes"]) {
      EXPECT_TRUE(classes.contains(cls.get<std::string>())) << cls;
    }
  }
}

// kiln's side of each class, on BuildKit's rule, read from the parse itself.
Dockerfile parse_case(const std::string& name) {
  auto df = parse_dockerfile(slurp(k_cases / (name + ".Dockerfile")));
  EXPECT_TRUE(df.has_value()) << name;
  return df ? *df : Dockerfile{};
}

TEST(DockerfileAstDifferentialBuildKit, RejectedByBuildkit) {
  auto df = parse_dockerfile(slurp(k_cases / "rejected-by-buildkit.Dockerfile"));
  ASSERT_FALSE(df.has_value());
  EXPECT_EQ(df.error().pos.line, 3);
  EXPECT_EQ(df.error().message, "ENV must have two arguments");
}

TEST(DockerfileAstDifferentialBuildKit, ArgNamesWithoutValues) {
  auto df = parse_case("arg-names-without-values");
  ASSERT_EQ(df.instructions.size(), 4u);
  EXPECT_EQ(df.instructions[1].args, (Names{"TARGETOS", "", "TARGETARCH", ""}));
  EXPECT_EQ(df.instructions[1].arg_has_value, (std::vector<bool>{false, false}));
  EXPECT_EQ(df.instructions[2].args, (Names{"A", "", "B", "2"}));
  EXPECT_EQ(df.instructions[2].arg_has_value, (std::vector<bool>{false, true}));
}

TEST(DockerfileAstDifferentialBuildKit, EscapedEscapeAtEndOfLine) {
  auto df = parse_case("escaped-escape-at-end-of-line");
  ASSERT_EQ(df.instructions.size(), 3u);
  EXPECT_EQ(df.instructions[1].args, (Names{"DIR", "C:\\\\"}));
  EXPECT_EQ(df.instructions[1].end.line, 2);
  EXPECT_EQ(df.instructions[2].keyword, "run");
  EXPECT_EQ(df.instructions[2].start.line, 3);
}

TEST(DockerfileAstDifferentialBuildKit, ContinuationThenNewlineAtEof) {
  auto df = parse_case("continuation-then-newline-at-eof");
  ASSERT_EQ(df.instructions.size(), 2u);
  EXPECT_EQ(df.instructions[1].start.line, 2);
  EXPECT_EQ(df.instructions[1].end.line, 2);
  EXPECT_EQ(df.instructions[1].args, Names{"echo last"});
}

TEST(DockerfileAstDifferentialBuildKit, FlagsOnAnyInstruction) {
  auto df = parse_case("flags-on-any-instruction");
  ASSERT_EQ(df.instructions.size(), 2u);
  const auto& cmd = df.instructions[1];
  ASSERT_EQ(cmd.flags.size(), 1u);
  EXPECT_EQ(cmd.flags[0].name, "doit");
  EXPECT_EQ(cmd.flags[0].value, "");
  EXPECT_TRUE(cmd.json_form);
  EXPECT_EQ(cmd.args, (Names{"a", "b"}));
}

TEST(DockerfileAstDifferentialBuildKit, DoubleDashEndsFlags) {
  auto df = parse_case("double-dash-ends-flags");
  ASSERT_EQ(df.instructions.size(), 2u);
  const auto& copy = df.instructions[1];
  ASSERT_EQ(copy.flags.size(), 1u);
  EXPECT_EQ(copy.flags[0].name, "chown");
  EXPECT_EQ(copy.flags[0].value, "1:1");
  EXPECT_EQ(copy.args, Names{"--weird-name /dst"});
}

TEST(DockerfileAstDifferentialBuildKit, QuotedFlags) {
  auto df = parse_case("quoted-flags");
  ASSERT_EQ(df.instructions.size(), 3u);
  ASSERT_EQ(df.instructions[1].flags.size(), 1u);
  EXPECT_EQ(df.instructions[1].flags[0].value, "type=secret,id=tok");
  ASSERT_EQ(df.instructions[2].flags.size(), 1u);
  EXPECT_EQ(df.instructions[2].flags[0].name, "from");
  EXPECT_EQ(df.instructions[2].flags[0].value, "a b");
  EXPECT_EQ(df.instructions[2].args, Names{"src /dst"});
}

TEST(DockerfileAstDifferentialBuildKit, JsonWithTrailingText) {
  auto df = parse_case("json-with-trailing-text");
  ASSERT_EQ(df.instructions.size(), 2u);
  EXPECT_FALSE(df.instructions[1].json_form);
  EXPECT_EQ(df.instructions[1].args, Names{"[\"a\"] extra"});
}

TEST(DockerfileAstDifferentialBuildKit, JsonTrailingComma) {
  auto df = parse_case("json-trailing-comma");
  ASSERT_EQ(df.instructions.size(), 2u);
  EXPECT_FALSE(df.instructions[1].json_form);
  EXPECT_EQ(df.instructions[1].args, Names{"[\"echo\", \"trailing comma\",]"});
}

TEST(DockerfileAstDifferentialBuildKit, HeredocFileDescriptor) {
  auto df = parse_case("heredoc-file-descriptor");
  ASSERT_EQ(df.instructions.size(), 3u);
  const auto& run = df.instructions[1];
  ASSERT_EQ(run.heredocs.size(), 1u);
  EXPECT_EQ(run.heredocs[0].name, "EOF");
  EXPECT_EQ(run.heredocs[0].content, "hello\n");
  EXPECT_EQ(run.end.line, 4);
  EXPECT_EQ(df.instructions[2].start.line, 5);
}

TEST(DockerfileAstDifferentialBuildKit, HeredocPartlyQuotedName) {
  auto df = parse_case("heredoc-partly-quoted-name");
  ASSERT_EQ(df.instructions.size(), 3u);
  const auto& run = df.instructions[1];
  ASSERT_EQ(run.heredocs.size(), 1u);
  EXPECT_EQ(run.heredocs[0].name, "eof");
  EXPECT_FALSE(run.heredocs[0].expand);
  EXPECT_EQ(run.end.line, 4);
  EXPECT_EQ(df.instructions[2].start.line, 5);
}

TEST(DockerfileAstDifferentialBuildKit, HeredocInJsonForm) {
  auto df = parse_case("heredoc-in-json-form");
  ASSERT_EQ(df.instructions.size(), 3u);
  EXPECT_TRUE(df.instructions[1].json_form);
  EXPECT_TRUE(df.instructions[1].heredocs.empty());
  EXPECT_EQ(df.instructions[1].end.line, 2);
  EXPECT_EQ(df.instructions[2].keyword, "user");
}

TEST(DockerfileAstDifferentialBuildKit, HeredocOutsideRunCopyAdd) {
  auto df = parse_case("heredoc-outside-run-copy-add");
  ASSERT_EQ(df.instructions.size(), 3u);
  EXPECT_TRUE(df.instructions[1].heredocs.empty());
  EXPECT_EQ(df.instructions[1].end.line, 2);
  EXPECT_EQ(df.instructions[2].keyword, "env");
}

// Every class above has its test here: a new class needs both.
TEST(DockerfileAstDifferentialBuildKit, EveryClassIsPinned) {
  const Names pinned = {"rejected-by-buildkit",
                        "arg-names-without-values",
                        "escaped-escape-at-end-of-line",
                        "continuation-then-newline-at-eof",
                        "flags-on-any-instruction",
                        "double-dash-ends-flags",
                        "quoted-flags",
                        "json-with-trailing-text",
                        "json-trailing-comma",
                        "heredoc-file-descriptor",
                        "heredoc-partly-quoted-name",
                        "heredoc-in-json-form",
                        "heredoc-outside-run-copy-add"};
  Names documented;
  for (const auto& [name, info] : differences().at("classes").items()) {
    documented.push_back(name);
  }
  std::sort(documented.begin(), documented.end());
  Names sorted = pinned;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(documented, sorted);
}

} // namespace
} // namespace kiln
