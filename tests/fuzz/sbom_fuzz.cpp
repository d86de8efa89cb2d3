// The SBOM readers and the SPDX writer on any input. A bundle (`==> path <==` lines, as
// make_seeds.sh writes an image root of tests/fixtures/sbom) is read file by file, each by its
// path's kind, as the layer scan hands them over; the whole input also goes to every parser as it
// is. What they find becomes an SPDX document, whose invariants are checked.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_bundle.h"
#include "fuzz_check.h"
#include "gates/sbom.h"

namespace {

using kiln::Package;

void check_package(const Package& package) {
  FUZZ_CHECK(!package.name.empty());
  FUZZ_CHECK(package.ecosystem == "deb" || package.ecosystem == "apk" ||
             package.ecosystem == "python");
  FUZZ_CHECK(package.path.starts_with('/'));
}

bool valid_spdx_id(const std::string& id) {
  constexpr std::string_view k_prefix = "SPDXRef-";
  return id.size() > k_prefix.size() && id.starts_with(k_prefix) &&
         std::all_of(id.begin() + k_prefix.size(), id.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '-';
         });
}

/// A purl is ASCII without spaces: everything else is percent-encoded.
bool printable_ascii(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

void check_document(const nlohmann::json& doc, std::size_t packages) {
  std::string text;
  try {
    text = doc.dump();
  } catch (const nlohmann::json::exception&) {
    FUZZ_CHECK(!"the document serialises");
  }
  FUZZ_CHECK(nlohmann::json::parse(text, nullptr, false) == doc);
  FUZZ_CHECK(doc["spdxVersion"] == "SPDX-2.3" && doc["SPDXID"] == "SPDXRef-DOCUMENT");

  const auto& listed = doc["packages"];
  FUZZ_CHECK(listed.size() >= 1 && listed.size() <= packages + 1);
  std::set<std::string> ids{"SPDXRef-DOCUMENT"};
  std::set<std::string> declared;
  if (doc.contains("hasExtractedLicensingInfos")) {
    for (const auto& info : doc["hasExtractedLicensingInfos"]) {
      FUZZ_CHECK(declared.insert(info["licenseId"].get<std::string>()).second);
    }
  }
  for (const auto& package : listed) {
    std::string id = package["SPDXID"];
    FUZZ_CHECK(valid_spdx_id(id));
    FUZZ_CHECK(ids.insert(id).second);
    FUZZ_CHECK(printable_ascii(package["externalRefs"][0]["referenceLocator"]));
    std::string license = package["licenseDeclared"];
    if (license.starts_with("LicenseRef-")) {
      FUZZ_CHECK(declared.contains(license));
    }
    FUZZ_CHECK(license.find("LicenseRef-") == std::string::npos ||
               license.starts_with("LicenseRef-"));
  }
  const auto& relationships = doc["relationships"];
  FUZZ_CHECK(relationships.size() == listed.size());
  FUZZ_CHECK(relationships[0]["relationshipType"] == "DESCRIBES");
  for (std::size_t i = 1; i < relationships.size(); ++i) {
    FUZZ_CHECK(relationships[i]["relationshipType"] == "CONTAINS");
    FUZZ_CHECK(relationships[i]["relatedSpdxElement"] == listed[i]["SPDXID"]);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string_view text = fuzz::as_text(data, size);
  std::vector<Package> packages;
  OsRelease os;
  for (const auto& file : fuzz::split_bundle(text, "")) {
    if (package_db_kind(file.name) == "os-release") {
      os = parse_os_release(file.content);
    }
    for (Package& package : read_package_db(file.name, file.content)) {
      packages.push_back(std::move(package));
    }
  }
  for (const std::string_view path : {"/var/lib/dpkg/status", "/var/lib/dpkg/status.d/x"}) {
    for (Package& package : parse_dpkg_status(text, path)) {
      packages.push_back(std::move(package));
    }
  }
  for (Package& package : parse_apk_installed(text, "/lib/apk/db/installed")) {
    packages.push_back(std::move(package));
  }
  if (auto package = parse_python_metadata(text, "/x.dist-info/METADATA")) {
    packages.push_back(std::move(*package));
  }
  if (os.id.empty()) {
    os = parse_os_release(text);
  }
  for (const Package& package : packages) {
    check_package(package);
    FUZZ_CHECK(package_url(package, os).starts_with("pkg:"));
  }

  // The image reference is the input's first line, so the oci purl meets odd ones too.
  SbomSubject subject{std::string(text.substr(0, std::min<std::size_t>(text.find('\n'), 200))),
                      "sha256:" + std::string(64, 'f'), "linux/amd64"};
  auto doc = spdx_document(subject, packages, os, "2026-01-01T00:00:00Z", "0.0.0");
  check_document(doc, packages.size());
  // The same packages in another order are the same document, byte for byte.
  std::reverse(packages.begin(), packages.end());
  FUZZ_CHECK(spdx_document(subject, packages, os, "2026-01-01T00:00:00Z", "0.0.0").dump() ==
             doc.dump());
  return 0;
}
