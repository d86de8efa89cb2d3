#include "gates/sbom.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "temp_dir.h"
#include "util/strings.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path k_fixtures = fs::path(KILN_TEST_FIXTURES) / "sbom";

using Installed = std::set<std::tuple<std::string, std::string, std::string>>;

Installed name_arch_version(const std::vector<Package>& packages) {
  Installed out;
  for (const Package& package : packages) {
    out.emplace(package.name, package.arch, package.version);
  }
  return out;
}

std::string read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Every package of an image root laid out under `root`, as the layer scan would hand them over.
std::vector<Package> read_root(const fs::path& root, OsRelease* os = nullptr) {
  std::vector<Package> packages;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) {
      continue;
    }
    std::string path = fs::relative(entry.path(), root).generic_string();
    std::string text = read_whole(entry.path());
    if (package_db_kind(path) == "os-release" && os != nullptr) {
      *os = parse_os_release(text);
    }
    for (Package& package : read_package_db(path, text)) {
      packages.push_back(std::move(package));
    }
  }
  return packages;
}

/// The packages `dpkg-query` says are installed in a status file: dpkg's own reading, to hold
/// ours against.
std::optional<Installed> dpkg_query_installed(const std::string& status) {
  testing::TempDir admin;
  // dpkg-query needs only `status` in its admin folder (dpkg 1.21: `available`, `info/` and
  // `updates/` may be missing).
  admin.write("status", status);
  std::string command = "dpkg-query --admindir=" + shell_quote(admin.path().string()) +
                        " -W -f='${db:Status-Status}\\t${Package}\\t${Architecture}\\t"
                        "${Version}\\n' 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return std::nullopt;
  }
  std::string output;
  char buffer[4096];
  while (std::size_t got = std::fread(buffer, 1, sizeof buffer, pipe)) {
    output.append(buffer, got);
  }
  if (::pclose(pipe) != 0) {
    return std::nullopt;
  }
  Installed installed;
  for (const std::string& line : split(output, '\n')) {
    auto fields = split(line, '\t');
    if (fields.size() == 4 && fields[0] == "installed") {
      installed.emplace(fields[1], fields[2], fields[3]);
    }
  }
  return installed;
}

TEST(PackageDbKind, NamesEachDatabaseByItsPath) {
  EXPECT_EQ(package_db_kind("var/lib/dpkg/status"), "dpkg-status");
  EXPECT_EQ(package_db_kind("var/lib/dpkg/status.d/libc6"), "dpkg-status.d");
  EXPECT_EQ(package_db_kind("var/lib/dpkg/status.d/libssl3.md5sums"), "");
  EXPECT_EQ(package_db_kind("var/lib/dpkg/status.d/"), "");
  EXPECT_EQ(package_db_kind("var/lib/dpkg/status.d/sub/libc6"), "");
  EXPECT_EQ(package_db_kind("var/lib/dpkg/status-old"), "");
  EXPECT_EQ(package_db_kind("var/lib/dpkg/available"), "");
  EXPECT_EQ(package_db_kind("lib/apk/db/installed"), "apk-installed");
  EXPECT_EQ(package_db_kind("usr/lib/os-release"), "os-release");
  EXPECT_EQ(package_db_kind("etc/os-release"), "os-release");
  EXPECT_EQ(package_db_kind("usr/lib/python3.11/site-packages/pip-23.0.dist-info/METADATA"),
            "python-metadata");
  EXPECT_EQ(package_db_kind("usr/lib/python3/dist-packages/PyJWT-2.6.0.egg-info/PKG-INFO"),
            "python-metadata");
  EXPECT_EQ(package_db_kind("usr/lib/python3/dist-packages/foo-1.0.egg-info"), "python-metadata");
  EXPECT_EQ(package_db_kind("usr/lib/python3.11/site-packages/pip-23.0.dist-info/RECORD"), "");
  EXPECT_EQ(package_db_kind("usr/lib/python3/dist-packages/.dist-info/METADATA"), "");
  EXPECT_EQ(package_db_kind("usr/lib/python3/dist-packages/.egg-info"), "");
  EXPECT_EQ(package_db_kind("src/foo-1.0/PKG-INFO"), "");
  EXPECT_EQ(package_db_kind("/var/lib/dpkg/status"), ""); // relative to the root, as the scan
  EXPECT_EQ(package_db_kind(""), "");
}

TEST(DpkgStatus, KeepsInstalledParagraphsWithTheirFields) {
  const std::string status = "Package: libc6\n"
                             "Status: install ok installed\n"
                             "Priority: optional\n"
                             "Maintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>\n"
                             "Architecture: amd64\n"
                             "Multi-Arch: same\n"
                             "Source: glibc\n"
                             "Version: 2.36-9+deb12u4\n"
                             "Description: GNU C Library: Shared libraries\n"
                             " Contains the standard libraries.\n"
                             " Package: not-a-package\n"
                             " .\n"
                             "Homepage: https://www.gnu.org/software/libc/libc.html\n"
                             "\n"
                             "Package: libc6\n"
                             "Status: install ok installed\n"
                             "Architecture: i386\n"
                             "Source: glibc\n"
                             "Version: 2.36-9+deb12u4\n"
                             "\n"
                             "Package: bsdutils\n"
                             "Status: install ok installed\n"
                             "Architecture: amd64\n"
                             "Source: util-linux (2.38.1-5+b1)\n"
                             "Version: 1:2.38.1-5+b1\n"
                             "\n"
                             "Package: removed-tool\n"
                             "Status: deinstall ok config-files\n"
                             "Architecture: amd64\n"
                             "Version: 1.0-1\n"
                             "\n"
                             "Package: half-there\n"
                             "Status: install reinstreq half-installed\n"
                             "Architecture: amd64\n"
                             "Version: 2.0-1\n"
                             "\n"
                             "Status: install ok installed\n"
                             "Architecture: amd64\n"
                             "Version: 0.1\n";
  auto packages = parse_dpkg_status(status, "/var/lib/dpkg/status");
  ASSERT_EQ(packages.size(), 3u);
  const Package& amd64 = packages[0];
  EXPECT_EQ(amd64.ecosystem, "deb");
  EXPECT_EQ(amd64.name, "libc6");
  EXPECT_EQ(amd64.version, "2.36-9+deb12u4");
  EXPECT_EQ(amd64.arch, "amd64");
  EXPECT_EQ(amd64.source, "glibc");
  EXPECT_EQ(amd64.supplier, "GNU Libc Maintainers <debian-glibc@lists.debian.org>");
  EXPECT_EQ(amd64.license, "");
  EXPECT_EQ(amd64.path, "/var/lib/dpkg/status");
  EXPECT_EQ(packages[1].name, "libc6");
  EXPECT_EQ(packages[1].arch, "i386");
  EXPECT_EQ(packages[1].supplier, "");
  EXPECT_EQ(packages[2].name, "bsdutils");
  EXPECT_EQ(packages[2].source, "util-linux");
  EXPECT_EQ(packages[2].version, "1:2.38.1-5+b1");
}

TEST(DpkgStatus, ReadsCrlfCaseInsensitiveNamesAndStrayBlankLines) {
  const std::string status = "\r\n\r\npackage: zlib1g\r\nSTATUS: install ok installed\r\n"
                             "architecture: amd64\r\nversion: 1:1.2.13.dfsg-1\r\n\r\n\r\n"
                             "Package: tzdata\r\nStatus: install ok installed\r\n"
                             "Architecture: all\r\nVersion: 2024a-0+deb12u1";
  auto packages = parse_dpkg_status(status, "/var/lib/dpkg/status");
  ASSERT_EQ(packages.size(), 2u);
  EXPECT_EQ(packages[0].name, "zlib1g");
  EXPECT_EQ(packages[0].version, "1:1.2.13.dfsg-1");
  EXPECT_EQ(packages[0].arch, "amd64");
  EXPECT_EQ(packages[1].name, "tzdata");
  EXPECT_EQ(packages[1].version, "2024a-0+deb12u1");
}

TEST(DpkgStatus, StatusDirectoryParagraphsNeedNoStatus) {
  const std::string text = "Package: base-files\nVersion: 12.4+deb12u5\nArchitecture: amd64\n\n"
                           "Package: netbase\nVersion: 6.4\nArchitecture: all\n";
  auto packages = parse_dpkg_status(text, "/var/lib/dpkg/status.d/base-files");
  ASSERT_EQ(packages.size(), 2u);
  EXPECT_EQ(packages[1].name, "netbase");
  // In the status file itself a paragraph without Status is not an installed package.
  EXPECT_TRUE(parse_dpkg_status(text, "/var/lib/dpkg/status").empty());
}

TEST(DpkgStatus, GarbageGivesNothingAndNeverThrows) {
  const std::string binary("\x7f"
                           "ELF\x02\x01\x01\0\0\0:\n\n\xff\xfe: x\n \n\t\n:::\n",
                           25);
  for (const std::string& text : {std::string(), std::string("\n\n\n"), std::string(":"),
                                  std::string("Package:\nStatus: install ok installed\n"),
                                  std::string("no colon here\n continued\n"), binary}) {
    EXPECT_TRUE(parse_dpkg_status(text, "/var/lib/dpkg/status").empty()) << text;
    EXPECT_TRUE(parse_dpkg_status(text, "/var/lib/dpkg/status.d/x").empty()) << text;
  }
}

TEST(DpkgStatus, MatchesDpkgQueryOnAComposedStatus) {
  // Whole paragraphs, as dpkg wants them: a Maintainer and a Description each, and Multi-Arch:
  // same on both instances of a package installed for two architectures.
  const std::string status =
      "Package: kept\nStatus: install ok installed\nMaintainer: A <a@example.org>\n"
      "Architecture: amd64\nMulti-Arch: same\nVersion: 1:1.0+b1\nDescription: one\n more\n\n"
      "Package: gone\nStatus: deinstall ok config-files\nMaintainer: A <a@example.org>\n"
      "Architecture: amd64\nVersion: 2.0\nDescription: two\n\n"
      "Package: unpacked\nStatus: install ok unpacked\nMaintainer: A <a@example.org>\n"
      "Architecture: amd64\nVersion: 3.0\nDescription: three\n\n"
      "Package: kept\nStatus: install ok installed\nMaintainer: A <a@example.org>\n"
      "Architecture: i386\nMulti-Arch: same\nVersion: 1:1.0+b1\nDescription: one\n";
  auto expected = dpkg_query_installed(status);
  if (!expected) {
    GTEST_SKIP() << "dpkg-query did not run";
  }
  EXPECT_EQ(name_arch_version(parse_dpkg_status(status, "/var/lib/dpkg/status")), *expected);
  EXPECT_EQ(expected->size(), 2u);
}

TEST(DpkgStatus, MatchesDpkgQueryOnThisMachinesStatus) {
  const fs::path status_path = "/var/lib/dpkg/status";
  if (!fs::exists(status_path)) {
    GTEST_SKIP() << "no " << status_path;
  }
  std::string status = read_whole(status_path);
  ASSERT_LE(status.size(), k_package_db_limit);
  auto expected = dpkg_query_installed(status);
  if (!expected) {
    GTEST_SKIP() << "dpkg-query did not run";
  }
  Installed parsed = name_arch_version(parse_dpkg_status(status, "/var/lib/dpkg/status"));
  EXPECT_FALSE(parsed.empty());
  EXPECT_EQ(parsed, *expected);
}

TEST(ApkInstalled, ReadsEachParagraph) {
  const std::string db = "C:Q1abc=\nP:musl\nV:1.2.5-r0\nA:x86_64\nL:MIT\no:musl\n"
                         "m:Timo Teras <timo.teras@iki.fi>\nF:lib\nR:libc.musl-x86_64.so.1\n"
                         "a:0:0:777\n\n"
                         "P:libcrypto3\r\nV:3.3.2-r0\r\nA:x86_64\r\nL:Apache-2.0\r\no:openssl\r\n"
                         "\r\n"
                         "V:1.0\nA:x86_64\n\n" // no P: skipped
                         "P:busybox\nV:1.36.1-r29\n";
  auto packages = parse_apk_installed(db, "/lib/apk/db/installed");
  ASSERT_EQ(packages.size(), 3u);
  EXPECT_EQ(packages[0].ecosystem, "apk");
  EXPECT_EQ(packages[0].name, "musl");
  EXPECT_EQ(packages[0].version, "1.2.5-r0");
  EXPECT_EQ(packages[0].arch, "x86_64");
  EXPECT_EQ(packages[0].license, "MIT");
  EXPECT_EQ(packages[0].source, "musl");
  EXPECT_EQ(packages[0].supplier, "Timo Teras <timo.teras@iki.fi>");
  EXPECT_EQ(packages[0].path, "/lib/apk/db/installed");
  EXPECT_EQ(packages[1].name, "libcrypto3");
  EXPECT_EQ(packages[1].source, "openssl");
  EXPECT_EQ(packages[1].license, "Apache-2.0");
  EXPECT_EQ(packages[2].name, "busybox");
  EXPECT_EQ(packages[2].arch, "");
}

TEST(PythonMetadata, ReadsTheHeadersOnly) {
  const std::string metadata = "Metadata-Version: 2.4\n"
                               "Name: Foo_Bar.baz\n"
                               "Version: 1.0.post1+local\n"
                               "Author: Jane Doe\n"
                               "Author-email: jane@example.org\n"
                               "License: BSD\n"
                               "License-Expression: MIT OR Apache-2.0\n"
                               "\n"
                               "Name: not-the-name\n"
                               "License: GPL\n";
  auto package = parse_python_metadata(metadata, "/usr/lib/python3/site-packages/x/METADATA");
  ASSERT_TRUE(package);
  EXPECT_EQ(package->ecosystem, "python");
  EXPECT_EQ(package->name, "Foo_Bar.baz");
  EXPECT_EQ(package->version, "1.0.post1+local");
  EXPECT_EQ(package->supplier, "Jane Doe <jane@example.org>");
  EXPECT_EQ(package->license, "MIT OR Apache-2.0");
  EXPECT_EQ(package->arch, "");
  EXPECT_EQ(package->path, "/usr/lib/python3/site-packages/x/METADATA");
}

TEST(PythonMetadata, FoldedLicenseUnknownFieldsAndNoName) {
  auto package = parse_python_metadata("Name: six\r\nVersion: 1.16.0\r\nAuthor: UNKNOWN\r\n"
                                       "Author-email: The Team <team@example.org>\r\n"
                                       "License: Copyright (c) 2010 Someone\r\n"
                                       "        Permission is hereby granted\r\n",
                                       "/six.egg-info");
  ASSERT_TRUE(package);
  EXPECT_EQ(package->supplier, "The Team <team@example.org>");
  EXPECT_EQ(package->license, "Copyright (c) 2010 Someone\nPermission is hereby granted");
  EXPECT_FALSE(parse_python_metadata("Version: 1.0\n\nName: late\n", "/x"));
  EXPECT_FALSE(parse_python_metadata("Name: UNKNOWN\n", "/x"));
  EXPECT_FALSE(parse_python_metadata(std::string("\0\0\0", 3), "/x"));
}

TEST(OsRelease, ReadsQuotedAndBareValues) {
  auto os = parse_os_release("# comment\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"
                             "ID=debian\nVERSION_ID='12'\nNAME=\"say \\\"hi\\\"\"\n");
  EXPECT_EQ(os.id, "debian");
  EXPECT_EQ(os.version_id, "12");
  EXPECT_EQ(os.pretty_name, "Debian GNU/Linux 12 (bookworm)");
  EXPECT_EQ(parse_os_release("ID=\"unterminated\nVERSION_ID=3.20.3\r\n").version_id, "3.20.3");
  EXPECT_EQ(parse_os_release("").id, "");
}

TEST(ReadPackageDb, DispatchesByKind) {
  EXPECT_EQ(read_package_db("var/lib/dpkg/status",
                            "Package: a\nStatus: install ok installed\nVersion: 1\n")
                .front()
                .path,
            "/var/lib/dpkg/status");
  EXPECT_EQ(read_package_db("var/lib/dpkg/status.d/a", "Package: a\nVersion: 1\n").size(), 1u);
  EXPECT_TRUE(read_package_db("var/lib/dpkg/status.d/a.md5sums", "Package: a\n").empty());
  EXPECT_EQ(read_package_db("lib/apk/db/installed", "P:a\nV:1\n").front().ecosystem, "apk");
  EXPECT_EQ(read_package_db("usr/lib/python3/dist-packages/a-1.egg-info", "Name: a\n").front().path,
            "/usr/lib/python3/dist-packages/a-1.egg-info");
  EXPECT_TRUE(read_package_db("etc/os-release", "ID=debian\n").empty());
  EXPECT_TRUE(read_package_db("etc/passwd", "Package: a\n").empty());
}

TEST(ReadPackageDb, FixtureRootsGiveTheirPackages) {
  OsRelease os;
  auto debian = read_root(k_fixtures / "debian", &os);
  EXPECT_EQ(os.id, "debian");
  EXPECT_EQ(os.version_id, "12");
  EXPECT_EQ(debian.size(), 6u);
  auto distroless = read_root(k_fixtures / "distroless", &os);
  EXPECT_EQ(os.pretty_name, "Distroless");
  EXPECT_EQ(distroless.size(), 3u);
  auto alpine = read_root(k_fixtures / "alpine", &os);
  EXPECT_EQ(os.id, "alpine");
  EXPECT_EQ(alpine.size(), 4u);
  auto python = read_root(k_fixtures / "python");
  EXPECT_EQ(python.size(), 4u); // cryptography twice: a .dist-info and an .egg-info
}

TEST(PackageUrl, EncodesAsThePurlSpecCanonicalForm) {
  // purl-spec tests/types/deb-test.json: the epoch's colon stays, the plus is encoded.
  Package attr{"deb", "attr", "1:2.4.47-2+b1", "amd64", "", "", "", "/var/lib/dpkg/status"};
  EXPECT_EQ(package_url(attr, {}), "pkg:deb/debian/attr@1:2.4.47-2%2Bb1?arch=amd64");
  EXPECT_EQ(package_url(attr, {"debian", "12", ""}),
            "pkg:deb/debian/attr@1:2.4.47-2%2Bb1?arch=amd64&distro=debian-12");
  EXPECT_EQ(package_url(attr, {"Ubuntu", "", ""}),
            "pkg:deb/ubuntu/attr@1:2.4.47-2%2Bb1?arch=amd64");
  Package musl{"apk", "musl", "1.2.5-r0", "x86_64", "musl", "", "MIT", "/lib/apk/db/installed"};
  EXPECT_EQ(package_url(musl, {"alpine", "3.20.3", ""}),
            "pkg:apk/alpine/musl@1.2.5-r0?arch=x86_64&distro=alpine-3.20.3");
  EXPECT_EQ(package_url(musl, {}), "pkg:apk/alpine/musl@1.2.5-r0?arch=x86_64");
  Package python{"python", "Foo__Bar.-baz", "1.0+local.1", "", "", "", "", "/m"};
  EXPECT_EQ(package_url(python, {"debian", "12", ""}), "pkg:pypi/foo-bar-baz@1.0%2Blocal.1");
  Package odd{"deb", "x", "1 2/3?4#5@6%7&8=9~", "", "", "", "", "/s"};
  EXPECT_EQ(package_url(odd, {}), "pkg:deb/debian/x@1%202%2F3%3F4%235%406%257%268%3D9~");
  Package unversioned{"python", "pip", "", "", "", "", "", "/m"};
  EXPECT_EQ(package_url(unversioned, {}), "pkg:pypi/pip");
}

const SbomSubject k_subject{"127.0.0.1:5000/demo/app:1.0", "sha256:" + std::string(64, 'a'),
                            "linux/amd64"};

std::vector<Package> sample_packages() {
  return {
      {"deb", "libc6", "2.36-9", "amd64", "glibc", "GNU Libc Maintainers <libc@example.org>", "",
       "/var/lib/dpkg/status"},
      {"deb", "libc6", "2.36-9", "i386", "glibc", "", "", "/var/lib/dpkg/status"},
      {"deb", "bsdutils", "1:2.38.1-5+b1", "amd64", "util-linux", "", "", "/var/lib/dpkg/status"},
      {"apk", "ca-certificates-bundle", "20240705-r0", "x86_64", "", "", "mpl-2.0 and MIT",
       "/lib/apk/db/installed"},
      {"apk", "tzdata", "2024b-r0", "x86_64", "", "", "Public-Domain", "/lib/apk/db/installed"},
      {"python", "six", "1.16.0", "", "", "jane@example.org", "BSD",
       "/usr/lib/python3/dist-packages/six-1.16.0.dist-info/METADATA"},
      {"python", "foo_bar", "1", "", "", "", "GPL-2.0+ WITH Classpath-exception-2.0", "/a/x/M"},
      {"python", "foo-bar", "1", "", "", "", "BSD", "/b/y/M"},
  };
}

bool valid_spdx_id(const std::string& id) {
  constexpr std::string_view k_prefix = "SPDXRef-";
  return id.size() > k_prefix.size() && id.starts_with(k_prefix) &&
         std::all_of(id.begin() + k_prefix.size(), id.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '-';
         });
}

const nlohmann::json* package_named(const nlohmann::json& doc, std::string_view name,
                                    std::string_view version) {
  for (const auto& package : doc["packages"]) {
    if (package["name"] == name && package.value("versionInfo", "") == version) {
      return &package;
    }
  }
  return nullptr;
}

TEST(SpdxDocument, HasTheShapeSpdx23Asks) {
  auto doc = spdx_document(k_subject, sample_packages(), {"debian", "12", ""},
                           "2026-01-02T03:04:05Z", "0.9.0");
  EXPECT_EQ(doc["spdxVersion"], "SPDX-2.3");
  EXPECT_EQ(doc["dataLicense"], "CC0-1.0");
  EXPECT_EQ(doc["SPDXID"], "SPDXRef-DOCUMENT");
  EXPECT_EQ(doc["name"], k_subject.name);
  EXPECT_EQ(doc["documentNamespace"],
            "https://kiln.dev/spdx/sha256:" + std::string(64, 'a') + "/linux/amd64");
  EXPECT_EQ(doc["creationInfo"]["created"], "2026-01-02T03:04:05Z");
  EXPECT_EQ(doc["creationInfo"]["creators"], nlohmann::json::array({"Tool: kiln-0.9.0"}));

  const auto& packages = doc["packages"];
  ASSERT_EQ(packages.size(), 9u);
  const auto& image = packages[0];
  EXPECT_EQ(image["primaryPackagePurpose"], "CONTAINER");
  EXPECT_EQ(image["name"], k_subject.name);
  EXPECT_EQ(image["checksums"][0]["algorithm"], "SHA256");
  EXPECT_EQ(image["checksums"][0]["checksumValue"], std::string(64, 'a'));
  EXPECT_EQ(image["externalRefs"][0]["referenceLocator"],
            "pkg:oci/app@sha256:" + std::string(64, 'a') +
                "?arch=amd64&repository_url=127.0.0.1:5000%2Fdemo%2Fapp&tag=1.0");

  std::set<std::string> ids{doc["SPDXID"].get<std::string>()};
  for (const auto& package : packages) {
    std::string id = package["SPDXID"];
    EXPECT_TRUE(valid_spdx_id(id)) << id;
    EXPECT_TRUE(ids.insert(id).second) << "twice: " << id;
    EXPECT_EQ(package["downloadLocation"], "NOASSERTION");
    EXPECT_EQ(package["filesAnalyzed"], false);
    ASSERT_EQ(package["externalRefs"].size(), 1u);
    EXPECT_EQ(package["externalRefs"][0]["referenceCategory"], "PACKAGE-MANAGER");
    EXPECT_EQ(package["externalRefs"][0]["referenceType"], "purl");
  }

  const auto& relationships = doc["relationships"];
  ASSERT_EQ(relationships.size(), packages.size());
  EXPECT_EQ(relationships[0]["spdxElementId"], "SPDXRef-DOCUMENT");
  EXPECT_EQ(relationships[0]["relationshipType"], "DESCRIBES");
  EXPECT_EQ(relationships[0]["relatedSpdxElement"], image["SPDXID"]);
  for (std::size_t i = 1; i < relationships.size(); ++i) {
    EXPECT_EQ(relationships[i]["spdxElementId"], image["SPDXID"]);
    EXPECT_EQ(relationships[i]["relationshipType"], "CONTAINS");
    EXPECT_EQ(relationships[i]["relatedSpdxElement"], packages[i]["SPDXID"]);
  }
}

TEST(SpdxDocument, PackagesInAStableOrderWithTheirFields) {
  auto packages = sample_packages();
  auto doc = spdx_document(k_subject, packages, {"debian", "12", ""}, "t", "1");
  std::vector<std::string> names;
  for (const auto& package : doc["packages"]) {
    names.push_back(package["name"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"127.0.0.1:5000/demo/app:1.0",
                                             "ca-certificates-bundle", "tzdata", "bsdutils",
                                             "libc6", "libc6", "foo-bar", "foo_bar", "six"}));
  std::reverse(packages.begin(), packages.end());
  EXPECT_EQ(spdx_document(k_subject, packages, {"debian", "12", ""}, "t", "1").dump(), doc.dump());

  const auto* libc = package_named(doc, "libc6", "2.36-9");
  ASSERT_TRUE(libc);
  EXPECT_EQ((*libc)["SPDXID"], "SPDXRef-Package-deb-libc6-2.36-9-amd64");
  EXPECT_EQ((*libc)["supplier"], "Person: GNU Libc Maintainers (libc@example.org)");
  EXPECT_EQ((*libc)["licenseDeclared"], "NOASSERTION");
  EXPECT_EQ((*libc)["sourceInfo"], "read from /var/lib/dpkg/status; source package glibc");
  EXPECT_EQ((*libc)["externalRefs"][0]["referenceLocator"],
            "pkg:deb/debian/libc6@2.36-9?arch=amd64&distro=debian-12");
  const auto* bsdutils = package_named(doc, "bsdutils", "1:2.38.1-5+b1");
  ASSERT_TRUE(bsdutils);
  EXPECT_EQ((*bsdutils)["SPDXID"], "SPDXRef-Package-deb-bsdutils-1-2.38.1-5-b1-amd64");
  EXPECT_EQ((*bsdutils)["supplier"], "NOASSERTION");
  const auto* six = package_named(doc, "six", "1.16.0");
  ASSERT_TRUE(six);
  EXPECT_EQ((*six)["supplier"], "Person: jane@example.org");
}

TEST(SpdxDocument, LicensesAreSpdxExpressionsOrDeclaredLicenseRefs) {
  auto doc = spdx_document(k_subject, sample_packages(), {}, "t", "1");
  // Listed ids take their listed case, operators upper case.
  EXPECT_EQ((*package_named(doc, "ca-certificates-bundle", "20240705-r0"))["licenseDeclared"],
            "MPL-2.0 AND MIT");
  // A deprecated GNU id as the SPDX list maps it.
  EXPECT_EQ((*package_named(doc, "foo_bar", "1"))["licenseDeclared"],
            "GPL-2.0-or-later WITH Classpath-exception-2.0");
  // Text that is no SPDX expression is declared once, with its text, and referred to.
  EXPECT_EQ((*package_named(doc, "tzdata", "2024b-r0"))["licenseDeclared"],
            "LicenseRef-Public-Domain");
  EXPECT_EQ((*package_named(doc, "six", "1.16.0"))["licenseDeclared"], "LicenseRef-BSD");
  EXPECT_EQ((*package_named(doc, "foo-bar", "1"))["licenseDeclared"], "LicenseRef-BSD");
  const auto& infos = doc["hasExtractedLicensingInfos"];
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[0]["licenseId"], "LicenseRef-Public-Domain");
  EXPECT_EQ(infos[0]["extractedText"], "Public-Domain");
  EXPECT_EQ(infos[1]["licenseId"], "LicenseRef-BSD");
  EXPECT_EQ(infos[1]["name"], "BSD");

  for (const std::string license :
       {"MIT OR", "(MIT", "MIT WITH MIT", "Apache 2.0", "LicenseRef-x", "GPL-2.0-only WITH",
        "((((((((((((((((((MIT))))))))))))))))))"}) {
    Package package{"apk", "p", "1", "", "", "", license, "/lib/apk/db/installed"};
    auto one = spdx_document(k_subject, {package}, {}, "t", "1");
    std::string declared = one["packages"][1]["licenseDeclared"];
    EXPECT_TRUE(declared.starts_with("LicenseRef-")) << license << " -> " << declared;
  }
  for (const auto& [license, declared] : std::vector<std::pair<std::string, std::string>>{
           {"GPL-2.0", "GPL-2.0-only"},
           {"lgpl-2.1+ OR MPL-1.1+", "LGPL-2.1-or-later OR MPL-1.1+"},
           {"wxWindows", "LicenseRef-wxWindows"}, // deprecated, and not a GNU one
       }) {
    Package package{"apk", "p", "1", "", "", "", license, "/lib/apk/db/installed"};
    EXPECT_EQ(spdx_document(k_subject, {package}, {}, "t", "1")["packages"][1]["licenseDeclared"],
              declared);
  }
  Package nested{"apk", "p", "1", "", "", "", "(MIT OR (Apache-2.0 AND bsd-3-clause))", "/l"};
  EXPECT_EQ(spdx_document(k_subject, {nested}, {}, "t", "1")["packages"][1]["licenseDeclared"],
            "(MIT OR (Apache-2.0 AND BSD-3-Clause))");
}

TEST(SpdxDocument, OneInstallListedOnceAndIdsStayUnique) {
  std::vector<Package> packages = {
      // Debian's python3-cryptography: two records of one install in one site folder.
      {"python", "cryptography", "38.0.4", "", "", "", "",
       "/d/cryptography-38.0.4.dist-info/METADATA"},
      {"python", "cryptography", "38.0.4", "", "", "", "", "/d/cryptography.egg-info/PKG-INFO"},
      // Another install of it elsewhere is a package of its own.
      {"python", "cryptography", "38.0.4", "", "", "", "",
       "/venv/cryptography-38.0.4.dist-info/METADATA"},
      // Names that map to one SPDXID.
      {"deb", "a_b", "1", "", "", "", "", "/var/lib/dpkg/status"},
      {"deb", "a+b", "1", "", "", "", "", "/var/lib/dpkg/status"},
      {"deb", "a-b-1", "", "", "", "", "", "/var/lib/dpkg/status"},
      {"deb", "a-b", "1", "", "", "", "", "/var/lib/dpkg/status.d/x"},
  };
  auto doc = spdx_document(k_subject, packages, {}, "t", "1");
  EXPECT_EQ(doc["packages"].size(), 1u + 6u);
  std::set<std::string> ids;
  for (const auto& package : doc["packages"]) {
    EXPECT_TRUE(valid_spdx_id(package["SPDXID"])) << package["SPDXID"];
    EXPECT_TRUE(ids.insert(package["SPDXID"]).second) << package["SPDXID"];
  }
}

TEST(SpdxDocument, AnyBytesSerialise) {
  Package bad{"deb",  std::string("caf\xe9\0x", 6), "1\xff", "amd64", "", "\xc3(<\x80>",
              "\xfe", "/var/lib/dpkg/status"};
  SbomSubject subject{"reg/\xff:tag", "sha256:short", ""};
  auto doc = spdx_document(subject, {bad}, {"\xff", "1", ""}, "\xff", "\xff");
  std::string text;
  ASSERT_NO_THROW(text = doc.dump());
  EXPECT_NE(text.find("caf\xEF\xBF\xBD"), std::string::npos);
  EXPECT_FALSE(doc["packages"][0].contains("checksums"));
}

/// The largest databases the scan hands over (k_package_db_limit) and a 1 MB line are read whole
/// and written into one document: every package kept, the long value kept to the byte.
TEST(SpdxDocument, ThirtyThousandPackagesAndAOneMegabyteLicenseAreReadAndWrittenWhole) {
  const std::string long_value(1 << 20, 'x');
  std::string status;
  std::string apk;
  for (int i = 0; i < 30000; ++i) {
    status += fmt::format("Package: p{}\nStatus: install ok installed\nVersion: 1.{}\n"
                          "Architecture: amd64\nDescription: d\n long text\n\n",
                          i, i);
    apk += fmt::format("P:a{}\nV:2.{}\nA:x86_64\nL:MIT\n\n", i, i);
  }
  status +=
      "Package: long\nStatus: install ok installed\nVersion: 1\nDescription: " + long_value + "\n";
  apk += "P:long\nV:1\nL:" + long_value + "\n";
  ASSERT_LT(status.size(), k_package_db_limit);

  auto packages = parse_dpkg_status(status, "/var/lib/dpkg/status");
  ASSERT_EQ(packages.size(), 30001u);
  EXPECT_EQ(packages.back().name, "long");
  auto from_apk = parse_apk_installed(apk, "/lib/apk/db/installed");
  ASSERT_EQ(from_apk.size(), 30001u);
  EXPECT_EQ(from_apk.back().license, long_value);
  auto python = parse_python_metadata("Name: big\nVersion: 1\nLicense: " + long_value + "\n",
                                      "/big.egg-info");
  ASSERT_TRUE(python);
  EXPECT_EQ(python->license, long_value);

  packages.insert(packages.end(), from_apk.begin(), from_apk.end());
  auto doc =
      spdx_document(k_subject, packages, {"debian", "12", ""}, "2026-01-02T03:04:05Z", "0.9.0");
  EXPECT_EQ(doc["packages"].size(), 60003u); // the image itself and every package
  EXPECT_NE(doc.dump().find(long_value), std::string::npos);
}

} // namespace
} // namespace kiln
