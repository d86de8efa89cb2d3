// A run asks the engine's version only when what answers it changed since the run before.
#include <optional>

#include <gtest/gtest.h>

#include "driver/engine_version.h"
#include "fake_engine.h"
#include "temp_dir.h"

namespace kiln::testing {
namespace {

/// An engine whose answer and identity a test sets, counting how often it is asked.
class AskedEngine : public FakeEngine {
public:
  tl::expected<std::string, std::string> version() const override {
    ++asked;
    if (!answer) {
      return tl::unexpected(std::string("buildkitd is unreachable"));
    }
    return *answer;
  }
  std::string version_key() const override { return key; }

  std::optional<std::string> answer = "buildkitd v0.11.6, buildctl v0.11.6";
  std::string key = "buildctl /usr/bin/buildctl 1:2 3 4.5 6.7";
  mutable int asked = 0;
};

TEST(EngineVersion, AskedOnceWhileTheKeyStaysTheSame) {
  TempDir records;
  AskedEngine engine;
  auto first = engine_version(engine, records.path());
  ASSERT_TRUE(first);
  EXPECT_FALSE(first->remembered);
  remember_engine_version(records.path(), *first);

  engine.answer = "not asked";
  auto second = engine_version(engine, records.path());
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->remembered);
  EXPECT_EQ(second->text, "buildkitd v0.11.6, buildctl v0.11.6");
  EXPECT_EQ(engine.asked, 1);
}

TEST(EngineVersion, AskedAgainWhenTheKeyChanges) {
  TempDir records;
  AskedEngine engine;
  remember_engine_version(records.path(), *engine_version(engine, records.path()));
  engine.key = "buildctl /usr/bin/buildctl 1:2 3 4.5 6.8"; // buildctl replaced
  engine.answer = "buildkitd v0.11.6, buildctl v0.12.0";
  auto after = engine_version(engine, records.path());
  ASSERT_TRUE(after);
  EXPECT_FALSE(after->remembered);
  EXPECT_EQ(after->text, "buildkitd v0.11.6, buildctl v0.12.0");
  EXPECT_EQ(engine.asked, 2);
}

TEST(EngineVersion, WithoutAKeyEveryRunAsksAndNothingIsKept) {
  TempDir records;
  AskedEngine engine;
  engine.key.clear(); // a tcp:// daemon
  remember_engine_version(records.path(), *engine_version(engine, records.path()));
  EXPECT_TRUE(engine_version(engine, records.path()));
  EXPECT_EQ(engine.asked, 2);
  EXPECT_FALSE(std::filesystem::exists(records.path() / "engine-version"));
}

TEST(EngineVersion, AnErrorIsNeverKeptAndTheNextRunAsksAgain) {
  TempDir records;
  AskedEngine engine;
  engine.answer.reset();
  auto failed = engine_version(engine, records.path());
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error(), "buildkitd is unreachable");
  engine.answer = "buildkitd v0.11.6, buildctl v0.11.6";
  EXPECT_FALSE(engine_version(engine, records.path())->remembered);
}

TEST(EngineVersion, AnUnreadableOrForeignFileIsAskedPast) {
  TempDir records;
  AskedEngine engine;
  for (const char* text : {"", "\n", "only a key line", "buildctl other\nv1\n",
                           "buildctl /usr/bin/buildctl 1:2 3 4.5 6.7\n\n"}) {
    records.write("engine-version", text);
    auto version = engine_version(engine, records.path());
    ASSERT_TRUE(version) << text;
    EXPECT_FALSE(version->remembered) << text;
  }
  EXPECT_EQ(engine.asked, 5);
}

/// A daemon per host: each answers with its host in its version, or is unreachable, and
/// rejects every request when told to.
class HostedEngine : public FakeEngine {
public:
  explicit HostedEngine(std::string host = "", const std::string* down = nullptr,
                        std::vector<std::string>* asked = nullptr)
      : m_host(std::move(host)), m_down(down), m_asked(asked) {}

  tl::expected<std::string, std::string> version() const override {
    if (m_asked != nullptr) {
      m_asked->push_back(m_host);
    }
    if (m_down != nullptr && *m_down == m_host) {
      return tl::unexpected("buildkitd is unreachable at " + m_host);
    }
    return "v-" + (m_host.empty() ? std::string("own") : m_host);
  }
  std::unique_ptr<Engine> on_host(const BuildRequest& request) const override {
    return std::make_unique<HostedEngine>(request.host, m_down, m_asked);
  }
  std::vector<std::string> unsupported(const std::vector<BuildRequest>& requests,
                                       const std::string& version) const override {
    std::vector<std::string> problems;
    for (const auto& request : requests) {
      problems.push_back(request.stage + " on " + version);
    }
    return problems;
  }

private:
  std::string m_host;
  const std::string* m_down;
  std::vector<std::string>* m_asked;
};

BuildRequest built_on(const std::string& stage, const std::string& host) {
  BuildRequest request;
  request.stage = stage;
  request.host = host;
  return request;
}

TEST(EngineVersions, EveryLanesDaemonIsAskedAndChecksOnlyWhatBuildsThere) {
  TempDir records;
  std::vector<std::string> asked;
  HostedEngine engine("", nullptr, &asked);
  // Every request names its lane's daemon: the engine's own address is never asked, so a
  // chain whose lanes all have hosts needs no daemon at buildctl's default.
  auto versions =
      engine_versions(engine,
                      {built_on("a/base", "unix:///a.sock"), built_on("b/base", "tcp://b:1234"),
                       built_on("a/app", "unix:///a.sock")},
                      records.path());
  ASSERT_TRUE(versions);
  EXPECT_EQ(asked, (std::vector<std::string>{"unix:///a.sock", "tcp://b:1234"}));
  EXPECT_EQ(versions->text, "unix:///a.sock: v-unix:///a.sock; tcp://b:1234: v-tcp://b:1234");
  EXPECT_EQ(versions->problems,
            (std::vector<std::string>{"a/base on v-unix:///a.sock", "a/app on v-unix:///a.sock",
                                      "b/base on v-tcp://b:1234"}));

  // One daemon: its version alone, as without lanes.
  auto one = engine_versions(engine, {built_on("base", "")}, records.path());
  ASSERT_TRUE(one);
  EXPECT_EQ(one->text, "v-own");

  std::string down = "tcp://b:1234";
  HostedEngine broken("", &down);
  auto unreachable = engine_versions(
      broken, {built_on("a/base", "unix:///a.sock"), built_on("b/base", down)}, records.path());
  ASSERT_FALSE(unreachable);
  EXPECT_EQ(unreachable.error(), "buildkitd is unreachable at tcp://b:1234");
}

TEST(EngineVersions, AnEngineWithoutHostsIsAskedOnceForEveryRequest) {
  TempDir records;
  AskedEngine engine; // a FakeEngine: a host means nothing to it, as to buildah
  auto versions = engine_versions(
      engine, {built_on("a/base", "unix:///a.sock"), built_on("b/base", "tcp://b:1234")},
      records.path());
  ASSERT_TRUE(versions);
  EXPECT_EQ(engine.asked, 1);
  EXPECT_EQ(versions->text, "buildkitd v0.11.6, buildctl v0.11.6");
}

} // namespace
} // namespace kiln::testing
