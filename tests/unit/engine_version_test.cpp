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

} // namespace
} // namespace kiln::testing
