// kiln explain and kiln run --dry-run --explain on the demo chain: the real buildah in a store of
// the test's own, and the fake buildctl replaying BuildKit's recordings. Each edit is predicted
// first, then run, and the prediction is held against what the engine did.

#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kiln_harness.h"
#include "util/process.h"

namespace kiln::testing {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;
using nlohmann::json;

json parsed(const KilnResult& result) {
  json j = json::parse(result.output.substr(result.output.find('{')), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << result.output;
  return j;
}

struct Prediction {
  std::set<std::string> rebuild; // sure to build
  std::set<std::string> maybe;   // builds unless what it copies comes out the same
  json stages;
};

Prediction predict(const ChainDir& dir, const Env& env, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"explain",    "--plan",   "--chain",
                                   "chain.toml", "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  KilnResult plan = dir.kiln(args, nullptr, env);
  EXPECT_EQ(plan.exit_code, 0) << plan.output;
  Prediction p;
  p.stages = parsed(plan)["stages"];
  for (const auto& s : p.stages) {
    if (s["verdict"] == "rebuild") {
      p.rebuild.insert(s["stage"]);
    } else if (s["verdict"] == "maybe") {
      p.maybe.insert(s["stage"]);
    }
  }
  return p;
}

/// The stages of the newest run that built (ran steps), and their causes from kiln explain.
std::map<std::string, json> built_causes(const ChainDir& dir, const Env& env) {
  KilnResult explained =
      dir.kiln({"explain", "latest", "--chain", "chain.toml", "--format", "json"}, nullptr, env);
  EXPECT_EQ(explained.exit_code, 0) << explained.output;
  std::map<std::string, json> causes;
  const json explanation = parsed(explained);
  for (const auto& s : explanation["stages"]) {
    if (s["outcome"] == "built") {
      causes[s["stage"]] = s["cause"];
    }
  }
  return causes;
}

/// The prediction held against the run: every stage sure to build built, every stage that
/// built was predicted to (surely or maybe), and none predicted reused built.
void expect_prediction_held(const Prediction& p, const std::map<std::string, json>& built) {
  for (const auto& stage : p.rebuild) {
    EXPECT_TRUE(built.count(stage) > 0) << stage << " was predicted to rebuild and was reused";
  }
  for (const auto& [stage, cause] : built) {
    EXPECT_TRUE(p.rebuild.count(stage) > 0 || p.maybe.count(stage) > 0)
        << stage << " built although predicted reused; its cause: " << cause.dump();
  }
}

std::set<std::string> names(const std::map<std::string, json>& built) {
  std::set<std::string> out;
  for (const auto& [stage, cause] : built) {
    out.insert(stage);
  }
  return out;
}

TEST(Explain, EachEditOfTheDemoChainIsPredictedThenNamedAsTheCause) {
  ChainDir dir;
  dir.copy_unique_demo();
  std::string conf = dir.private_buildah_store();
  Env env = {{"CONTAINERS_STORAGE_CONF", conf}};

  // A first run: nothing to compare with.
  ASSERT_EQ(dir.kiln({"run", "chain.toml"}, nullptr, env).exit_code, 0);
  auto first = built_causes(dir, env);
  EXPECT_EQ(first.size(), 5u);
  for (const auto& [stage, cause] : first) {
    EXPECT_EQ(cause["kind"], "new") << stage;
  }

  // Unchanged: every build stage reused; the smoke stage runs every time and says so.
  Prediction same = predict(dir, env);
  EXPECT_EQ(same.rebuild, (std::set<std::string>{"smoke"}));
  EXPECT_TRUE(same.maybe.empty());
  ASSERT_EQ(dir.kiln({"run", "chain.toml"}, nullptr, env).exit_code, 0);
  auto unchanged = built_causes(dir, env);
  expect_prediction_held(same, unchanged);
  EXPECT_EQ(names(unchanged), (std::set<std::string>{"smoke"}));
  EXPECT_EQ(unchanged["smoke"]["kind"], "cache-bypassed");

  // One source file of the libraries edited.
  dir.write("src/greet.c", dir.read("src/greet.c") + "/* edited */\n");
  Prediction edit = predict(dir, env);
  EXPECT_EQ(edit.rebuild, (std::set<std::string>{"libs", "smoke"}));
  EXPECT_EQ(edit.maybe, (std::set<std::string>{"final"})); // it copies /opt/lib from libs
  ASSERT_EQ(dir.kiln({"run", "chain.toml"}, nullptr, env).exit_code, 0);
  auto edited = built_causes(dir, env);
  expect_prediction_held(edit, edited);
  EXPECT_EQ(names(edited), (std::set<std::string>{"libs", "final", "smoke"}));
  EXPECT_EQ(edited["libs"]["kind"], "context-changed");
  EXPECT_EQ(edited["libs"]["detail"]["changed"], json::array({"src/greet.c"}));
  EXPECT_EQ(edited["libs"]["step"], "COPY src/greet.c src/farewell.c /src/");
  EXPECT_EQ(edited["final"]["kind"], "parent-rebuilt");
  EXPECT_EQ(edited["final"]["detail"]["parent"], "libs");
  EXPECT_NE(edited["final"]["summary"].get<std::string>().find("parent libs rebuilt"),
            std::string::npos);
  EXPECT_EQ(edited["smoke"]["detail"]["parent"], "final");
  // The cost is the edit's: libs and what it dragged along.
  KilnResult tty = dir.kiln({"explain", "--chain", "chain.toml"}, nullptr, env);
  EXPECT_NE(tty.output.find("across 3 stage(s)"), std::string::npos) << tty.output;
  // The report draws the same, as a browser renders it.
  KilnResult report = dir.kiln({"report", "latest", "--records", "records", "-o", "r.html"});
  ASSERT_EQ(report.exit_code, 0) << report.output;
  std::string dom = rendered_dom(dir, dir.path() / "r.html");
  EXPECT_NE(dom.find("data-stage=\"libs\" data-cause=\"context-changed\" data-root=\"libs\""),
            std::string::npos);
  EXPECT_NE(dom.find("data-stage=\"final\" data-cause=\"parent-rebuilt\" data-root=\"libs\""),
            std::string::npos);
  EXPECT_NE(dom.find("<li data-root=\"libs\""), std::string::npos);

  // A pin overridden on the command line.
  Prediction arg = predict(dir, env, {"--build-arg", "TOOLCHAIN_VERSION=9"});
  EXPECT_TRUE(arg.rebuild.count("toolchain") > 0);
  ASSERT_EQ(
      dir.kiln({"run", "chain.toml", "--build-arg", "TOOLCHAIN_VERSION=9"}, nullptr, env).exit_code,
      0);
  auto argued = built_causes(dir, env);
  expect_prediction_held(arg, argued);
  const json& toolchain = argued["toolchain"];
  EXPECT_EQ(toolchain["kind"], "build-arg-changed");
  EXPECT_EQ(toolchain["detail"]["name"], "TOOLCHAIN_VERSION");
  EXPECT_EQ(toolchain["detail"]["old"], "1.4.0");
  EXPECT_EQ(toolchain["detail"]["new"], "9");
  EXPECT_EQ(toolchain["detail"]["source"], "--build-arg");
  EXPECT_EQ(argued["libs"]["kind"], "parent-rebuilt");

  // The same inputs, but the store emptied behind kiln's back: every stage is cold and says
  // what kiln saw. A reclaim kiln did in between is named.
  // Its target is out of reach (exit 1): it removes all it may, and journals what it removed.
  KilnResult reclaim =
      dir.kiln({"disk", "reclaim", "chain.toml", "--target-gb", "100000"}, nullptr, env);
  EXPECT_EQ(reclaim.exit_code, 1) << reclaim.output;
  CapturedRun removed = run_captured(
      {"env", "CONTAINERS_STORAGE_CONF=" + conf, "buildah", "rmi", "--all", "--force"});
  ASSERT_TRUE(removed.exit.ok()) << removed.output;
  Prediction cold = predict(dir, env, {"--build-arg", "TOOLCHAIN_VERSION=9"});
  EXPECT_EQ(cold.rebuild, (std::set<std::string>{"base", "toolchain", "libs", "final", "smoke"}));
  EXPECT_EQ(cold.stages[0]["cause"]["kind"], "cold");
  ASSERT_EQ(
      dir.kiln({"run", "chain.toml", "--build-arg", "TOOLCHAIN_VERSION=9"}, nullptr, env).exit_code,
      0);
  auto colder = built_causes(dir, env);
  expect_prediction_held(cold, colder);
  EXPECT_EQ(colder["base"]["kind"], "cold");
  std::string evidence = colder["base"]["detail"]["evidence"].dump();
  EXPECT_NE(evidence.find("gone from buildah's store"), std::string::npos) << evidence;
  EXPECT_NE(evidence.find("kiln disk reclaim at"), std::string::npos) << evidence;

  // The history adds up what each first cause cost over these runs.
  KilnResult causes =
      dir.kiln({"history", "--causes", "--chain", "chain.toml", "--format", "json"}, nullptr, env);
  ASSERT_EQ(causes.exit_code, 0) << causes.output;
  std::set<std::string> seen;
  const json costs = parsed(causes);
  for (const auto& c : costs["causes"]) {
    seen.insert(c["root"].get<std::string>() + " " + c["kind"].get<std::string>());
    if (c["root"] == "libs" && c["kind"] == "context-changed") {
      EXPECT_EQ(c["builds"], 3) << c.dump(); // libs, final, smoke
      EXPECT_EQ(c["runs"], 1) << c.dump();
    }
  }
  EXPECT_TRUE(seen.count("libs context-changed") > 0) << causes.output;
  EXPECT_TRUE(seen.count("toolchain build-arg-changed") > 0) << causes.output;
  EXPECT_TRUE(seen.count("base cold") > 0) << causes.output;
}

TEST(Explain, ABaseImageFromOutsideTheChainThatMovedIsNamedWithBothDigests) {
  ChainDir dir;
  std::string base = "localhost/explain-" + dir.nonce() + ":1";
  dir.build_image(std::string(k_base_dockerfile) + "RUN echo one > /marker\n", base);
  dir.write("app.Dockerfile", "FROM " + base + "\nRUN echo app > /app\n");
  dir.write("chain.toml", "[chain]\nname = \"exb" + dir.nonce() + "\"\n\n[[stage]]\n"
                          "name = \"app\"\ndockerfile = \"app.Dockerfile\"\n");
  ASSERT_EQ(dir.kiln({"run", "chain.toml"}).exit_code, 0);
  EXPECT_TRUE(predict(dir, {}).rebuild.empty()) << "nothing moved yet";

  // The same tag now names another image: what a registry's moving tag does to a pull.
  dir.build_image(std::string(k_base_dockerfile) + "RUN echo two > /marker\n", base);
  Prediction moved = predict(dir, {});
  EXPECT_EQ(moved.rebuild, (std::set<std::string>{"app"}));
  ASSERT_EQ(dir.kiln({"run", "chain.toml"}).exit_code, 0);
  auto built = built_causes(dir, {});
  ASSERT_EQ(built.size(), 1u);
  const json& cause = built["app"];
  EXPECT_EQ(cause["kind"], "base-moved") << cause.dump();
  EXPECT_EQ(cause["line"], 1);
  EXPECT_EQ(cause["detail"]["ref"], base);
  EXPECT_TRUE(cause["detail"]["old"].get<std::string>().starts_with("sha256:"));
  EXPECT_NE(cause["detail"]["old"], cause["detail"]["new"]);
  ChainDir::remove_image(base);
}

TEST(Explain, OnBuildkitABuildArgNamesItsOldAndNewValueAndItsDependantsTheirParent) {
  ChainDir dir;
  dir.copy_demo_for_replay();
  FakeBuildkit fake(dir);
  Env env = fake.env();
  ASSERT_EQ(dir.kiln({"run", "--engine", "buildkit", "chain.toml"}, nullptr, env).exit_code, 0);
  // What a daemon does with a toolchain pin changed: the toolchain and everything built FROM
  // it run their steps again; base does not.
  Prediction arg =
      predict(dir, env, {"--engine", "buildkit", "--build-arg", "TOOLCHAIN_VERSION=9"});
  EXPECT_EQ(arg.rebuild, (std::set<std::string>{"toolchain", "libs"}));
  // final copies from libs, and the replayed chain's smoke stage is a build FROM final.
  EXPECT_EQ(arg.maybe, (std::set<std::string>{"final", "smoke"}));
  fake.plan("base.Dockerfile build-cached\n* build-fresh\n");
  ASSERT_EQ(
      dir.kiln({"run", "--engine", "buildkit", "chain.toml", "--build-arg", "TOOLCHAIN_VERSION=9"},
               nullptr, env)
          .exit_code,
      0);
  auto built = built_causes(dir, env);
  expect_prediction_held(arg, built);
  EXPECT_EQ(built["toolchain"]["kind"], "build-arg-changed");
  EXPECT_EQ(built["toolchain"]["detail"]["old"], "1.4.0");
  EXPECT_EQ(built["toolchain"]["detail"]["new"], "9");
  EXPECT_EQ(built["libs"]["kind"], "parent-rebuilt");
  EXPECT_EQ(built["libs"]["detail"]["parent"], "toolchain");
  EXPECT_EQ(built["final"]["detail"]["parent"], "libs");
  EXPECT_TRUE(built["libs"]["detail"]["new"].get<std::string>().starts_with("sha256:"));
}

} // namespace
} // namespace kiln::testing
