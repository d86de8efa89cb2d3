// The layer reader and the residue and artifact scans over composed layers (composed: no
// recording holds every shape of entry; tests/integration/residue_gate_test.cpp reads layers
// buildah wrote).
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>

#include <gtest/gtest.h>

#include "gates/layer_scan.h"
#include "gates/layer_tar.h"
#include "gates/residue.h"
#include "layer_tarball.h"
#include "temp_dir.h"
#include "util/strings.h"

namespace kiln {
namespace {

using testing::ComposedImage;
using testing::Tarball;

struct Seen {
  std::string path;
  LayerEntry::Type type;
  bool whiteout;
  bool opaque;
  std::string content;
};

std::vector<Seen> entries_of(const std::string& blob) {
  std::vector<Seen> seen;
  auto walked = walk_layer_bytes(blob, "test", [&](const LayerEntry& e, const ContentReader& c) {
    seen.push_back({e.path, e.type, e.whiteout, e.opaque, c(1024)});
  });
  EXPECT_TRUE(walked) << walked.error();
  return seen;
}

Tarball sample() {
  std::string deep = "usr/share/" + std::string(120, 'd') + "/file.txt";
  return Tarball()
      .dir("etc")
      .file("etc/hosts", "127.0.0.1 localhost\n")
      .file(deep, "long")
      .symlink("lib", "usr/lib")
      .whiteout("root/.npmrc")
      .opaque("var/cache");
}

TEST(LayerTar, ReadsPlainGzipAndZstdLayersAlike) {
  Tarball t = sample();
  for (const std::string& blob : {t.tar(), t.gzip(), t.zstd()}) {
    auto seen = entries_of(blob);
    ASSERT_EQ(seen.size(), 6U);
    EXPECT_EQ(seen[0].path, "etc");
    EXPECT_EQ(seen[0].type, LayerEntry::Type::dir);
    EXPECT_EQ(seen[1].path, "etc/hosts");
    EXPECT_EQ(seen[1].content, "127.0.0.1 localhost\n");
    EXPECT_EQ(seen[2].path, "usr/share/" + std::string(120, 'd') + "/file.txt"); // a PAX path
    EXPECT_EQ(seen[2].content, "long");
    EXPECT_EQ(seen[3].type, LayerEntry::Type::symlink);
    EXPECT_EQ(seen[4].path, "root/.npmrc");
    EXPECT_TRUE(seen[4].whiteout);
    EXPECT_EQ(seen[5].path, "var/cache");
    EXPECT_TRUE(seen[5].opaque);
  }
}

TEST(LayerTar, AContentNotAskedForIsSkippedAndTheNextEntryStillRead) {
  std::string big(300000, 'x');
  std::vector<std::string> paths;
  auto walked = walk_layer_bytes(Tarball().file("a", big).file("b", "1").gzip(), "test",
                                 [&](const LayerEntry& e, const ContentReader& c) {
                                   paths.push_back(e.path);
                                   if (e.path == "a") {
                                     EXPECT_EQ(c(10), std::string(10, 'x'));
                                     EXPECT_EQ(c(10), ""); // read once
                                   }
                                 });
  ASSERT_TRUE(walked) << walked.error();
  EXPECT_EQ(paths, (std::vector<std::string>{"a", "b"}));
}

TEST(LayerTar, GzipMembersOneAfterAnotherAreOneLayer) {
  // As pigz and eStargz write layers: the tar cut anywhere, each piece its own gzip member.
  std::string tar = Tarball().file("a", std::string(70000, 'a')).file("root/.netrc", "x").tar();
  std::string blob;
  for (std::size_t at = 0; at < tar.size(); at += 1000) {
    blob += testing::gzip_member(std::string_view(tar).substr(at, 1000));
  }
  auto seen = entries_of(blob);
  ASSERT_EQ(seen.size(), 2U);
  EXPECT_EQ(seen[1].path, "root/.netrc");
}

TEST(LayerTar, AGzipMemberEndingJustBeforeARefillIsFollowedByTheNext) {
  // The reader takes the blob 256 KiB at a time: a first member of 256 KiB less one byte leaves
  // the next member's magic split across two reads.
  constexpr std::size_t k_read = 256 << 10;
  std::string tar = Tarball().file("big", std::string(400000, 'b')).file("root/.netrc", "x").tar();
  // Stored, so the size follows the input's; the gzip header's file name pads it to the byte.
  auto stored = [](std::string_view bytes, const std::string& name) {
    return testing::gzip_member(bytes, 0, name);
  };
  const std::size_t cut = k_read - 400;
  std::string first = stored(std::string_view(tar).substr(0, cut), "");
  ASSERT_LT(first.size(), k_read - 2);
  first = stored(std::string_view(tar).substr(0, cut), std::string(k_read - 2 - first.size(), 'n'));
  ASSERT_EQ(first.size(), k_read - 1);
  auto seen = entries_of(first + stored(std::string_view(tar).substr(cut), ""));
  ASSERT_EQ(seen.size(), 2U);
  EXPECT_EQ(seen[1].path, "root/.netrc");
}

TEST(LayerTar, ABrokenLayerIsAnErrorThatSaysWhatIsWrong) {
  std::string gz = Tarball().file("a", std::string(5000, 'y')).gzip();
  auto truncated = walk_layer_bytes(gz.substr(0, gz.size() / 2), "blob1", [](auto&, auto&) {});
  ASSERT_FALSE(truncated);
  EXPECT_NE(truncated.error().find("blob1"), std::string::npos) << truncated.error();
  EXPECT_NE(truncated.error().find("truncated"), std::string::npos) << truncated.error();

  std::string tar = Tarball().file("a", "b").tar();
  tar[0] = 'z'; // the checksum no longer matches
  auto corrupt = walk_layer_bytes(tar, "blob2", [](auto&, auto&) {});
  ASSERT_FALSE(corrupt);
  EXPECT_NE(corrupt.error().find("checksum"), std::string::npos) << corrupt.error();

  std::string zst = Tarball().file("a", "b").zstd();
  auto cut = walk_layer_bytes(zst.substr(0, zst.size() - 3), "blob3", [](auto&, auto&) {});
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error().find("zstd"), std::string::npos) << cut.error();
}

TEST(LayerTar, ReadsTheLayersBuildahWrote) {
  for (const char* compression : {"gz", "zst"}) {
    std::vector<std::string> paths;
    std::string npmrc;
    auto walked =
        walk_layer(std::string(KILN_TEST_FIXTURES) + "/layers/buildah-residue.tar." + compression,
                   [&](const LayerEntry& e, const ContentReader& c) {
                     paths.push_back(e.path);
                     if (e.path == "root/.npmrc") {
                       npmrc = c(k_residue_read_limit);
                     }
                   });
    ASSERT_TRUE(walked) << walked.error();
    EXPECT_EQ(paths, (std::vector<std::string>{"root", "root/.npmrc", "root/.ssh",
                                               "root/.ssh/id_rsa", "run"}))
        << compression;
    EXPECT_EQ(npmrc, "//r/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789\n");

    std::vector<std::string> whiteouts;
    walked =
        walk_layer(std::string(KILN_TEST_FIXTURES) + "/layers/buildah-whiteout.tar." + compression,
                   [&](const LayerEntry& e, const ContentReader&) {
                     if (e.whiteout) {
                       whiteouts.push_back(e.path);
                     }
                   });
    ASSERT_TRUE(walked) << walked.error();
    EXPECT_EQ(whiteouts, (std::vector<std::string>{"root/.ssh/id_rsa"})) << compression;
  }
}

struct ResidueCase {
  const char* path;
  const char* content;
  const char* rule; // "" when the file must pass
};

TEST(Residue, EachKindIsRefusedAndItsHarmlessFormPasses) {
  const ResidueCase cases[] = {
      {"root/.npmrc", "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789\n",
       "npm-config"},
      {"root/.npmrc", "//registry.npmjs.org/:_authToken=${NPM_TOKEN}\n", ""},
      {"root/.npmrc", "registry=http://10.1.2.3:4873/\n", "npm-config"},
      {"root/.npmrc", "registry=https://registry.npmjs.org/\n", ""},
      {"etc/pip.conf", "[global]\nindex-url = http://192.168.7.2:3141/root/pypi/+simple/\n",
       "pip-config"},
      {"etc/pip.conf", "[global]\nindex-url = https://ci:s3cretpass@pypi.example.com/simple\n",
       "pip-config"},
      {"etc/pip.conf", "[global]\nindex-url = https://pypi.org/simple\n", ""},
      {"root/.pypirc", "[pypi]\nusername = __token__\npassword = pypi-AgEIcHlwaS5vcmc\n",
       "pip-config"},
      {"root/.git-credentials", "https://bot:ghp_0123456789abcdef0123456789abcdef0123@github.com\n",
       "git-credentials"},
      {"root/.git-credentials", "", ""},
      {"root/.ssh/id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n", "ssh-private-key"},
      {"root/.ssh/id_ed25519.pub", "ssh-ed25519 AAAAC3Nz user@host\n", ""},
      {"root/.docker/config.json", R"({"auths":{"registry.lan:5000":{"auth":"dXNlcjpwYXNz"}}})",
       "docker-credentials"},
      {"root/.docker/config.json", R"({"auths":{},"credsStore":"pass"})", ""},
      {"etc/apt/apt.conf.d/01proxy", "Acquire::http::Proxy \"http://squid:3128\";\n", "apt-proxy"},
      {"etc/apt/apt.conf.d/01proxy", "Acquire { http { Proxy \"http://10.0.0.9:3142\"; }; };\n",
       "apt-proxy"},
      {"etc/apt/apt.conf.d/01proxy", "Acquire::http::Proxy \"DIRECT\";\n", ""},
      {"etc/apt/apt.conf.d/01proxy",
       "Acquire::http::Proxy::deb.example.org \"http://squid:3128\";\n", "apt-proxy"},
      {"etc/apt/apt.conf.d/01proxy", "// Acquire::http::Proxy \"http://squid:3128\";\n", ""},
      {"etc/pip.conf", "[global]\n# index-url = http://10.1.2.3/simple\n", ""},
      {"srv/foo.aws/credentials", "[default]\naws_access_key_id = x\n", ""},
      {"home/u/.aws/credentials", "[default]\naws_access_key_id = x\n", "aws-credentials"},
      {"etc/apt/apt.conf.d/docker-clean", "DPkg::Post-Invoke { \"rm -f /var/cache/apt/x\"; };\n",
       ""},
      {"root/.config/sccache/config", "[cache.webdav]\nendpoint = \"http://cache.lan:8080\"\n",
       "sccache-config"},
      {"root/.config/sccache/config", "[cache.disk]\ndir = \"/var/cache/sccache\"\n", ""},
      {"etc/ccache.conf", "remote_storage = http://cache.lan:8080|layout=bazel\n", "ccache-config"},
      {"etc/ccache.conf", "max_size = 5G\n", ""},
      {"root/.netrc", "machine example.com login bot password hunter2\n", "netrc"},
      {"root/.aws/credentials", "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n",
       "aws-credentials"},
      {"etc/ssl/private/server.key", "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n", "private-key"},
      {"etc/ssl/certs/ca.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n", ""},
      {"usr/share/doc/readme.txt", "password=hunter2 http://10.0.0.1/", ""},
  };
  for (const auto& c : cases) {
    std::string_view rule = residue_rule(c.path);
    std::optional<std::string> detail;
    if (!rule.empty()) {
      detail = residue_detail(rule, c.content);
    }
    if (std::string_view(c.rule).empty()) {
      EXPECT_FALSE(detail) << c.path << ": " << c.content << " -> " << detail.value_or("");
    } else {
      EXPECT_EQ(rule, c.rule) << c.path;
      EXPECT_TRUE(detail) << c.path << ": " << c.content;
    }
  }
}

TEST(Residue, ASecretIsNeverShownWhole) {
  auto detail = residue_detail(
      "npm-config", "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789\n");
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->find("abcdefghijklmnopqrstuvwxyz"), std::string::npos) << *detail;
  EXPECT_NE(detail->find("npm_… (40 characters)"), std::string::npos) << *detail;
}

TEST(LayerScan, AFileDeletedByALaterLayerIsStillReported) {
  testing::TempDir dir;
  std::string token = "//r/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789\n";
  testing::write_layout(
      dir.path(),
      {{"linux/amd64",
        {Tarball().file("bin/sh", "x").gzip(), Tarball().file("root/.npmrc", token).zstd(),
         Tarball().file("etc/motd", "hi").tar(), Tarball().whiteout("root/.npmrc").gzip()}}});
  auto scans = scan_layout(dir.path(), {});
  ASSERT_TRUE(scans) << scans.error();
  ASSERT_EQ(scans->size(), 1U);
  const ImageScan& scan = scans->front();
  EXPECT_EQ(scan.layers, 4U);
  ASSERT_EQ(scan.residue.size(), 1U);
  const ResidueFinding& f = scan.residue[0];
  EXPECT_EQ(f.path, "/root/.npmrc");
  EXPECT_EQ(f.added, 2U);
  EXPECT_EQ(f.deleted, 4U);
  EXPECT_EQ(scan.refused(), 1U);
  std::string message = residue_message(f);
  EXPECT_NE(message.find("added in layer 2 of 4, deleted in layer 4: still published"),
            std::string::npos)
      << message;
}

TEST(LayerScan, AnOpaqueDirectoryDeletesWhatWasBelowIt) {
  testing::TempDir dir;
  testing::write_layout(
      dir.path(),
      {{"linux/amd64",
        {Tarball().file("root/.config/pip/pip.conf", "index-url = http://10.9.8.7/simple\n").gzip(),
         Tarball().opaque("root/.config").file("root/.config/keep", "k").gzip()}}});
  auto scans = scan_layout(dir.path(), {});
  ASSERT_TRUE(scans) << scans.error();
  ASSERT_EQ(scans->front().residue.size(), 1U);
  EXPECT_EQ(scans->front().residue[0].deleted, 2U);
}

TEST(LayerScan, TheAllowListReportsButDoesNotRefuse) {
  testing::TempDir dir;
  testing::write_layout(
      dir.path(),
      {{"linux/amd64",
        {Tarball()
             .file("usr/lib/python3/test/keycert.pem", "-----BEGIN PRIVATE KEY-----\nMII\n")
             .file("root/.netrc", "machine a login b password c\n")
             .gzip()}}});
  ScanOptions options;
  options.allow = {{"/usr/lib/python3*/test/*.pem", "the test suite's own throwaway key"}};
  auto scans = scan_layout(dir.path(), options);
  ASSERT_TRUE(scans) << scans.error();
  const ImageScan& scan = scans->front();
  ASSERT_EQ(scan.residue.size(), 2U);
  EXPECT_EQ(scan.residue[0].allowed, "the test suite's own throwaway key");
  EXPECT_EQ(scan.refused(), 1U);
  EXPECT_NE(residue_message(scan.residue[0]).find("allowed: the test suite"), std::string::npos);
}

TEST(LayerScan, EveryPlatformOfAnIndexIsScannedAndNamed) {
  testing::TempDir dir;
  testing::write_layout(
      dir.path(),
      {{"linux/amd64", {Tarball().file("bin/app", "clean").gzip()}},
       {"linux/arm64", {Tarball().file("root/.git-credentials", "https://a:b@host\n").gzip()}}});
  auto scans = scan_layout(dir.path(), {});
  ASSERT_TRUE(scans) << scans.error();
  ASSERT_EQ(scans->size(), 2U);
  EXPECT_TRUE((*scans)[0].residue.empty());
  ASSERT_EQ((*scans)[1].residue.size(), 1U);
  EXPECT_EQ((*scans)[1].residue[0].platform, "linux/arm64");
  EXPECT_EQ(residue_message((*scans)[1].residue[0]).rfind("linux/arm64: /root/.git-credentials", 0),
            0U);
}

TEST(LayerScan, ArtifactsAreLookedUpInTheTreeTheLayersMake) {
  testing::TempDir dir;
  testing::write_layout(
      dir.path(),
      {{"linux/amd64",
        {Tarball().symlink("lib", "usr/lib").file("usr/lib/libx.so.1", "elf").gzip(),
         Tarball()
             .symlink("usr/lib/libx.so", "libx.so.1")
             .file("opt/app/bin/app", "elf")
             .file("opt/tmp/scratch", "x")
             .gzip(),
         Tarball().whiteout("opt/tmp").symlink("usr/lib/dangling.so", "gone.so").gzip()}}});
  ScanOptions options;
  options.residue = false;
  options.artifacts = {"/lib/libx.so",           "/usr/lib/libx.so.1",   "/opt/app/bin/app",
                       "/opt/tmp/scratch",       "/usr/lib/dangling.so", "/opt/app/bin/missing",
                       "/opt/app/../app/bin/app"};
  auto scans = scan_layout(dir.path(), options);
  ASSERT_TRUE(scans) << scans.error();
  EXPECT_EQ(scans->front().missing,
            (std::vector<std::string>{"/opt/tmp/scratch", "/usr/lib/dangling.so",
                                      "/opt/app/bin/missing"}));
}

TEST(LayerScan, AFileInAFoldersPlaceHidesWhatTheFolderHeld) {
  testing::TempDir dir;
  testing::write_layout(dir.path(), {{"linux/amd64",
                                      {Tarball().file("opt/lib/libx.so", "elf").gzip(),
                                       Tarball().file("opt/lib", "now a file").gzip()}}});
  ScanOptions options;
  options.residue = false;
  options.artifacts = {"/opt/lib/libx.so", "/opt/lib"};
  auto scans = scan_layout(dir.path(), options);
  ASSERT_TRUE(scans) << scans.error();
  EXPECT_EQ(scans->front().missing, (std::vector<std::string>{"/opt/lib/libx.so"}));
}

TEST(LayerScan, AHardLinkAtACandidatesPathIsReadThroughItsTarget) {
  // A tar writes the first path of an inode as the file and every later one as a link to it:
  // the credentials under /root are the bytes of /a/x.
  testing::TempDir dir;
  std::string credentials = "https://bot:ghp_0123456789abcdef0123456789abcdef0123@github.com\n";
  testing::write_layout(dir.path(), {{"linux/amd64",
                                      {Tarball().file("bin/sh", "x").gzip(),
                                       Tarball()
                                           .file("a/x", credentials)
                                           .hardlink("root/.git-credentials", "a/x")
                                           .hardlink("tmp/harmless", "a/x")
                                           .gzip()}}});
  auto scans = scan_layout(dir.path(), {});
  ASSERT_TRUE(scans) << scans.error();
  const ImageScan& scan = scans->front();
  ASSERT_EQ(scan.residue.size(), 1U);
  EXPECT_EQ(scan.residue[0].path, "/root/.git-credentials");
  EXPECT_EQ(scan.residue[0].added, 2U);
  EXPECT_NE(scan.residue[0].detail.find("a hard link to /a/x"), std::string::npos)
      << scan.residue[0].detail;
  // Linked to nothing a layer holds: no bytes to judge, no finding.
  testing::TempDir dangling;
  testing::write_layout(
      dangling.path(),
      {{"linux/amd64", {Tarball().hardlink("root/.git-credentials", "gone").gzip()}}});
  auto none = scan_layout(dangling.path(), {});
  ASSERT_TRUE(none) << none.error();
  EXPECT_TRUE(none->front().residue.empty());
}

std::string elf_head(const std::string& name) {
  std::ifstream in(std::string(KILN_TEST_FIXTURES) + "/elf/" + name, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(LayerScan, TheArchGateSeesEveryElfOfTheFinalTreeAndNamesTheForeignOnes) {
  testing::TempDir dir;
  std::string amd64 = elf_head("x86_64-busybox.head");
  std::string arm64 = elf_head("aarch64.head");
  ASSERT_GE(arm64.size(), 20U);
  testing::write_layout(
      dir.path(), {{"linux/amd64",
                    {Tarball()
                         .file("bin/busybox", amd64)
                         .file("opt/stray/tool", arm64)
                         .file("opt/gone/tool", arm64)
                         .file("opt/replaced/tool", arm64)
                         .file("usr/lib/cross/libx.so", arm64)
                         .file("etc/motd", "not an ELF file at all\n")
                         .gzip(),
                     Tarball().whiteout("opt/gone").file("opt/replaced/tool", amd64).gzip()}}});
  ScanOptions options;
  options.arch = true;
  options.arch_allow = {{"/usr/lib/cross/*", "the cross toolchain's target libraries"}};
  auto scans = scan_layout(dir.path(), options);
  ASSERT_TRUE(scans) << scans.error();
  const ImageScan& scan = scans->front();
  EXPECT_TRUE(scan.arch_judged);
  EXPECT_EQ(scan.elf_files, 6U);
  ASSERT_EQ(scan.foreign.size(), 2U); // deleted and replaced ones are not in the final tree
  EXPECT_EQ(scan.foreign[0].path, "/opt/stray/tool");
  EXPECT_EQ(scan.foreign[0].description, "ELF 64-bit LSB ARM aarch64");
  EXPECT_EQ(scan.foreign[0].layer, 1U);
  EXPECT_TRUE(scan.foreign[0].allowed.empty());
  EXPECT_EQ(scan.foreign[1].path, "/usr/lib/cross/libx.so");
  EXPECT_EQ(scan.foreign[1].allowed, "the cross toolchain's target libraries");
  // A platform kiln has no ELF picture of is said, never judged.
  testing::TempDir plan9;
  testing::write_layout(plan9.path(),
                        {{"plan9/amd64", {Tarball().file("bin/tool", arm64).gzip()}}});
  auto unknown = scan_layout(plan9.path(), options);
  ASSERT_TRUE(unknown) << unknown.error();
  EXPECT_FALSE(unknown->front().arch_judged);
  EXPECT_TRUE(unknown->front().foreign.empty());
}

TEST(LayerScan, TheSbomReadsTheNewestDatabasesOfTheFinalTree) {
  testing::TempDir dir;
  std::string old_status = "Package: old\nStatus: install ok installed\nVersion: 1\n"
                           "Architecture: amd64\n";
  std::string status = "Package: bash\nStatus: install ok installed\nVersion: 5.2.15-2+b2\n"
                       "Architecture: amd64\n\nPackage: gone\nStatus: deinstall ok "
                       "config-files\nVersion: 1\nArchitecture: amd64\n";
  testing::write_layout(dir.path(),
                        {{"linux/amd64",
                          {Tarball()
                               .file("var/lib/dpkg/status", old_status)
                               .file("usr/lib/os-release", "ID=debian\nVERSION_ID=12\n")
                               .file("usr/lib/python3/dist-packages/six-1.16.0.dist-info/METADATA",
                                     "Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n")
                               .gzip(),
                           Tarball()
                               .file("var/lib/dpkg/status", status)
                               .file("etc/os-release", "ID=ubuntu\nVERSION_ID=24.04\n")
                               .whiteout("usr/lib/python3/dist-packages/six-1.16.0.dist-info")
                               .gzip()}}});
  ScanOptions options;
  options.sbom = true;
  auto scans = scan_layout(dir.path(), options);
  ASSERT_TRUE(scans) << scans.error();
  const ImageScan& scan = scans->front();
  ASSERT_EQ(scan.packages.size(), 1U); // the newer status, installed only; six was uninstalled
  EXPECT_EQ(scan.packages[0].name, "bash");
  EXPECT_EQ(scan.packages[0].version, "5.2.15-2+b2");
  EXPECT_EQ(scan.os.id, "ubuntu"); // /etc/os-release over /usr/lib/os-release
}

/// A one-file layer as tar-split lines: the header, the file by name, the rest.
std::string tar_split_of(const std::string& name, const std::string& content) {
  std::string tar = Tarball().file(name, content).tar();
  std::string header = tar.substr(0, 512);
  std::string rest = tar.substr(512 + content.size());
  return "{\"type\":2,\"payload\":\"" + base64_encode(header) + "\",\"position\":0}\n" +
         "{\"type\":1,\"name\":\"" + name + "\",\"size\":" + std::to_string(content.size()) +
         ",\"payload\":null,\"position\":1}\n" + "{\"type\":2,\"payload\":\"" +
         base64_encode(rest) + "\",\"position\":2}\n";
}

TEST(StoreLayer, ALayerOfBuildahsStoreIsReadInPlaceEntryByEntry) {
  const std::string layer = std::string(KILN_TEST_FIXTURES) + "/buildah-1.28.2/store-layer";
  std::vector<Seen> seen;
  auto walked = walk_store_layer(layer + "/layer.tar-split.gz", layer + "/diff",
                                 [&](const LayerEntry& e, const ContentReader& c) {
                                   seen.push_back({e.path, e.type, e.whiteout, e.opaque,
                                                   e.path == "etc/hosts" ? "" : c(1024)});
                                   if (e.type == LayerEntry::Type::hardlink) {
                                     seen.back().content = "-> " + e.link;
                                   }
                                 });
  ASSERT_TRUE(walked) << walked.error();
  std::map<std::string, std::string> content;
  for (const auto& entry : seen) {
    content[entry.path] = entry.content;
  }
  EXPECT_EQ(content["hi"], "hi\n");
  EXPECT_EQ(content["a/x"], "secret\n");
  EXPECT_EQ(content["root/.git-credentials"], "-> a/x");
  EXPECT_TRUE(content.count("etc/resolv.conf")) << "an empty file is an entry, never opened";
  EXPECT_EQ(seen.size(), 13U);
}

TEST(StoreLayer, AnEntryNeverReadsOutsideItsLayersFolder) {
  testing::TempDir dir;
  dir.write("content/etc/placeholder", "");
  std::filesystem::remove(dir.path() / "content/etc/placeholder");
  std::filesystem::remove(dir.path() / "content/etc");
  // A crafted layer's `etc -> /`: the scan must not read the host's /etc/hostname through it.
  std::filesystem::create_directory_symlink("/", dir.path() / "content/etc");
  dir.write("split", tar_split_of("etc/hostname", "xxxx"));
  auto walked = walk_store_layer(dir.path() / "split", dir.path() / "content",
                                 [&](const LayerEntry&, const ContentReader& c) { (void)c(64); });
  ASSERT_FALSE(walked);
  EXPECT_NE(walked.error().find("cannot open etc/hostname in the store"), std::string::npos)
      << walked.error();
  dir.write("split", tar_split_of("../escape", "xxxx"));
  walked = walk_store_layer(dir.path() / "split", dir.path() / "content",
                            [&](const LayerEntry&, const ContentReader& c) { (void)c(64); });
  ASSERT_FALSE(walked);
  // A file the store holds shorter than its layer says: the store changed under the scan.
  dir.write("content/short", "xx");
  dir.write("split", tar_split_of("short", "xxxx"));
  walked = walk_store_layer(dir.path() / "split", dir.path() / "content",
                            [&](const LayerEntry&, const ContentReader& c) { (void)c(64); });
  ASSERT_FALSE(walked);
  EXPECT_NE(walked.error().find("shorter than its layer says"), std::string::npos)
      << walked.error();
  // Not asked for, it is not opened: a scan that reads no content reads no file.
  dir.write("split", tar_split_of("missing/file", "xxxx"));
  walked = walk_store_layer(dir.path() / "split", dir.path() / "content",
                            [&](const LayerEntry&, const ContentReader&) {});
  EXPECT_TRUE(walked) << walked.error();
}

} // namespace
} // namespace kiln
