#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln {

/// An image's software bill of materials, read from the package databases its layers hold: the
/// layer scan keeps the newest copy of each file package_db_kind names (whiteouts applied), the
/// readers here turn each into packages, and spdx_document writes them as SPDX 2.3 JSON.
///
/// The readers take any bytes: a truncated, binary or hand-edited database gives fewer packages,
/// never an exception, and every reader is linear in its input.

/// One installed package.
struct Package {
  std::string ecosystem; // "deb", "apk" or "python"
  std::string name;
  std::string version;
  std::string arch;     // deb Architecture, apk A:; "" for python
  std::string source;   // deb Source: without its "(version)" part, apk o: (origin); "" when none
  std::string supplier; // deb Maintainer, apk m:, python Author-email (with Author's name) or
                        // Author; "" when none
  std::string license;  // apk L:, python License-Expression or License; "" when none
  std::string path;     // the database file it was read from, absolute: "/var/lib/dpkg/status"
};

/// Which package database `path` (relative to the image root: `var/lib/dpkg/status`) is:
/// "dpkg-status", "dpkg-status.d", "apk-installed", "python-metadata", "os-release", or "" for
/// any other file. An `.egg-info` may be a file (the record itself) or a folder (its PKG-INFO is).
std::string_view package_db_kind(std::string_view path);

/// How much of a database file the scan reads. A Debian status file holds about 0.9 KB per
/// package (this Debian 12 host: 774 KB for 848), so 32 MiB is room for some 35,000 packages,
/// past any image; a larger file is read up to here and its last paragraph may be cut short.
constexpr std::size_t k_package_db_limit = std::size_t{32} << 20;

/// The installed packages of a dpkg status file: paragraphs whose Status is `install ok
/// installed` (its third word `installed`). A file of status.d (`path` under
/// /var/lib/dpkg/status.d/, as distroless images hold them) has no Status: each paragraph counts.
/// `path` is the file's absolute path in the image, kept in each package.
std::vector<Package> parse_dpkg_status(std::string_view text, std::string_view path);

/// The packages of an apk database (`/lib/apk/db/installed`): paragraphs of `X:value` lines.
std::vector<Package> parse_apk_installed(std::string_view text, std::string_view path);

/// The package a Python core-metadata file (`METADATA`, `PKG-INFO`) describes; nullopt when its
/// headers (up to the first blank line) name none.
std::optional<Package> parse_python_metadata(std::string_view text, std::string_view path);

/// The distribution an os-release file names (ID, VERSION_ID), for purl namespaces and qualifiers.
/// os-release(5): an image's etc/os-release wins over its usr/lib/os-release.
struct OsRelease {
  std::string id;
  std::string version_id;
  std::string pretty_name;
};

/// `KEY=value` lines, values bare or in single or double quotes (with `\` escapes in double).
OsRelease parse_os_release(std::string_view text);

/// Every package of one database file by its kind (package_db_kind of `path`, relative to the
/// image root); os-release and any other file yield none.
std::vector<Package> read_package_db(std::string_view path, std::string_view text);

/// The package URL (https://github.com/package-url/purl-spec) of a package:
/// `pkg:deb/<os id or debian>/<name>@<version>?arch=<arch>&distro=<id>-<version_id>`,
/// `pkg:apk/<os id or alpine>/...` alike, `pkg:pypi/<PEP 503 name>@<version>`. Canonical form:
/// every character but `A-Za-z0-9.-_~:` percent-encoded (`1:2.3+b1` is `1:2.3%2Bb1`).
std::string package_url(const Package& package, const OsRelease& os);

/// What the SBOM describes.
struct SbomSubject {
  std::string name;     // the image reference: "127.0.0.1:5000/demo/app:1.0"
  std::string digest;   // its manifest digest, "sha256:<hex>"
  std::string platform; // "linux/amd64"
};

/// An SPDX 2.3 JSON document: the image as a CONTAINER package that CONTAINS every package, in a
/// stable order (ecosystem, name, version, arch) so the same image gives the same bytes. A
/// license that is not an SPDX expression of listed ids is kept as a LicenseRef with its text;
/// bytes that are not UTF-8 become U+FFFD, so the document always serialises.
nlohmann::json spdx_document(const SbomSubject& subject, const std::vector<Package>& packages,
                             const OsRelease& os, const std::string& created,
                             const std::string& kiln_version);

} // namespace kiln
