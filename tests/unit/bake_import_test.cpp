#include "chain/written_chain.h"
#include "import/bake_chain.h"
#include "import/bake_file.h"
#include "temp_dir.h"

#include <filesystem>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include "chain/chain_loader.h"
#include "util/fs.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path k_bake = fs::path(KILN_TEST_FIXTURES) / "bake";

/// `text` read as TOML, nullopt (and a failure) when it is not.
std::optional<toml::table> parse_toml(const std::string& text) {
  try {
    return toml::parse(text);
  } catch (const toml::parse_error& error) {
    ADD_FAILURE() << error.description() << " in\n" << text;
    return std::nullopt;
  }
}

BakeFile parsed(const std::string& text) {
  auto bake = parse_bake_json(text, "bake.json");
  EXPECT_TRUE(bake) << (bake ? "" : format_diagnostic(bake.error()));
  return bake ? *bake : BakeFile{};
}

Diagnostic parse_error(const std::string& text) {
  auto bake = parse_bake_json(text, "bake.json");
  EXPECT_FALSE(bake);
  return bake ? Diagnostic{} : bake.error();
}

/// The chain of `bake`, its paths against a bake file and a chain in /p, no Dockerfile read.
ImportedChain imported(const BakeFile& bake, const std::string& group = "") {
  BakeImport options;
  options.bake_file = "/p/bake.json";
  options.chain_dir = "/p";
  options.chain_name = "p";
  if (!group.empty()) {
    options.group = group;
    options.group_given = true;
  }
  auto chain = bake_to_chain(bake, options);
  EXPECT_TRUE(chain) << (chain ? "" : chain.error());
  if (!chain) {
    return {};
  }
  // Whatever it holds, the written file is TOML.
  parse_toml(chain->toml);
  return *chain;
}

bool dropped(const ImportedChain& chain, const std::string& needle) {
  for (const auto& line : chain.dropped) {
    if (line.find(needle) != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST(BakeFile, ReadsWhatBakePrintPrints) {
  auto text = read_file(k_bake / "three" / "bake.json");
  ASSERT_TRUE(text);
  BakeFile bake = parsed(*text);
  ASSERT_EQ(bake.targets.size(), 3U);
  const BakeTarget& app = bake.targets[0];
  EXPECT_EQ(app.key, "app");
  EXPECT_EQ(app.line, 10);
  EXPECT_EQ(app.context, "app");
  EXPECT_EQ(app.dockerfile, "Dockerfile");
  ASSERT_EQ(app.contexts.size(), 1U);
  EXPECT_EQ(app.contexts[0], (std::pair<std::string, std::string>{"base", "target:base"}));
  ASSERT_EQ(app.args.size(), 1U);
  EXPECT_EQ(app.args[0].second, "hello from bake");
  EXPECT_EQ(app.tags.size(), 2U);
  ASSERT_EQ(bake.groups.size(), 1U);
  EXPECT_EQ(bake.groups[0].targets, std::vector<std::string>{"test"});
}

TEST(BakeFile, ReadsBuildxObjectFormsOfEntries) {
  BakeFile bake = parsed(R"({"target": {"app": {
    "secret": [{"id": "npm", "env": "NPM_TOKEN"}, "id=netrc,src=.netrc", "type=env,id=gh,src=GH"],
    "cache-from": [{"type": "registry", "ref": "r.example/app:cache"}, "r.example/app:old"],
    "cache-to": [{"type": "inline"}],
    "args": {"UNSET": null},
    "output": [{"type": "docker", "dest": "out.tar"}]
  }}})");
  ASSERT_EQ(bake.targets.size(), 1U);
  const BakeTarget& app = bake.targets[0];
  ASSERT_EQ(app.secrets.size(), 3U);
  EXPECT_EQ(app.secrets[0].env, "NPM_TOKEN");
  EXPECT_EQ(app.secrets[1].src, ".netrc");
  EXPECT_EQ(app.secrets[2].env, "GH");
  EXPECT_EQ(app.cache_from, (std::vector<std::string>{"type=registry,ref=r.example/app:cache",
                                                      "r.example/app:old"}));
  EXPECT_EQ(app.cache_to, std::vector<std::string>{"type=inline"});
  EXPECT_FALSE(app.args[0].second);
  ASSERT_EQ(app.other.size(), 1U);
  EXPECT_EQ(app.other[0].key, "output");
  EXPECT_EQ(app.other[0].shown, "type=docker,dest=out.tar");
}

TEST(BakeFile, AppliesInheritsAsBuildxMerges) {
  BakeFile bake = parsed(R"({"target": {
    "common": {"context": "src", "args": {"A": "1", "B": "1"}, "platforms": ["linux/amd64"]},
    "app": {"inherits": ["common"], "args": {"B": "2"}, "platforms": ["linux/arm64"]}
  }})");
  const BakeTarget& app = bake.targets[1];
  EXPECT_EQ(app.context, "src");
  ASSERT_EQ(app.args.size(), 2U);
  EXPECT_EQ(app.args[0].second, "1");
  EXPECT_EQ(app.args[1].second, "2");
  EXPECT_EQ(app.platforms, std::vector<std::string>{"linux/arm64"});
}

TEST(BakeFile, MalformedJsonIsAnErrorAtItsLineAndColumn) {
  Diagnostic error =
      parse_error("{\n  \"target\": {\n    \"app\": {\"context\": \".\",}\n  }\n}\n");
  EXPECT_EQ(error.pos.file, "bake.json");
  EXPECT_EQ(error.pos.line, 3);
  EXPECT_EQ(error.pos.column, 29);
  EXPECT_NE(error.message.find("not valid JSON"), std::string::npos) << error.message;
}

TEST(BakeFile, ANumberTooLargeIsAnErrorAtTheNumber) {
  Diagnostic error = parse_error("{\n  \"group\": 4E888\n}\n");
  EXPECT_EQ(error.pos.line, 2);
  EXPECT_EQ(error.pos.column, 12);
  EXPECT_EQ(error.message, "not valid JSON: a number too large to read");
}

TEST(BakeFile, AFieldOfTheWrongShapeIsAnErrorAtItsValue) {
  Diagnostic error =
      parse_error("{\n  \"target\": {\n    \"app\": {\n      \"args\": [\"A=1\"]\n    }\n  }\n}\n");
  EXPECT_EQ(error.pos.line, 4);
  EXPECT_EQ(error.pos.column, 15);
  EXPECT_EQ(error.message, "'target.app.args' must be an object of strings, not an array");
  EXPECT_EQ(parse_error(R"({"target": {"a": {"inherits": ["a"]}}})").message,
            "target 'a' inherits itself");
  EXPECT_EQ(parse_error(R"({"target": {"a": {"inherits": ["b"]}}})").message,
            "target 'a' inherits 'b', which the file does not define");
  EXPECT_NE(parse_error("[1]").message.find("must be a JSON object"), std::string::npos);
  EXPECT_NE(parse_error(std::string(100, '[')).message.find("nested deeper"), std::string::npos);
}

TEST(BakeChain, MapsTargetsToStagesInRunOrder) {
  auto text = read_file(k_bake / "three" / "bake.json");
  ASSERT_TRUE(text);
  ImportedChain chain = imported(parsed(*text));
  auto table = parse_toml(chain.toml);
  ASSERT_TRUE(table);
  const auto* stages = (*table)["stage"].as_array();
  ASSERT_NE(stages, nullptr);
  ASSERT_EQ(stages->size(), 3U);
  auto stage = [&](size_t i) { return *(*stages)[i].as_table(); };
  EXPECT_EQ(stage(0)["name"].value_or(std::string()), "base");
  EXPECT_EQ(stage(0)["dockerfile"].value_or(std::string()), "base.Dockerfile");
  EXPECT_FALSE(stage(0).contains("context")); // the chain's own folder
  EXPECT_EQ(stage(1)["name"].value_or(std::string()), "app");
  // bake reads the Dockerfile from the context; kiln from the chain's folder.
  EXPECT_EQ(stage(1)["dockerfile"].value_or(std::string()), "app/Dockerfile");
  EXPECT_EQ(stage(1)["context"].value_or(std::string()), "app");
  EXPECT_EQ(stage(1)["tag"].value_or(std::string()), "registry.example/bake-app:dev");
  EXPECT_EQ(stage(1)["needs"][0].value_or(std::string()), "base");
  EXPECT_EQ(stage(1)["build_args"]["GREETING"].value_or(std::string()), "hello from bake");
  EXPECT_EQ(stage(2)["needs"][0].value_or(std::string()), "app");
  EXPECT_TRUE(dropped(chain, "target app: tags registry.example/bake-app:latest"));
  EXPECT_NE(chain.toml.find("#   target app: tags"), std::string::npos) << chain.toml;
}

TEST(BakeChain, WrittenChainLoads) {
  testing::TempDir dir;
  for (const auto& entry : fs::recursive_directory_iterator(k_bake / "three")) {
    fs::path relative = fs::relative(entry.path(), k_bake / "three");
    if (entry.is_regular_file()) {
      dir.write(relative.string(), *read_file(entry.path()));
    }
  }
  BakeImport options;
  options.bake_file = dir.path() / "bake.json";
  options.chain_dir = dir.path();
  options.chain_name = "three";
  auto chain = bake_to_chain(parsed(dir.read("bake.json")), options);
  ASSERT_TRUE(chain);
  dir.write("chain.toml", chain->toml);
  auto loaded = load_chain(dir.path() / "chain.toml");
  ASSERT_TRUE(loaded) << format_diagnostic(loaded.error().front()) << chain->toml;
  ASSERT_EQ(loaded->stages.size(), 3U);
  EXPECT_EQ(loaded->stages[2].needs, std::vector<std::string>{"app"});
}

TEST(BakeChain, AStageTakesTheNameItsDependentsKnowItBy) {
  ImportedChain chain = imported(parsed(R"({"target": {
    "base-image": {"dockerfile": "base.Dockerfile"},
    "app": {"contexts": {"base": "target:base-image"}}
  }})"));
  EXPECT_NE(chain.toml.find("# bake target base-image\nname = \"base\"\n"), std::string::npos)
      << chain.toml;
  EXPECT_NE(chain.toml.find("needs = [\"base\"]"), std::string::npos) << chain.toml;
  EXPECT_TRUE(chain.dropped.empty());
}

TEST(BakeChain, TwoNamesForOneStageAreReported) {
  ImportedChain chain = imported(parsed(R"({"target": {
    "base": {"dockerfile": "base.Dockerfile"},
    "app": {"contexts": {"root": "target:base"}},
    "tool": {"contexts": {"base": "target:base"}}
  }})"));
  EXPECT_TRUE(dropped(chain, "target app: context root = target:base is handed over as 'base'"))
      << chain.toml;
  EXPECT_FALSE(dropped(chain, "target tool"));
}

TEST(BakeChain, ListsWhatHasNoPlaceInAChain) {
  ImportedChain chain = imported(parsed(R"({"target": {
    "app": {"output": ["type=registry"], "ssh": ["default"], "network": "none",
            "contexts": {"src": "docker-image://alpine:3.19", "docs": "../docs"},
            "cache-from": ["type=gha"], "labels": {"a": "b"}, "no-cache": true,
            "args": {"A": null}},
    "inline": {"dockerfile-inline": "FROM scratch"}
  }})"));
  for (const char* line :
       {"target app: output type=registry (kiln keeps the image in the engine's store; see "
        "docs/publish.md)",
        "target app: ssh default", "target app: network none",
        "target app: context src = docker-image://alpine:3.19",
        "target app: context docs = ../docs", "target app: cache-from type=gha",
        "target app: labels a=b", "target app: no-cache", "target app: args.A = null",
        "target inline: dockerfile-inline"}) {
    EXPECT_TRUE(dropped(chain, line)) << line << "\n" << chain.toml;
  }
  EXPECT_EQ(chain.toml.find("name = \"inline\""), std::string::npos);
  EXPECT_EQ(chain.toml.find("engine = "), std::string::npos);
}

TEST(BakeChain, RegistryCachesMakeABuildkitChain) {
  ImportedChain chain = imported(parsed(R"({"target": {"app": {
    "cache-from": ["r.example/app:cache"], "cache-to": ["type=inline"]}}})"));
  EXPECT_NE(chain.toml.find("engine = \"buildkit\""), std::string::npos) << chain.toml;
  EXPECT_NE(chain.toml.find("cache_from = [\"type=registry,ref=r.example/app:cache\"]"),
            std::string::npos);
  EXPECT_NE(chain.toml.find("cache_to = [\"type=inline\"]"), std::string::npos);
}

TEST(BakeChain, PlatformsBecomeLanes) {
  ImportedChain chain = imported(parsed(R"({"target": {
    "base": {"platforms": ["linux/amd64", "linux/arm64", "linux/arm/v7"]},
    "app": {"platforms": ["linux/x86_64"], "contexts": {"base": "target:base"}}
  }})"));
  EXPECT_NE(chain.toml.find("[[lane]]\nname = \"amd64\"\nplatform = \"linux/amd64\"\n"),
            std::string::npos)
      << chain.toml;
  EXPECT_NE(chain.toml.find("name = \"arm-v7\"\nplatform = \"linux/arm/v7\""), std::string::npos);
  EXPECT_NE(chain.toml.find("needs = [\"base\"]\nlanes = [\"amd64\"]\n"), std::string::npos);
  // base builds in every lane: no lanes key.
  EXPECT_EQ(chain.toml.find("name = \"base\"\ndockerfile = \"Dockerfile\"\nlanes"),
            std::string::npos);
}

TEST(BakeChain, MatrixIsWrittenForKilnToExpand) {
  auto text = read_file(k_bake / "matrix" / "docker-bake.json");
  ASSERT_TRUE(text);
  ImportedChain chain = imported(parsed(*text));
  EXPECT_NE(chain.toml.find("name = \"lib-${flavor}\"\ndockerfile = \"lib.Dockerfile\"\n"
                            "target = \"${flavor}\"\nneeds = [\"toolchain\"]\n"
                            "matrix = { flavor = [\"small\", \"full\"] }\n"
                            "build_args = { FLAVOR = \"${flavor}\" }\n"),
            std::string::npos)
      << chain.toml;
  EXPECT_TRUE(dropped(chain, "variable (kiln does not evaluate bake's variable blocks"));
  EXPECT_TRUE(dropped(chain, "target docs: dockerfile-inline"));
  EXPECT_EQ(chain.toml.find("_common"), std::string::npos) << "not in the default group";
}

TEST(BakeChain, GroupsChooseTheTargets) {
  BakeFile bake = parsed(R"({"group": {"default": {"targets": ["a"]}, "all": {"targets":
    ["default", "b"]}}, "target": {"a": {}, "b": {}, "c": {}}})");
  ImportedChain chain = imported(bake);
  EXPECT_NE(chain.toml.find("name = \"a\""), std::string::npos);
  EXPECT_EQ(chain.toml.find("name = \"b\""), std::string::npos);
  chain = imported(bake, "all");
  EXPECT_NE(chain.toml.find("name = \"b\""), std::string::npos);
  EXPECT_EQ(chain.toml.find("name = \"c\""), std::string::npos);
  BakeImport options;
  options.group = "none";
  options.group_given = true;
  auto missing = bake_to_chain(bake, options);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), "the bake file has no group 'none'; its groups: all, default");
}

TEST(BakeChain, TargetsThatNeedEachOtherAreAnError) {
  BakeImport options;
  auto chain = bake_to_chain(parsed(R"({"target": {"a": {"contexts": {"b": "target:b"}},
    "b": {"contexts": {"a": "target:a"}}}})"),
                             options);
  ASSERT_FALSE(chain);
  EXPECT_NE(chain.error().find("targets a, b build on each other"), std::string::npos);
}

TEST(BakeChain, NamesAndStringsAreWrittenSoTomlReadsThemBack) {
  EXPECT_EQ(as_stage_name("App_Server"), "app_server");
  EXPECT_EQ(as_stage_name("web:v2"), "web-v2");
  EXPECT_EQ(as_stage_name("1st"), "t-1st");
  EXPECT_EQ(as_stage_name("lib-${flavor}"), "lib-${flavor}");
  std::string awkward = "quote \" backslash \\ tab \t newline \n bell \x07 del \x7f é";
  auto table = parse_toml("v = " + toml_string(awkward));
  ASSERT_TRUE(table);
  EXPECT_EQ((*table)["v"].value_or(std::string()), awkward);
}

} // namespace
} // namespace kiln
