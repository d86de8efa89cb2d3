#include "dockerfile/parser.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Vars = std::map<std::string, std::string>;
using Names = std::vector<std::string>;

const fs::path k_corpus = fs::path(KILN_TEST_FIXTURES) / "dockerfile-corpus";

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Fields absent from a golden instruction are expected empty (or false), so each case only
// spells out what it is about without letting anything else slip through.
void expect_instruction(const Instruction& got, const nlohmann::json& want) {
  EXPECT_EQ(got.keyword, want.at("keyword").get<std::string>());
  EXPECT_EQ(got.args, want.value("args", Names{}));
  EXPECT_EQ(got.json_form, want.value("json_form", false));
  EXPECT_EQ(got.start.line, want.at("start").get<int>());
  EXPECT_EQ(got.end.line, want.at("end").get<int>());
  if (want.contains("column")) {
    EXPECT_EQ(got.start.column, want["column"].get<int>());
  }
  auto flags = want.value("flags", nlohmann::json::array());
  ASSERT_EQ(got.flags.size(), flags.size());
  for (std::size_t i = 0; i < flags.size(); ++i) {
    EXPECT_EQ(got.flags[i].name, flags[i].at("name").get<std::string>());
    EXPECT_EQ(got.flags[i].value, flags[i].at("value").get<std::string>());
    if (flags[i].contains("line")) {
      EXPECT_EQ(got.flags[i].pos.line, flags[i]["line"].get<int>());
      EXPECT_EQ(got.flags[i].pos.column, flags[i]["column"].get<int>());
    }
  }
  auto heredocs = want.value("heredocs", nlohmann::json::array());
  ASSERT_EQ(got.heredocs.size(), heredocs.size());
  for (std::size_t i = 0; i < heredocs.size(); ++i) {
    EXPECT_EQ(got.heredocs[i].name, heredocs[i].at("name").get<std::string>());
    EXPECT_EQ(got.heredocs[i].content, heredocs[i].at("content").get<std::string>());
    EXPECT_EQ(got.heredocs[i].expand, heredocs[i].value("expand", true));
    EXPECT_EQ(got.heredocs[i].chomp, heredocs[i].value("chomp", false));
  }
}

void check_case(const fs::path& dockerfile) {
  fs::path golden = dockerfile;
  golden.replace_extension(".json");
  ASSERT_TRUE(fs::exists(golden)) << golden;
  auto want = nlohmann::json::parse(slurp(golden));
  auto got = parse_dockerfile(slurp(dockerfile));
  if (want.contains("error")) {
    ASSERT_FALSE(got.has_value()) << "expected an error";
    const auto& error = want["error"];
    EXPECT_EQ(got.error().pos.line, error.at("line").get<int>());
    EXPECT_EQ(got.error().pos.column, error.at("column").get<int>());
    EXPECT_NE(got.error().message.find(error.at("message").get<std::string>()), std::string::npos)
        << got.error().message;
    return;
  }
  ASSERT_TRUE(got.has_value()) << got.error().pos.line << ":" << got.error().pos.column << ": "
                               << got.error().message;
  EXPECT_EQ(std::string(1, got->escape), want.value("escape", std::string("\\")));
  EXPECT_EQ(got->syntax, want.value("syntax", std::string()));
  EXPECT_EQ(got->warnings.size(), want.value("warnings", std::size_t{0}));
  const auto& instructions = want.at("instructions");
  ASSERT_EQ(got->instructions.size(), instructions.size());
  for (std::size_t i = 0; i < instructions.size(); ++i) {
    SCOPED_TRACE("instruction " + std::to_string(i));
    expect_instruction(got->instructions[i], instructions[i]);
  }
}

TEST(DockerfileParserCorpus, EveryCaseMatchesItsGolden) {
  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(k_corpus)) {
    if (entry.path().extension() == ".Dockerfile") {
      cases.push_back(entry.path());
    }
  }
  std::sort(cases.begin(), cases.end());
  auto upstream = std::count_if(cases.begin(), cases.end(), [](const fs::path& p) {
    return p.filename().string().starts_with("bk-");
  });
  EXPECT_GE(cases.size() - upstream, 25u);
  EXPECT_GE(upstream, 10);
  for (const auto& dockerfile : cases) {
    SCOPED_TRACE(dockerfile.filename().string());
    check_case(dockerfile);
  }
}

TEST(DockerfileParserCorpus, EveryGoldenHasADockerfile) {
  for (const auto& entry : fs::directory_iterator(k_corpus)) {
    if (entry.path().extension() == ".json") {
      fs::path dockerfile = entry.path();
      EXPECT_TRUE(fs::exists(dockerfile.replace_extension(".Dockerfile"))) << entry.path();
    }
  }
}

TEST(DockerfileParser, FlagPositionsFollowContinuations) {
  auto df =
      parse_dockerfile("FROM a\nRUN \\\n  --network=none \\\n    --mount=type=cache,target=/x "
                       "make\n");
  ASSERT_TRUE(df.has_value());
  const auto& run = df->instructions.at(1);
  ASSERT_EQ(run.flags.size(), 2u);
  EXPECT_EQ(run.flags[0].pos.line, 3);
  EXPECT_EQ(run.flags[0].pos.column, 3);
  EXPECT_EQ(run.flags[1].pos.line, 4);
  EXPECT_EQ(run.flags[1].pos.column, 5);
  EXPECT_EQ(run.args, Names{"make"});
}

TEST(DockerfileParser, ArgRemembersWhetherADefaultWasWritten) {
  auto df = parse_dockerfile("ARG A B= C=1\nFROM x\n");
  ASSERT_TRUE(df.has_value());
  const auto& arg = df->instructions.at(0);
  EXPECT_EQ(arg.args, (Names{"A", "", "B", "", "C", "1"}));
  EXPECT_EQ(arg.arg_has_value, (std::vector<bool>{false, true, true}));
}

TEST(DockerfileParserExpand, PlainAndBracedVariables) {
  Vars vars{{"A", "1"}, {"LONG_NAME", "two"}};
  EXPECT_EQ(expand_words("$A-${LONG_NAME}/$LONG_NAME.x", vars, '\\').value, "1-two/two.x");
  EXPECT_EQ(expand_words("cost $ 5", vars, '\\').value, "cost $ 5");
}

TEST(DockerfileParserExpand, DefaultOperators) {
  Vars vars{{"SET", "v"}, {"EMPTY", ""}};
  EXPECT_EQ(expand_words("${SET:-w}", vars, '\\').value, "v");
  EXPECT_EQ(expand_words("${EMPTY:-w}", vars, '\\').value, "w");
  EXPECT_EQ(expand_words("${EMPTY-w}", vars, '\\').value, "");
  EXPECT_EQ(expand_words("${NOPE-w}", vars, '\\').value, "w");
  EXPECT_EQ(expand_words("${NOPE:-${SET}x}", vars, '\\').value, "vx");
}

TEST(DockerfileParserExpand, AlternativeOperators) {
  Vars vars{{"SET", "v"}, {"EMPTY", ""}};
  EXPECT_EQ(expand_words("${SET:+w}", vars, '\\').value, "w");
  EXPECT_EQ(expand_words("${EMPTY:+w}", vars, '\\').value, "");
  EXPECT_EQ(expand_words("${EMPTY+w}", vars, '\\').value, "w");
  EXPECT_EQ(expand_words("${NOPE+w}", vars, '\\').value, "");
}

TEST(DockerfileParserExpand, QuotesAndEscapes) {
  Vars vars{{"A", "x y"}};
  EXPECT_EQ(expand_words("'$A' \"$A\"", vars, '\\').value, "$A x y");
  EXPECT_EQ(expand_words("\"a\\\"b\\$A\\n\"", vars, '\\').value, "a\"b$A\\n");
  EXPECT_EQ(expand_words("\\$A \\'q", vars, '\\').value, "$A 'q");
  EXPECT_EQ(expand_words("`$A \\$A", vars, '`').value, "$A \\x y");
  EXPECT_EQ(expand_words("trailing\\", vars, '\\').value, "trailing");
}

TEST(DockerfileParserExpand, ReportsUnsetNamesOnceInOrder) {
  Vars vars{{"SET", "v"}};
  auto result = expand_words("$B ${A:-x} $SET ${B} '$QUOTED' \"$C\"", vars, '\\');
  EXPECT_EQ(result.value, " x v  $QUOTED ");
  EXPECT_EQ(result.unset, (Names{"B", "A", "C"}));
  EXPECT_TRUE(expand_words("${SET}", vars, '\\').unset.empty());
}

TEST(DockerfileParserExpand, MalformedInputIsKeptNotLost) {
  EXPECT_EQ(expand_words("a ${B", {}, '\\').value, "a ${B");
  EXPECT_EQ(expand_words("\"open", {}, '\\').value, "open");
}

std::vector<StageScope> scopes(std::string_view text, const Vars& build_args = {}) {
  auto df = parse_dockerfile(text);
  EXPECT_TRUE(df.has_value());
  return df ? stage_scopes(*df, build_args) : std::vector<StageScope>{};
}

TEST(DockerfileParserScopes, GlobalArgNeedsRedeclaration) {
  auto stages = scopes("ARG V=1\n"
                       "FROM a AS One\n"
                       "ENV SEEN=\"[$V]\"\n"
                       "FROM b\n"
                       "ARG V\n"
                       "ENV SEEN=\"[$V]\"\n");
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].name, "one");
  EXPECT_TRUE(stages[0].args.empty());
  EXPECT_EQ(stages[0].env.at("SEEN"), "[]");
  EXPECT_EQ(stages[1].index, 1);
  EXPECT_EQ(stages[1].args, Names{"V"});
  EXPECT_EQ(stages[1].env.at("SEEN"), "[1]");
}

TEST(DockerfileParserScopes, BuildArgsOverrideDefaultsOfDeclaredArgsOnly) {
  auto stages = scopes("ARG V=1\n"
                       "FROM a\n"
                       "ARG V\n"
                       "ARG W=2\n"
                       "ENV OUT=$V-$W-$X\n",
                       {{"V", "9"}, {"W", "8"}, {"X", "7"}});
  ASSERT_EQ(stages.size(), 1u);
  EXPECT_EQ(stages[0].env.at("OUT"), "9-8-");
}

TEST(DockerfileParserScopes, ArgDoesNotCrossFrom) {
  auto stages = scopes("FROM a AS first\n"
                       "ARG LOCAL=yes\n"
                       "ENV IN_FIRST=$LOCAL\n"
                       "FROM b\n"
                       "ENV IN_SECOND=x$LOCAL\n");
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].args, Names{"LOCAL"});
  EXPECT_EQ(stages[0].env.at("IN_FIRST"), "yes");
  EXPECT_TRUE(stages[1].args.empty());
  EXPECT_EQ(stages[1].env.at("IN_SECOND"), "x");
}

TEST(DockerfileParserScopes, FromStageInheritsEnvButNotArgs) {
  auto stages = scopes("ARG BASE=alpine\n"
                       "FROM ${BASE} AS Base\n"
                       "ARG TOOL=gcc\n"
                       "ENV CC=$TOOL PATH=/opt/bin\n"
                       "FROM base AS child\n"
                       "ENV SEE=[$TOOL][$CC]\n"
                       "FROM alpine\n");
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_EQ(stages[1].name, "child");
  EXPECT_TRUE(stages[1].args.empty());
  EXPECT_EQ(stages[1].env.at("CC"), "gcc");
  EXPECT_EQ(stages[1].env.at("PATH"), "/opt/bin");
  EXPECT_EQ(stages[1].env.at("SEE"), "[][gcc]");
  EXPECT_TRUE(stages[2].env.empty());
}

TEST(DockerfileParserScopes, EmptyDefaultOverridesGlobal) {
  auto stages = scopes("ARG V=1\nFROM a\nARG V=\nENV OUT=[$V]\n");
  ASSERT_EQ(stages.size(), 1u);
  EXPECT_EQ(stages[0].env.at("OUT"), "[]");
}

TEST(DockerfileParserScopes, AllPairsOfOneEnvSeeTheVariablesFromBeforeIt) {
  auto stages = scopes("FROM a\nENV A=1\nENV A=2 B=$A\nENV C=$A\n");
  ASSERT_EQ(stages.size(), 1u);
  EXPECT_EQ(stages[0].env.at("B"), "1");
  EXPECT_EQ(stages[0].env.at("C"), "2");
}

std::string nested(int depth) {
  std::string text;
  for (int i = 0; i < depth; ++i) {
    text += "${A:-";
  }
  text += "x";
  text.append(static_cast<std::size_t>(depth), '}');
  return text;
}

TEST(DockerfileParser, SubstitutionsNestedTooDeepAreAParseErrorAtTheFirstTooDeep) {
  // 25,000 levels (150 KB) overflowed the stack of the recursive expander.
  auto df = parse_dockerfile("FROM scratch\nENV A=" + nested(25'000) + "\n");
  ASSERT_FALSE(df);
  EXPECT_EQ(df.error().pos.line, 2);
  // `ENV A=` is 6 columns, each level 5: the `${` one level past the limit.
  EXPECT_EQ(df.error().pos.column, 7 + 5 * k_max_substitution_depth);
  EXPECT_NE(df.error().message.find("nest deeper than 64"), std::string::npos)
      << df.error().message;

  auto flag =
      parse_dockerfile("FROM scratch\nRUN --mount=type=cache,target=" + nested(1'000) + " make\n");
  ASSERT_FALSE(flag);
  EXPECT_EQ(flag.error().pos.line, 2);
  EXPECT_EQ(flag.error().pos.column, 5);
}

TEST(DockerfileParser, SubstitutionsAtTheDepthLimitParse) {
  auto df = parse_dockerfile("FROM scratch\nENV A=" + nested(k_max_substitution_depth) + "\n");
  ASSERT_TRUE(df) << df.error().message;
  auto stages = stage_scopes(*df, {});
  EXPECT_EQ(stages.at(0).env.at("A"), "x");
  // A shell script is the shell's to expand, however deep: kiln does not.
  EXPECT_TRUE(parse_dockerfile("FROM scratch\nRUN echo " + nested(1'000) + "\n"));
}

TEST(DockerfileParserExpand, NestingPastTheLimitIsKeptLiterallyNotRecursedInto) {
  std::string deep = nested(25'000);
  auto result = expand_words(deep, {}, '\\');
  EXPECT_EQ(result.value, deep);
  EXPECT_EQ(result.unset, Names{});
}

TEST(DockerfileParser, ArgumentsKnowWhereTheyStart) {
  auto df = parse_dockerfile("FROM alpine AS b\n"
                             "ENV  A=1 \\\n"
                             "   B=\"x y\"\n"
                             "COPY --from=b src /dst\n"
                             "ARG N\n");
  ASSERT_TRUE(df) << df.error().message;
  auto at = [](const Instruction& ins) {
    std::vector<std::pair<int, int>> out;
    for (const auto& pos : ins.arg_pos) {
      out.emplace_back(pos.line, pos.column);
    }
    return out;
  };
  using Places = std::vector<std::pair<int, int>>;
  EXPECT_EQ(at(df->instructions[0]), (Places{{1, 6}, {1, 13}, {1, 16}}));
  EXPECT_EQ(at(df->instructions[1]), (Places{{2, 6}, {2, 8}, {3, 4}, {3, 6}}));
  EXPECT_EQ(at(df->instructions[2]), (Places{{4, 15}}));
  EXPECT_EQ(at(df->instructions[3]), (Places{{5, 5}, {5, 6}}));
  EXPECT_EQ(df->instructions[1].line_offset, 17u);
}

TEST(DockerfileParser, AnInstructionOpenedByALoneEscapeStartsOnItsKeywordsLine) {
  // Found by fuzzing: the offset pointed at the `\` line while the start was the keyword's.
  std::string text = "FROM a\n\\\n\nRUN true\n";
  auto df = parse_dockerfile(text);
  ASSERT_TRUE(df) << df.error().message;
  const auto& run = df->instructions.at(1);
  EXPECT_EQ(run.start.line, 4);
  EXPECT_EQ(run.start.column, 1);
  EXPECT_EQ(run.line_offset, text.find("RUN"));
}

// A child process with its address space capped near what it already uses: the parse must fit
// in a small multiple of the text. Reserving a whole Instruction per input line up front made
// 130 MB of blank lines fail with bad_alloc.
TEST(DockerfileParser, MemoryFollowsTheContentNotTheLineCount) {
  std::string text(std::size_t{64} << 20, '\n');
  text += "FROM scratch\n";
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::size_t used_kb = 0;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmSize:", 0) == 0) {
        used_kb = std::stoul(line.substr(7));
      }
    }
    rlim_t cap = (used_kb << 10) + (rlim_t{256} << 20);
    rlimit limit{cap, cap};
    setrlimit(RLIMIT_AS, &limit);
    try {
      auto df = parse_dockerfile(text);
      _exit(df && df->instructions.size() == 1 ? 0 : 1);
    } catch (const std::bad_alloc&) {
      _exit(3);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: wrong parse, 3: out of memory";
}

// JSON arguments of plain ASCII strings are read without nlohmann; whatever that fast path
// does not handle must still come out as nlohmann decides it, JSON form or shell form.
TEST(DockerfileParser, JsonFormFastPathAgreesWithJson) {
  struct Case {
    std::string args;
    bool json_form;
    Names values;
  };
  const std::vector<Case> cases = {
      {R"(["a", "b\"c", "d\\e", "f\/g", "h\ti"])", true, {"a", "b\"c", "d\\e", "f/g", "h\ti"}},
      {R"([ "sh" , "-c" ,"x" ])", true, {"sh", "-c", "x"}},
      {"[]", true, {}},
      {"[ ]", true, {}},
      {R"(["\u0041\u00e9"])", true, {"A\xC3\xA9"}},
      {"[\"caf\xC3\xA9\"]", true, {"caf\xC3\xA9"}},
      {R"(["a",])", false, {R"(["a",])"}},
      {R"(["a"] x)", false, {R"(["a"] x)"}},
      {R"(["a" "b"])", false, {R"(["a" "b"])"}},
      {R"(["a)", false, {R"(["a)"}},
      {"[\"a\tb\"]", false, {"[\"a\tb\"]"}},
      {R"(["\x"])", false, {R"(["\x"])"}},
      {"[\"\xFF\"]", false, {"[\"\xFF\"]"}},
  };
  for (const auto& c : cases) {
    auto df = parse_dockerfile("FROM alpine\nCMD " + c.args + "\n");
    ASSERT_TRUE(df) << c.args << ": " << df.error().message;
    const auto& cmd = df->instructions.at(1);
    EXPECT_EQ(cmd.json_form, c.json_form) << c.args;
    EXPECT_EQ(cmd.args, c.values) << c.args;
  }
  auto mixed = parse_dockerfile("FROM alpine\nCMD [\"a\", 1]\n");
  ASSERT_FALSE(mixed);
  EXPECT_NE(mixed.error().message.find("strings only"), std::string::npos);
}

} // namespace
} // namespace kiln
