// Which cache levels an environment configures for sccache, and what dropping one changes.
#include <gtest/gtest.h>

#include "compilecache/multilevel.h"

namespace kiln::cc {
namespace {

std::vector<std::string> names_of(const std::vector<CacheLevel>& levels) {
  std::vector<std::string> names;
  for (const CacheLevel& level : levels) {
    names.push_back(level.name);
  }
  return names;
}

TEST(CacheLevels, TheChainGivesTheLevelsInOrderWithTheirEndpoints) {
  Environment env = {{"SCCACHE_MULTILEVEL_CHAIN", " Disk , webdav,s3 "},
                     {"SCCACHE_DIR", "/var/cache/sccache"},
                     {"SCCACHE_WEBDAV_ENDPOINT", "http://127.0.0.1:5000"},
                     {"SCCACHE_BUCKET", "sccache"},
                     {"SCCACHE_ENDPOINT", "127.0.0.1:3900"}};
  auto levels = configured_levels(env);
  ASSERT_EQ(names_of(levels), (std::vector<std::string>{"disk", "webdav", "s3"}));
  EXPECT_TRUE(levels[0].endpoints.empty());
  ASSERT_EQ(levels[1].endpoints.size(), 1u);
  EXPECT_EQ(levels[1].endpoints[0].variable, "SCCACHE_WEBDAV_ENDPOINT");
  EXPECT_EQ(levels[1].endpoints[0].url, "http://127.0.0.1:5000");
  ASSERT_EQ(levels[2].endpoints.size(), 1u);
  EXPECT_EQ(levels[2].endpoints[0].variable, "SCCACHE_ENDPOINT");
  EXPECT_EQ(levels[2].endpoints[0].default_scheme, "http");
}

TEST(CacheLevels, S3UseSslDecidesTheScheme) {
  // src/cache/s3.rs endpoint_resolver: the flag overrides even a scheme in the URL.
  Environment env = {{"SCCACHE_BUCKET", "b"},
                     {"SCCACHE_ENDPOINT", "http://s3.lan:3900"},
                     {"SCCACHE_S3_USE_SSL", "true"}};
  auto levels = configured_levels(env);
  ASSERT_EQ(levels.size(), 1u);
  EXPECT_EQ(levels[0].endpoints.at(0).url, "https://s3.lan:3900");
  env["SCCACHE_ENDPOINT"] = "s3.lan";
  env["SCCACHE_S3_USE_SSL"] = "off";
  EXPECT_EQ(configured_levels(env)[0].endpoints.at(0).default_scheme, "http");
}

TEST(CacheLevels, WithoutAChainEveryConfiguredRemoteBackendInSccachesPrecedence) {
  Environment env = {{"SCCACHE_WEBDAV_ENDPOINT", "http://dav.lan"},
                     {"SCCACHE_BUCKET", "b"},
                     {"SCCACHE_DIR", "/cache"},
                     {"SCCACHE_GHA_ENABLED", "false"},
                     {"SCCACHE_REDIS_CLUSTER_ENDPOINTS", "redis://a.lan:7000, redis://b.lan:7001"},
                     {"SCCACHE_GCS_BUCKET", ""}};
  auto levels = configured_levels(env);
  EXPECT_EQ(names_of(levels), (std::vector<std::string>{"s3", "redis", "webdav"}));
  EXPECT_TRUE(levels[0].endpoints.empty()) << "S3 without SCCACHE_ENDPOINT: the SDK's address";
  ASSERT_EQ(levels[1].endpoints.size(), 2u);
  EXPECT_EQ(levels[1].endpoints[1].url, "redis://b.lan:7001");
}

TEST(CacheLevels, AnOldSccacheIgnoresTheChain) {
  Environment env = {{"SCCACHE_MULTILEVEL_CHAIN", "disk,webdav"},
                     {"SCCACHE_WEBDAV_ENDPOINT", "http://dav.lan"}};
  EXPECT_EQ(names_of(configured_levels(env, false)), (std::vector<std::string>{"webdav"}));
}

TEST(CacheLevels, AnUnknownChainEntryIsALevelWithNothingToProbe) {
  Environment env = {{"SCCACHE_MULTILEVEL_CHAIN", "disk,floppy"}};
  auto levels = configured_levels(env);
  ASSERT_EQ(names_of(levels), (std::vector<std::string>{"disk", "floppy"}));
  EXPECT_TRUE(levels[1].endpoints.empty());
}

TEST(CacheLevels, ALevelsVariablesAreItsOwnOnly) {
  Environment env = {{"SCCACHE_BUCKET", "b"},        {"SCCACHE_ENDPOINT", "e"},
                     {"SCCACHE_REGION", "r"},        {"SCCACHE_S3_KEY_PREFIX", "p"},
                     {"SCCACHE_S3_USE_SSL", "true"}, {"AWS_ACCESS_KEY_ID", "k"},
                     {"SCCACHE_DIR", "/c"},          {"SCCACHE_WEBDAV_ENDPOINT", "w"},
                     {"SCCACHE_REDIS", "redis://x"}, {"SCCACHE_REDIS_TTL", "5"}};
  EXPECT_EQ(level_variables("s3", env),
            (std::vector<std::string>{"SCCACHE_BUCKET", "SCCACHE_ENDPOINT", "SCCACHE_REGION",
                                      "SCCACHE_S3_KEY_PREFIX", "SCCACHE_S3_USE_SSL"}));
  EXPECT_EQ(level_variables("redis", env),
            (std::vector<std::string>{"SCCACHE_REDIS", "SCCACHE_REDIS_TTL"}));
  EXPECT_EQ(level_variables("disk", env), (std::vector<std::string>{"SCCACHE_DIR"}));
  EXPECT_TRUE(level_variables("floppy", env).empty());
}

TEST(CacheLevels, DroppingALevelRewritesTheChainAndUnsetsItsVariables) {
  Environment env = {{"SCCACHE_MULTILEVEL_CHAIN", "disk,webdav,s3"},
                     {"SCCACHE_WEBDAV_ENDPOINT", "http://dav.lan"},
                     {"SCCACHE_WEBDAV_TOKEN", "t"},
                     {"SCCACHE_BUCKET", "b"}};
  auto changes = drop_level(env, "webdav");
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].name, "SCCACHE_MULTILEVEL_CHAIN");
  EXPECT_EQ(changes[0].value, "disk,s3");
  EXPECT_EQ(changes[1].name, "SCCACHE_WEBDAV_ENDPOINT");
  EXPECT_FALSE(changes[1].value);
  EXPECT_EQ(changes[2].name, "SCCACHE_WEBDAV_TOKEN");
  EXPECT_EQ(env.count("SCCACHE_WEBDAV_ENDPOINT"), 0u);
  EXPECT_EQ(env.at("SCCACHE_MULTILEVEL_CHAIN"), "disk,s3");
  EXPECT_EQ(env.at("SCCACHE_BUCKET"), "b");
}

TEST(CacheLevels, DroppingTheLastChainEntryUnsetsTheChain) {
  Environment env = {{"SCCACHE_MULTILEVEL_CHAIN", "webdav"},
                     {"SCCACHE_WEBDAV_ENDPOINT", "http://dav.lan"}};
  auto changes = drop_level(env, "webdav");
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].name, "SCCACHE_MULTILEVEL_CHAIN");
  EXPECT_FALSE(changes[0].value);
  EXPECT_TRUE(env.empty());
}

TEST(CacheLevels, WithoutAChainDroppingUnsetsTheVariablesOnly) {
  Environment env = {{"SCCACHE_WEBDAV_ENDPOINT", "http://dav.lan"}, {"SCCACHE_DIR", "/c"}};
  auto changes = drop_level(env, "webdav");
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].name, "SCCACHE_WEBDAV_ENDPOINT");
  EXPECT_EQ(env.size(), 1u);
}

TEST(CacheLevels, ReadOnlyLevelsAndTheWritePolicy) {
  Environment env = {{"SCCACHE_S3_RW_MODE", "read_only"}, {"SCCACHE_WEBDAV_RW_MODE", "READ_WRITE"}};
  EXPECT_TRUE(level_read_only("s3", env));
  EXPECT_FALSE(level_read_only("webdav", env));
  EXPECT_FALSE(level_read_only("disk", env));
  EXPECT_TRUE(level_read_only("gcs", env)) << "upstream defaults GCS to READ_ONLY";
  EXPECT_FALSE(level0_failures_start_uploads(env));
  env["SCCACHE_MULTILEVEL_WRITE_ERROR_POLICY"] = "Ignore";
  EXPECT_TRUE(level0_failures_start_uploads(env));
  env["SCCACHE_MULTILEVEL_WRITE_ERROR_POLICY"] = "l0";
  EXPECT_FALSE(level0_failures_start_uploads(env));
}

} // namespace
} // namespace kiln::cc
