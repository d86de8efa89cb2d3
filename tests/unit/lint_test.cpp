#include "lint/lint.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lint/rules.h"
#include "util/diagnostic.h"

namespace kiln {
namespace {

using Expected = std::tuple<std::string, int, int>; // rule, line, column

std::string read_fixture(const std::string& name) {
  std::ifstream in(std::string(KILN_TEST_FIXTURES) + "/lint/" + name, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  EXPECT_TRUE(in.good() || in.eof()) << name;
  return buffer.str();
}

LintOptions test_options() {
  LintOptions options;
  options.per_file_dirs = {"ci/scripts"};
  options.read_dockerignore = false; // the fixtures' folder is no build context
  return options;
}

LintOptions all_rules() {
  LintOptions options = test_options();
  options.warnings = true;
  return options;
}

LintResult lint_fixture(const std::string& name) {
  return lint_dockerfile(name, read_fixture(name), test_options());
}

std::vector<Expected> positions(const LintResult& result) {
  std::vector<Expected> out;
  for (const auto& f : result.findings) {
    out.emplace_back(f.rule, f.line, f.column);
  }
  return out;
}

struct RuleCase {
  std::string rule;
  std::vector<Expected> bad;
};

class LintRuleTest : public ::testing::TestWithParam<RuleCase> {};

TEST_P(LintRuleTest, BadFileYieldsExactlyTheExpectedFindings) {
  const auto& c = GetParam();
  auto result = lint_fixture(c.rule + "-bad.Dockerfile");
  ASSERT_FALSE(result.parse_error);
  EXPECT_EQ(positions(result), c.bad);
  EXPECT_EQ(lint_exit_code({result}), 1);
}

TEST_P(LintRuleTest, GoodFileYieldsNothing) {
  auto result = lint_fixture(GetParam().rule + "-good.Dockerfile");
  ASSERT_FALSE(result.parse_error);
  EXPECT_EQ(positions(result), std::vector<Expected>{});
  EXPECT_EQ(lint_exit_code({result}), 0);
}

INSTANTIATE_TEST_SUITE_P(
    LintRules, LintRuleTest,
    ::testing::Values(
        RuleCase{"leak-env-name",
                 {{"leak-env-name", 2, 5}, {"leak-env-name", 3, 38}, {"leak-env-name", 4, 5}}},
        RuleCase{"leak-address",
                 {{"leak-address", 1, 19}, {"leak-address", 3, 22}, {"leak-address", 4, 32}}},
        RuleCase{"leak-env-expansion",
                 {{"leak-env-expansion", 4, 15}, {"leak-env-expansion", 5, 12}}},
        RuleCase{"arg-scope", {{"arg-scope", 4, 26}, {"arg-scope", 6, 12}, {"arg-scope", 7, 28}}},
        RuleCase{"cache-arg-missing", {{"cache-arg-missing", 5, 5}}},
        RuleCase{"whole-dir-mount", {{"whole-dir-mount", 2, 30}, {"whole-dir-mount", 3, 6}}}),
    [](const ::testing::TestParamInfo<RuleCase>& info) {
      std::string name;
      for (char c : info.param.rule) {
        name += c == '-' ? '_' : c;
      }
      return name;
    });

TEST(LintSuppression, ReasonSuppressesAndMissingReasonIsAFinding) {
  auto result = lint_fixture("suppressed.Dockerfile");
  ASSERT_FALSE(result.parse_error);
  // Lines 3 and 5 are suppressed with reasons (three findings); line 6 has no reason, so it
  // is reported and suppresses nothing.
  EXPECT_EQ(result.suppressed, 3);
  EXPECT_EQ(positions(result),
            (std::vector<Expected>{{"suppression-without-reason", 6, 1}, {"leak-address", 7, 18}}));
}

TEST(LintSuppression, OnlyTheListedRulesAreSuppressed) {
  auto result = lint_dockerfile("x",
                                "FROM alpine\n"
                                "# kiln-lint ignore=leak-address reason=lab\n"
                                "ENV SCCACHE_BUCKET=b\n",
                                test_options());
  EXPECT_EQ(result.suppressed, 0);
  EXPECT_EQ(positions(result), (std::vector<Expected>{{"leak-env-name", 3, 5}}));
}

TEST(LintParseError, ExitsTwoWithItsPosition) {
  std::string text = "FROM alpine\nRUN echo ok\nFROM\n";
  auto result = lint_dockerfile("broken.Dockerfile", text, test_options());
  ASSERT_TRUE(result.parse_error);
  EXPECT_EQ(result.parse_error->rule, "parse-error");
  EXPECT_EQ(result.parse_error->line, 3);
  EXPECT_EQ(result.parse_error->column, 1);
  EXPECT_TRUE(result.findings.empty());
  auto good = lint_fixture("leak-env-name-bad.Dockerfile");
  EXPECT_EQ(lint_exit_code({good, result}), 2);
  EXPECT_EQ(lint_exit_code({}), 0);
  EXPECT_NE(render_tty(result, text).find("broken.Dockerfile:3:1: parse-error: "),
            std::string::npos);
}

TEST(LintRender, TtyShowsLineAndCaret) {
  std::string text = read_fixture("leak-env-name-bad.Dockerfile");
  auto result = lint_dockerfile("leak-env-name-bad.Dockerfile", text, test_options());
  auto out = render_tty(result, text);
  EXPECT_NE(out.find("leak-env-name-bad.Dockerfile:2:5: leak-env-name: SCCACHE_WEBDAV_ENDPOINT"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  ENV SCCACHE_WEBDAV_ENDPOINT=http://cache.example.com\n      ^\n"),
            std::string::npos)
      << out;
}

TEST(LintRender, JsonHasEveryFinding) {
  auto result = lint_fixture("leak-address-bad.Dockerfile");
  auto json = nlohmann::json::parse(render_json({result}));
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), 3U);
  EXPECT_EQ(json[0]["file"], "leak-address-bad.Dockerfile");
  EXPECT_EQ(json[0]["line"], 1);
  EXPECT_EQ(json[0]["column"], 19);
  EXPECT_EQ(json[0]["rule"], "leak-address");
  EXPECT_TRUE(json[0]["message"].is_string());
}

TEST(LintRender, SarifHasTheMinimalShape) {
  auto bad = lint_fixture("cache-arg-missing-bad.Dockerfile");
  auto broken = lint_dockerfile("broken", "FROM\n", test_options());
  auto sarif = nlohmann::json::parse(render_sarif({bad, broken}));
  EXPECT_EQ(sarif["version"], "2.1.0");
  EXPECT_TRUE(sarif["$schema"].is_string());
  const auto& run = sarif["runs"][0];
  EXPECT_EQ(run["tool"]["driver"]["name"], "kiln-lint");
  bool has_rule = false;
  for (const auto& rule : run["tool"]["driver"]["rules"]) {
    EXPECT_TRUE(rule["shortDescription"]["text"].is_string());
    has_rule = has_rule || rule["id"] == "cache-arg-missing";
  }
  EXPECT_TRUE(has_rule);
  ASSERT_EQ(run["results"].size(), 2U);
  const auto& r = run["results"][0];
  EXPECT_EQ(r["ruleId"], "cache-arg-missing");
  EXPECT_EQ(r["level"], "error");
  EXPECT_TRUE(r["message"]["text"].is_string());
  const auto& loc = r["locations"][0]["physicalLocation"];
  EXPECT_EQ(loc["artifactLocation"]["uri"], "cache-arg-missing-bad.Dockerfile");
  EXPECT_EQ(loc["region"]["startLine"], 5);
  EXPECT_EQ(loc["region"]["startColumn"], 5);
  EXPECT_EQ(run["results"][1]["ruleId"], "parse-error");
}

// render_json writes its text by hand: it has to stay exactly what nlohmann's dump(2) of the
// same array gives, escapes included, and stay valid JSON for bytes nlohmann refuses.
TEST(LintRender, JsonMatchesNlohmannLayout) {
  LintResult a;
  a.findings.push_back(
      {"dir/a \"q\".Dockerfile", 3, 7, "leak-env-name",
       std::string("tab\there, back\\slash, bell\x07, nl\n, cr\r, \xC3\xA9t\xC3\xA9") +
           std::string(1, '\0') + "end"});
  a.findings.push_back({"a.Dockerfile", 10, 1, "arg-scope", "second"});
  LintResult empty;
  LintResult broken;
  broken.parse_error = LintFinding{"b.Dockerfile", 1, 1, "parse-error", "unknown instruction"};
  std::vector<LintResult> results = {a, empty, broken};

  auto expected = nlohmann::json::array();
  for (const auto* f : {&a.findings[0], &a.findings[1], &*broken.parse_error}) {
    expected.push_back({{"file", f->file},
                        {"line", f->line},
                        {"column", f->column},
                        {"rule", f->rule},
                        {"message", f->message}});
  }
  EXPECT_EQ(render_json(results), expected.dump(2));
  EXPECT_EQ(render_json({}), nlohmann::json::array().dump(2));
  EXPECT_EQ(render_json({empty}), "[]");
  // kiln lint writes the files' elements, rendered apart, straight to its output.
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  write_json_elements(
      out, {render_json_elements(a), render_json_elements(empty), render_json_elements(broken)});
  std::string written(static_cast<std::size_t>(std::ftell(out)), '\0');
  std::rewind(out);
  ASSERT_EQ(std::fread(written.data(), 1, written.size(), out), written.size());
  std::fclose(out);
  EXPECT_EQ(written, render_json(results));
}

TEST(LintRender, JsonReplacesBytesThatAreNotUtf8) {
  LintResult r;
  r.findings.push_back({"bad\xFF\xC3(.Dockerfile", 1, 1, "leak-env-name", "\xED\xA0\x80 x"});
  auto json = nlohmann::json::parse(render_json({r}));
  EXPECT_EQ(json[0]["file"], "bad\xEF\xBF\xBD\xEF\xBF\xBD(.Dockerfile");
  EXPECT_EQ(json[0]["message"], "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD x");
}

TEST(LintRender, SarifReplacesBytesThatAreNotUtf8AsJsonDoes) {
  // One byte 0x81 in a quoted word made nlohmann's strict dump throw and kiln abort.
  LintResult r;
  r.findings.push_back({"bad\xFF\xC3(.Dockerfile", 1, 1, "leak-env-name", "\xED\xA0\x80 x\x81"});
  auto broken = lint_dockerfile("b.Dockerfile", "FROM scratch\n\x81\n", test_options());
  ASSERT_TRUE(broken.parse_error);
  auto sarif = nlohmann::json::parse(render_sarif({r, broken}));
  auto json = nlohmann::json::parse(render_json({r, broken}));
  const auto& results = sarif["runs"][0]["results"];
  ASSERT_EQ(results.size(), 2U);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(results[i]["message"]["text"], json[i]["message"]);
    EXPECT_EQ(results[i]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
              json[i]["file"]);
  }
  EXPECT_EQ(results[1]["message"]["text"], "unknown instruction: \xEF\xBF\xBD");
}

TEST(LintRender, TtyClipsALongLineAroundTheCaretAndEscapesWhatATerminalWouldRun) {
  LintOptions options = test_options();
  options.extra_names = {"EVIL*"};
  std::string text = "FROM scratch\nENV";
  for (int i = 0; i < 300; ++i) {
    text += " X" + std::to_string(i) + "=\x1b[1m";
  }
  text += " EVIL\x1b[2J=1\n";
  auto result = lint_dockerfile("x.Dockerfile", text, options);
  ASSERT_EQ(result.findings.size(), 1U);
  auto out = render_tty(result, text);
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_NE(out.find("leak-env-name: EVIL\\x1B[2J is a build-host setting"), std::string::npos)
      << out;
  EXPECT_NE(out.find("\n  ...[1m X286=\\x1B[1m X287="), std::string::npos) << out;
  std::size_t widest = 0;
  for (std::size_t begin = out.find('\n') + 1; begin < out.size();) {
    std::size_t end = out.find('\n', begin);
    widest = std::max(widest, end - begin);
    begin = end + 1;
  }
  EXPECT_LE(widest, k_excerpt_columns + 10) << out;
  // The caret stands under the finding's column in the clipped line.
  std::size_t line = out.find("\n  ...") + 1;
  std::size_t caret_line = out.find('\n', line) + 1;
  std::size_t caret = out.find('^', caret_line) - caret_line;
  EXPECT_EQ(out.substr(line + caret, 4), "EVIL");
}

TEST(LintCacheTargets, CcachesDefaultFoldersAreCompileCacheTargets) {
  // ccache 4 writes to $XDG_CACHE_HOME/ccache, ~/.cache/ccache while XDG_CACHE_HOME is unset,
  // or the legacy ~/.ccache: each a compile cache mount that needs the endpoint ARG.
  for (std::string target : {"/root/.cache/ccache", "/root/.cache/ccache/", "/root/.ccache",
                             "/root/.cache/sccache", "/var/cache/ccache"}) {
    auto result = lint_dockerfile(
        "x", "FROM alpine\nRUN --mount=type=cache,target=" + target + " make\n", LintOptions{});
    EXPECT_EQ(positions(result), (std::vector<Expected>{{"cache-arg-missing", 2, 5}})) << target;
  }
}

TEST(LintCacheTargets, AChainsEmptyListMeansNoTarget) {
  GateSettings gates;
  gates.cache_mount_targets = std::vector<std::string>{};
  auto result =
      lint_dockerfile("x", "FROM alpine\nRUN --mount=type=cache,target=/root/.cache/sccache make\n",
                      lint_options(gates));
  EXPECT_EQ(positions(result), std::vector<Expected>{});
  gates.cache_mount_targets = std::vector<std::string>{"/cache"};
  result = lint_dockerfile("x", "FROM alpine\nRUN --mount=type=cache,target=/cache make\n",
                           lint_options(gates));
  EXPECT_EQ(positions(result), (std::vector<Expected>{{"cache-arg-missing", 2, 5}}));
}

TEST(LintPositions, AFindingAfterALoneEscapeIsOnTheKeywordsLine) {
  auto result = lint_dockerfile("x", "FROM alpine\n\\\n\nENV A=http://10.0.0.1/\n", test_options());
  EXPECT_EQ(positions(result), (std::vector<Expected>{{"leak-address", 4, 14}}));
}

// BuildKit reads mount keys ignoring case, and a repeated key's last value wins.
TEST(LintMountOption, FirstNamedAliasLastValueAnyCase) {
  std::string_view mount = "type=cache,DST=/one,Target=/two,target=/three,readonly";
  EXPECT_EQ(mount_option(mount, {"type"}), "cache");
  EXPECT_EQ(mount_option(mount, {"target", "dst"}), "/three");
  EXPECT_EQ(mount_option(mount, {"destination", "dst"}), "/one");
  EXPECT_EQ(mount_option(mount, {"readonly"}), "");
  EXPECT_EQ(mount_option(mount, {"source", "src"}), std::nullopt);
  EXPECT_EQ(mount_option("", {"type"}), std::nullopt);
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

std::vector<std::string> rules_of(const LintResult& result) {
  std::vector<std::string> out;
  for (const auto& f : result.findings) {
    out.push_back(f.rule + ":" + std::to_string(f.line));
  }
  return out;
}

TEST(LintCheckDirective, WarningsAreKilnLintsOnlyUnlessErrorIsTrue) {
  std::string text = "FROM alpine as build\nCMD run\n";
  // The run preflight's options: BuildKit's warnings do not stop a run.
  EXPECT_EQ(rules_of(lint_dockerfile("x", text, test_options())), std::vector<std::string>{});
  auto all = lint_dockerfile("x", text, all_rules());
  EXPECT_EQ(rules_of(all),
            (std::vector<std::string>{"from-as-casing:1", "json-args-recommended:2"}));
  EXPECT_EQ(all.findings[0].severity, Severity::warning);
  // error=true: BuildKit fails the build on them, so the preflight stops on them too.
  auto strict = lint_dockerfile("x", "# check=error=true\n" + text, test_options());
  EXPECT_EQ(rules_of(strict),
            (std::vector<std::string>{"from-as-casing:2", "json-args-recommended:3"}));
  EXPECT_EQ(strict.findings[0].severity, Severity::error);
  EXPECT_EQ(lint_exit_code({strict}), 1);
}

TEST(LintCheckDirective, SkipTakesBuildKitNamesAndKilnIdsButNotKilnsOwnRules) {
  std::string body = "FROM alpine as build\nCMD run\nENV SCCACHE_BUCKET=b\nRUN wget x\n";
  auto buildkit =
      lint_dockerfile("x", "# check=skip=FromAsCasing,json-args-recommended\n" + body, all_rules());
  EXPECT_EQ(rules_of(buildkit),
            (std::vector<std::string>{"leak-env-name:4", "wget-without-progress:5"}));
  auto everything = lint_dockerfile("x", "#check=skip=all;error=true\n" + body, all_rules());
  // skip=all is every BuildKit rule; kiln's are silenced only with a reason.
  EXPECT_EQ(rules_of(everything),
            (std::vector<std::string>{"leak-env-name:4", "wget-without-progress:5"}));
  // error=true makes BuildKit's rules errors, not kiln's warnings.
  EXPECT_EQ(everything.findings[1].severity, Severity::warning);
}

TEST(LintCheckDirective, ACommentAboveAnInstructionSkipsForItAlone) {
  auto result = lint_dockerfile("x",
                                "FROM alpine\n"
                                "# check=skip=LegacyKeyValueFormat // on purpose\n"
                                "\n"
                                "ENV a b\n"
                                "ENV c d\n",
                                all_rules());
  EXPECT_EQ(rules_of(result), std::vector<std::string>{"legacy-key-value-format:5"});
}

TEST(LintCheckDirective, AValueThatDoesNotParseIsAnError) {
  auto result = lint_dockerfile("x", "# check=skip=all;bogus\nFROM alpine\n", test_options());
  ASSERT_EQ(rules_of(result), std::vector<std::string>{"check-directive:1"});
  EXPECT_NE(result.findings[0].message.find("invalid check option \"bogus\""), std::string::npos);
  EXPECT_EQ(rules_of(lint_dockerfile("x", "# check=error=maybe\nFROM alpine\n", test_options())),
            std::vector<std::string>{"check-directive:1"});
}

TEST(LintSuppression, BuildKitNamesSuppressAsKilnIdsDo) {
  auto result = lint_dockerfile("x",
                                "FROM alpine\n"
                                "# kiln-lint ignore=UndefinedVar,leak-address reason=set by CI\n"
                                "ENV A=$UNSET B=http://10.0.0.1/\n",
                                all_rules());
  EXPECT_EQ(result.suppressed, 2);
  EXPECT_EQ(rules_of(result), std::vector<std::string>{});
}

TEST(LintRender, BuildKitJsonHasBuildKitsShape) {
  std::string text = "FROM alpine\nCMD run\n";
  auto result = lint_dockerfile("Dockerfile", text, all_rules());
  std::string broken_text = "FROM\n";
  auto broken = lint_dockerfile("bad.Dockerfile", broken_text, all_rules());
  EXPECT_EQ(render_buildkit_json({result, broken},
                                 {{"Dockerfile", text}, {"bad.Dockerfile", broken_text}}),
            R"({
  "warnings": [
    {
      "ruleName": "JSONArgsRecommended",
      "description": "JSON arguments recommended for ENTRYPOINT/CMD to prevent unintended behavior related to OS signals",
      "url": "https://docs.docker.com/go/dockerfile/rule/json-args-recommended/",
      "detail": "JSON arguments recommended for CMD to prevent unintended behavior related to OS signals",
      "location": {
        "ranges": [
          {
            "start": {
              "line": 2
            },
            "end": {
              "line": 2
            }
          }
        ]
      }
    }
  ],
  "sources": [
    {
      "filename": "Dockerfile",
      "data": "RlJPTSBhbHBpbmUKQ01EIHJ1bgo=",
      "language": "Dockerfile"
    },
    {
      "filename": "bad.Dockerfile",
      "data": "RlJPTQo=",
      "language": "Dockerfile"
    }
  ],
  "buildError": {
    "message": ")" +
                broken.parse_error->message + R"(",
    "location": {
      "sourceIndex": 1,
      "ranges": [
        {
          "start": {
            "line": 1
          },
          "end": {
            "line": 1
          }
        }
      ]
    }
  }
})");
  auto clean = lint_dockerfile("Dockerfile", "FROM alpine\n", all_rules());
  auto doc = nlohmann::json::parse(render_buildkit_json({clean}, {{"Dockerfile", "FROM x\n"}}));
  EXPECT_TRUE(doc["warnings"].is_null()); // Go's nil slice
  EXPECT_FALSE(doc.contains("buildError"));
}

TEST(LintRender, BuildKitJsonEscapesAsGoDoes) {
  LintResult r;
  r.findings.push_back({"a<b>&c", 3, 1, "undefined-var", "x<y", 3, 4, Severity::warning});
  auto out = render_buildkit_json({r}, {{"a<b>&c", ""}});
  EXPECT_NE(out.find(R"("filename": "a\u003cb\u003e\u0026c")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("detail": "x\u003cy")"), std::string::npos);
  EXPECT_NE(out.find(R"("end": {
              "line": 4)"),
            std::string::npos);
}

TEST(LintRender, GithubAnnotationsEscapeMessagesAndProperties) {
  LintResult r;
  r.findings.push_back(
      {"dir,a:b%.Dockerfile", 2, 5, "leak-address", "100% bad\r\nline: two, three"});
  r.findings.push_back(
      {"Dockerfile", 7, 1, "json-args-recommended", "use JSON", 7, 7, Severity::warning});
  EXPECT_EQ(render_github({r}),
            "::error file=dir%2Ca%3Ab%25.Dockerfile,line=2,col=5,title=leak-address::100%25 "
            "bad%0D%0Aline: two, three\n"
            "::warning file=Dockerfile,line=7,col=1,title=json-args-recommended::use JSON\n");
}

TEST(LintRender, SarifLevelIsTheSeverity) {
  auto result = lint_dockerfile("x", "FROM alpine\nCMD run\nENV SCCACHE_BUCKET=b\n", all_rules());
  auto sarif = nlohmann::json::parse(render_sarif({result}));
  const auto& results = sarif["runs"][0]["results"];
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["level"], "warning");
  EXPECT_EQ(results[1]["level"], "error");
}

TEST(LintUndefinedVar, SuggestionsStayWithinTheirBudget) {
  // 3,000 declared names and 3,000 near misses: every search may compare all declared names,
  // so the budget runs out and later findings come without a suggestion, never slower.
  std::string text = "FROM scratch\nARG";
  for (int i = 0; i < 3000; ++i) {
    text += " NAME" + std::to_string(i) + "X=1";
  }
  text += "\nCOPY";
  for (int i = 0; i < 3000; ++i) {
    text += " $NAME" + std::to_string(i) + "Y";
  }
  text += " /dst/\n";
  auto result = lint_dockerfile("x", text, all_rules());
  ASSERT_EQ(result.findings.size(), 3000u);
  EXPECT_NE(result.findings.front().message.find("(did you mean $NAME0X?)"), std::string::npos);
  EXPECT_EQ(result.findings.back().message.find("did you mean"), std::string::npos);
}

TEST(Lint, ACacheMountOfAFileTheChainBuildsForSeveralPlatformsMustBeKeyedByIt) {
  // Nothing in the file says it builds for several platforms: the chain's lanes do.
  const std::string text = "FROM debian:12\nRUN --mount=type=cache,target=/root/.cache/pip pip "
                           "wheel -r r.txt\n";
  LintOptions options = test_options();
  options.warnings = true;
  EXPECT_TRUE(lint_dockerfile("Dockerfile", text, options).findings.empty());
  options.platforms = 2;
  auto result = lint_dockerfile("Dockerfile", text, options);
  ASSERT_EQ(result.findings.size(), 1u);
  EXPECT_EQ(result.findings[0].rule, "cache-mount-unkeyed");
  EXPECT_NE(result.findings[0].message.find("(2 in the chain's lanes)"), std::string::npos)
      << result.findings[0].message;
}

} // namespace
} // namespace kiln
