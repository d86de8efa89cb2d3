#include "driver/scan_cache.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "util/fs.h"
#include "util/sha256.h"

namespace kiln {

namespace {

using json = nlohmann::json;

/// Bumped whenever what a scan finds changes, so an older kiln's scan is never taken as this
/// one's.
constexpr int k_scan_version = 1;

json allow_json(const std::vector<ResidueAllow>& allow) {
  json out = json::array();
  for (const auto& entry : allow) {
    out.push_back({entry.path, entry.reason});
  }
  return out;
}

json scan_json(const ImageScan& scan) {
  json residue = json::array();
  for (const auto& f : scan.residue) {
    residue.push_back({{"platform", f.platform},
                       {"path", f.path},
                       {"rule", f.rule},
                       {"detail", f.detail},
                       {"layers", f.layers},
                       {"added", f.added},
                       {"deleted", f.deleted},
                       {"allowed", f.allowed}});
  }
  json foreign = json::array();
  for (const auto& b : scan.foreign) {
    foreign.push_back({{"path", b.path},
                       {"description", b.description},
                       {"layer", b.layer},
                       {"allowed", b.allowed}});
  }
  json packages = json::array();
  for (const auto& p : scan.packages) {
    packages.push_back({{"ecosystem", p.ecosystem},
                        {"name", p.name},
                        {"version", p.version},
                        {"arch", p.arch},
                        {"source", p.source},
                        {"supplier", p.supplier},
                        {"license", p.license},
                        {"path", p.path}});
  }
  return {{"platform", scan.platform},
          {"layers", scan.layers},
          {"residue", residue},
          {"missing", scan.missing},
          {"foreign", foreign},
          {"arch_judged", scan.arch_judged},
          {"elf_files", scan.elf_files},
          {"packages", packages},
          {"os", {scan.os.id, scan.os.version_id, scan.os.pretty_name}}};
}

ImageScan scan_of(const json& doc) {
  ImageScan scan;
  scan.platform = doc.at("platform").get<std::string>();
  scan.layers = doc.at("layers").get<std::size_t>();
  for (const auto& f : doc.at("residue")) {
    scan.residue.push_back({f.at("platform"), f.at("path"), f.at("rule"), f.at("detail"),
                            f.at("layers"), f.at("added"), f.at("deleted"), f.at("allowed")});
  }
  scan.missing = doc.at("missing").get<std::vector<std::string>>();
  for (const auto& b : doc.at("foreign")) {
    scan.foreign.push_back({b.at("path"), b.at("description"), b.at("layer"), b.at("allowed")});
  }
  scan.arch_judged = doc.at("arch_judged").get<bool>();
  scan.elf_files = doc.at("elf_files").get<std::size_t>();
  for (const auto& p : doc.at("packages")) {
    scan.packages.push_back({p.at("ecosystem"), p.at("name"), p.at("version"), p.at("arch"),
                             p.at("source"), p.at("supplier"), p.at("license"), p.at("path")});
  }
  const json& os = doc.at("os");
  scan.os = {os.at(0), os.at(1), os.at(2)};
  return scan;
}

} // namespace

std::string ScanCache::key(const std::string& identity, const ScanOptions& options) {
  json what = {{"version", k_scan_version},
               {"image", identity},
               {"residue", options.residue},
               {"allow", allow_json(options.allow)},
               {"artifacts", options.artifacts},
               {"arch", options.arch},
               {"arch_allow", allow_json(options.arch_allow)},
               {"sbom", options.sbom}};
  return sha256_digest(what.dump()).substr(7, 32);
}

std::optional<std::vector<ImageScan>> ScanCache::find(const std::string& key) const {
  auto text = read_file(m_dir / (key + ".json"));
  if (!text) {
    return std::nullopt;
  }
  json doc = json::parse(*text, nullptr, false);
  if (!doc.is_array()) {
    return std::nullopt;
  }
  try {
    std::vector<ImageScan> scans;
    for (const auto& each : doc) {
      scans.push_back(scan_of(each));
    }
    return scans;
  } catch (const json::exception&) {
    return std::nullopt; // a file of another shape is no scan: read the image again
  }
}

void ScanCache::keep(const std::string& key, const std::vector<ImageScan>& scans) const {
  json doc = json::array();
  for (const auto& scan : scans) {
    doc.push_back(scan_json(scan));
  }
  std::error_code ignored;
  std::filesystem::create_directories(m_dir, ignored);
  if (!write_file_atomic(m_dir / (key + ".json"), doc.dump(), Durability::rename_only)) {
    return;
  }
  std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> files;
  for (const auto& entry : std::filesystem::directory_iterator(m_dir, ignored)) {
    files.emplace_back(entry.last_write_time(ignored), entry.path());
  }
  if (files.size() <= k_kept) {
    return;
  }
  std::sort(files.begin(), files.end());
  for (size_t i = 0; i + k_kept < files.size(); ++i) {
    std::filesystem::remove(files[i].second, ignored);
  }
}

} // namespace kiln
