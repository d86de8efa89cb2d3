#include "gates/image_env.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path k_cases = fs::path(KILN_TEST_FIXTURES) / "image-env-cases.json";

nlohmann::json load_cases() {
  std::ifstream in(k_cases);
  if (!in) {
    ADD_FAILURE() << "cannot open " << k_cases;
    return nlohmann::json::array();
  }
  return nlohmann::json::parse(in);
}

TEST(ImageEnvCases, FileHasEnoughCasesOfBothVerdicts) {
  auto cases = load_cases();
  ASSERT_TRUE(cases.is_array());
  EXPECT_GE(cases.size(), 60u);
  std::size_t refuse = 0;
  std::size_t allow = 0;
  for (const auto& c : cases) {
    ASSERT_TRUE(c.contains("name") && c.contains("value") && c.contains("verdict") &&
                c.contains("reason"))
        << c.dump();
    auto verdict = c["verdict"].get<std::string>();
    ASSERT_TRUE(verdict == "refuse" || verdict == "allow") << c.dump();
    (verdict == "refuse" ? refuse : allow)++;
    // A refusal must say what it refuses, so the gate's report can be checked against it.
    EXPECT_EQ(verdict == "refuse", c.contains("offending")) << c.dump();
  }
  EXPECT_GT(refuse, 0u);
  EXPECT_GT(allow, 0u);
}

TEST(ImageEnvCases, EachCaseGradedAloneMatchesItsVerdict) {
  for (const auto& c : load_cases()) {
    auto name = c["name"].get<std::string>();
    auto value = c["value"].get<std::string>();
    auto reason = c["reason"].get<std::string>();
    SCOPED_TRACE(name + "=" + value + " -- " + reason);
    auto findings = grade_env({{name, value}}, {});
    if (c["verdict"] == "allow") {
      EXPECT_TRUE(findings.empty())
          << "refused as " << findings.front().offending << ": " << findings.front().message;
      continue;
    }
    ASSERT_FALSE(findings.empty()) << "allowed";
    EXPECT_EQ(findings.front().offending, c["offending"].get<std::string>());
    EXPECT_EQ(findings.front().name, name);
    EXPECT_EQ(findings.front().value, value);
  }
}

TEST(ImageEnvSecrets, AMessageNeverPrintsTheSecretWhole) {
  const std::string token = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8";
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"GITHUB_TOKEN", token},
                                                        {"CI_BOOTSTRAP", "x " + token + " y"},
                                                        {"DB_PASSWORD", "correct horse battery"},
                                                        {"MIRROR", "https://ci:hunter2@host/"},
                                                        {"DB_PASSWORD", "root"},
                                                        {"API_KEY", "0123456789a"}}) {
    SCOPED_TRACE(name);
    auto findings = grade_env({{name, value}}, {});
    ASSERT_FALSE(findings.empty());
    for (const auto& finding : findings) {
      EXPECT_EQ(finding.rule, "leak-secret");
      EXPECT_EQ(finding.message.find(value), std::string::npos) << finding.message;
      EXPECT_EQ(finding.message.find(token), std::string::npos) << finding.message;
      EXPECT_EQ(finding.message.find("hunter2"), std::string::npos) << finding.message;
      EXPECT_NE(finding.message.find("characters)"), std::string::npos) << finding.message;
    }
  }
}

TEST(ImageEnvNames, ExtraNamesAreExactOrPrefix) {
  std::vector<std::string> extra = {"KILN_LAN_*", "BUILD_NAS"};
  EXPECT_EQ(build_host_name("KILN_LAN_PROXY", extra), "KILN_LAN_*");
  EXPECT_EQ(build_host_name("kiln_lan_proxy", extra), "KILN_LAN_*");
  EXPECT_EQ(build_host_name("BUILD_NAS", extra), "BUILD_NAS");
  EXPECT_EQ(build_host_name("BUILD_NAS_PATH", extra), std::nullopt);
  EXPECT_EQ(build_host_name("KILN_LAN_PROXY", {}), std::nullopt);
  EXPECT_EQ(build_host_name("SCCACHE_WEBDAV_ENDPOINT", extra), "SCCACHE_WEBDAV_*");
  EXPECT_EQ(build_host_name("SCCACHE_DIR", extra), std::nullopt);
}

TEST(ImageEnvAddresses, ListsEachPrivateHostOnceInOrder) {
  EXPECT_EQ(host_addresses("X", "http://192.168.0.1/ 10.0.0.1:80 http://192.168.0.1/"),
            (std::vector<std::string>{"192.168.0.1", "10.0.0.1"}));
  EXPECT_TRUE(host_addresses("X", "8.8.8.8 127.0.0.1 cache.lan").empty());
  EXPECT_TRUE(host_addresses("APP_VERSION", "10.1.2.3").empty());
}

TEST(ImageEnvAddresses, ParsersAreStrict) {
  EXPECT_TRUE(parse_ipv4("0.0.0.0"));
  EXPECT_FALSE(parse_ipv4("1.2.3.4."));
  EXPECT_FALSE(parse_ipv4("1..3.4"));
  EXPECT_FALSE(parse_ipv4("1234.1.1.1"));
  EXPECT_TRUE(parse_ipv6("::"));
  EXPECT_TRUE(parse_ipv6("1:2:3:4:5:6:7:8"));
  EXPECT_TRUE(parse_ipv6("::ffff:10.0.0.1"));
  EXPECT_FALSE(parse_ipv6("1:2:3:4:5:6:7:8:9"));
  EXPECT_FALSE(parse_ipv6("1::2::3"));
  EXPECT_FALSE(parse_ipv6(":::"));
  EXPECT_FALSE(parse_ipv6("fe80:"));
  EXPECT_FALSE(parse_ipv6("12345::"));
  EXPECT_FALSE(parse_ipv6("1:2:3:4:5:6:7::8"));
  auto full = parse_ipv6("fe80::1:2");
  ASSERT_TRUE(full);
  EXPECT_EQ((*full)[0], 0xfe80);
  EXPECT_EQ((*full)[6], 1);
  EXPECT_EQ((*full)[7], 2);
  EXPECT_EQ(refused_address_kind("10.0.0.1"), "private (RFC 1918)");
  EXPECT_EQ(refused_address_kind("169.254.1.1"), "link-local");
  EXPECT_EQ(refused_address_kind("fe80::1%eth0"), "link-local");
  EXPECT_EQ(refused_address_kind("cache.lan"), std::nullopt);
}

TEST(ImageEnvParse, SplitsAtFirstEquals) {
  auto env = parse_env_list({"PATH=/usr/bin:/bin", "OPTS=a=b=c", "EMPTY=", "BARE", "", "=odd"});
  EXPECT_EQ(
      env,
      (std::vector<std::pair<std::string, std::string>>{
          {"PATH", "/usr/bin:/bin"}, {"OPTS", "a=b=c"}, {"EMPTY", ""}, {"BARE", ""}, {"", "odd"}}));
}

TEST(ImageEnvParse, ImageConfigEnvGradesInOrder) {
  auto findings = grade_env(parse_env_list({"PATH=/usr/bin", "SCCACHE_DIR=/cache",
                                            "SCCACHE_WEBDAV_ENDPOINT=http://192.168.1.20:8080",
                                            "AWS_SESSION_TOKEN", "NAS=\\\\10.0.0.5\\share"}),
                            {});
  ASSERT_EQ(findings.size(), 3u);
  EXPECT_EQ(findings[0].name, "SCCACHE_WEBDAV_ENDPOINT");
  EXPECT_EQ(findings[0].rule, "leak-env-name");
  EXPECT_EQ(findings[1].name, "AWS_SESSION_TOKEN");
  EXPECT_EQ(findings[1].value, "");
  EXPECT_EQ(findings[2].name, "NAS");
  EXPECT_EQ(findings[2].rule, "leak-address");
  EXPECT_EQ(findings[2].offending, "10.0.0.5");
}

void expect_fix_message(const EnvFinding& f) {
  SCOPED_TRACE(f.message);
  EXPECT_NE(f.message.find(f.name), std::string::npos);
  EXPECT_NE(f.message.find(f.offending), std::string::npos);
  EXPECT_NE(f.message.find("ARG"), std::string::npos);
  EXPECT_NE(f.message.find("secret"), std::string::npos);
  // ENV appears only as what not to do.
  auto env = f.message.find("ENV");
  ASSERT_NE(env, std::string::npos);
  EXPECT_EQ(f.message.substr(env - 6, 9), "never ENV");
  EXPECT_EQ(f.message.find("ENV", env + 1), std::string::npos);
}

TEST(ImageEnvMessages, NameFindingNamesVariablePatternAndFix) {
  auto findings = grade_env({{"SCCACHE_BUCKET", "ci"}}, {});
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].rule, "leak-env-name");
  EXPECT_EQ(findings[0].offending, "SCCACHE_BUCKET");
  expect_fix_message(findings[0]);
}

TEST(ImageEnvMessages, AddressFindingNamesVariableAddressAndFix) {
  auto findings = grade_env({{"CACHE_URL", "http://[fe80::1]:8080/"}}, {});
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].rule, "leak-address");
  EXPECT_EQ(findings[0].offending, "fe80::1");
  EXPECT_NE(findings[0].message.find("link-local"), std::string::npos);
  expect_fix_message(findings[0]);
}

TEST(ImageEnvMessages, ExtraNameFindingNamesThePattern) {
  auto findings = grade_env({{"KILN_LAN_PROXY", "proxy.lan"}}, {"KILN_LAN_*"});
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_NE(findings[0].message.find("KILN_LAN_*"), std::string::npos);
  expect_fix_message(findings[0]);
}

} // namespace
} // namespace kiln
