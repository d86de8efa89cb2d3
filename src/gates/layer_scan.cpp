#include "gates/layer_scan.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "gates/elf_arch.h"
#include "gates/layer_tar.h"
#include "util/strings.h"

namespace kiln {

namespace {

struct ResidueHit {
  std::string path;
  std::string rule;
  std::string detail;
};

struct TreeEntry {
  LayerEntry::Type type = LayerEntry::Type::other;
  std::string link;
};

/// A hard link at a candidate's path: its content is its target's, read in a second pass.
struct LinkedCandidate {
  std::string path; // absolute
  std::string target;
  std::string rule;
};

/// What one layer contributes, read apart from the others.
struct LayerSummary {
  std::vector<ResidueHit> hits;
  std::vector<LinkedCandidate> links;
  std::vector<std::string> whiteouts;
  std::vector<std::string> opaques;
  std::vector<std::pair<std::string, TreeEntry>> entries; // only when artifacts are asked for
  std::vector<std::pair<std::string, ElfIdent>> foreign;  // path (absolute), its ident
  std::size_t elf_files = 0;
  std::vector<std::pair<std::string, std::string>> databases; // path (relative), content
  std::string error;
};

/// A layer the scan reads: a tar by its media type, or one with none given. A layout may hold
/// other blobs among an image's "layers" (an attestation's in-toto statement).
bool is_tar_layer(const LayerBlob& blob) {
  return blob.media_type.empty() || blob.media_type.find("tar") != std::string::npos;
}

tl::expected<void, std::string> walk_any_layer(const LayerBlob& blob, const LayerVisitor& visit) {
  return blob.content_dir.empty() ? walk_layer(blob.path, visit)
                                  : walk_store_layer(blob.path, blob.content_dir, visit);
}

/// The first bytes of the regular file at `path` in `layer`; nullopt when the layer has none
/// there (or cannot be read: the first pass would have said so).
std::optional<std::string> file_content(const LayerBlob& layer, const std::string& path) {
  std::optional<std::string> found;
  (void)walk_any_layer(layer, [&](const LayerEntry& entry, const ContentReader& content) {
    if (!found && entry.type == LayerEntry::Type::file && entry.path == path) {
      found = content(k_residue_read_limit);
    }
  });
  return found;
}

/// The hits of a layer's hard-linked candidates: each target's content, in the layer that links
/// it or a layer below (a tar links to an entry before it).
void resolve_links(const std::vector<LayerBlob>& layers, std::size_t index, LayerSummary& summary) {
  for (const auto& link : summary.links) {
    for (std::size_t below = index + 1; below-- > 0;) {
      if (auto content = file_content(layers[below], link.target)) {
        if (auto detail = residue_detail(link.rule, *content)) {
          summary.hits.push_back(
              {link.path, link.rule, fmt::format("{} (a hard link to /{})", *detail, link.target)});
        }
        break;
      }
    }
  }
}

LayerSummary summarise(const LayerBlob& blob, const ScanOptions& options,
                       const std::optional<ElfIdent>& platform) {
  LayerSummary summary;
  if (!is_tar_layer(blob)) {
    return summary;
  }
  const bool tree = !options.artifacts.empty();
  const bool arch = platform.has_value();
  auto walked = walk_any_layer(blob, [&](const LayerEntry& entry, const ContentReader& content) {
    if (entry.opaque) {
      summary.opaques.push_back(entry.path);
      return;
    }
    if (entry.whiteout) {
      summary.whiteouts.push_back(entry.path);
      return;
    }
    if (tree) {
      summary.entries.push_back({entry.path, {entry.type, entry.link}});
    }
    std::string_view rule = options.residue ? residue_rule(entry.path) : std::string_view();
    if (entry.type == LayerEntry::Type::hardlink) {
      // The same bytes under a candidate's name ship as surely as the file itself.
      if (!rule.empty()) {
        summary.links.push_back({"/" + entry.path, entry.link, std::string(rule)});
      }
      return;
    }
    if (entry.type != LayerEntry::Type::file) {
      return;
    }
    // One read serves every reader of the file: the content of a candidate, a package
    // database, or the first bytes that say whether it is an ELF file.
    bool database = options.sbom && !package_db_kind(entry.path).empty();
    std::size_t want =
        std::max({rule.empty() ? 0 : k_residue_read_limit, database ? k_package_db_limit : 0,
                  arch && entry.size >= k_elf_head_bytes ? k_elf_head_bytes : 0});
    if (want == 0) {
      return;
    }
    std::string bytes = content(want);
    if (!rule.empty()) {
      std::string_view head = std::string_view(bytes).substr(0, k_residue_read_limit);
      if (auto detail = residue_detail(rule, head)) {
        summary.hits.push_back({"/" + entry.path, std::string(rule), std::move(*detail)});
      }
    }
    if (arch) {
      if (auto ident = read_elf_ident(bytes)) {
        ++summary.elf_files;
        if (!elf_matches(*ident, *platform)) {
          summary.foreign.push_back({"/" + entry.path, *ident});
        }
      }
    }
    if (database) {
      bytes.resize(std::min(bytes.size(), k_package_db_limit));
      summary.databases.push_back({entry.path, std::move(bytes)});
    }
  });
  if (!walked) {
    summary.error = walked.error();
  }
  return summary;
}

/// Whether a later layer than `index` has an entry at `path` (relative): what it put there
/// hides what the earlier layer had. A second read, only for a finding about to refuse.
bool replaced_later(const std::vector<LayerBlob>& layers, std::size_t index,
                    const std::string& path) {
  for (std::size_t later = index + 1; later < layers.size(); ++later) {
    bool found = false;
    (void)walk_any_layer(layers[later], [&](const LayerEntry& entry, const ContentReader&) {
      found = found || (!entry.whiteout && !entry.opaque && entry.path == path);
    });
    if (found) {
      return true;
    }
  }
  return false;
}

bool under(std::string_view path, std::string_view dir) {
  return dir.empty() ||
         (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

void erase_tree(std::map<std::string, TreeEntry>& tree, const std::string& path, bool keep_self) {
  if (!keep_self) {
    tree.erase(path);
  }
  if (path.empty()) {
    tree.clear();
    return;
  }
  // Everything under `path/` sorts between `path/` and `path0` ('0' follows '/').
  tree.erase(tree.lower_bound(path + "/"), tree.lower_bound(path + "0"));
}

/// Whether `path` (absolute) names something in `tree`, symlinks on the way and at the end
/// followed as the kernel would, at most 40 of them.
bool exists(const std::map<std::string, TreeEntry>& tree, std::string_view path) {
  std::vector<std::string> todo; // components left, last first
  auto push_components = [&](std::string_view text) {
    std::vector<std::string> parts;
    for (const auto& part : split(text, '/')) {
      if (!part.empty() && part != ".") {
        parts.push_back(part);
      }
    }
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push_components(path);
  std::string current; // resolved so far, relative to the root
  int hops = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.back());
    todo.pop_back();
    if (part == "..") {
      current = current.substr(0, current.rfind('/') == std::string::npos ? 0 : current.rfind('/'));
      continue;
    }
    std::string next = current.empty() ? part : current + "/" + part;
    auto found = tree.find(next);
    if (found != tree.end() && found->second.type == LayerEntry::Type::symlink) {
      if (++hops > 40) {
        return false;
      }
      const std::string& target = found->second.link;
      if (target.starts_with("/")) {
        current.clear();
      }
      push_components(target);
      continue;
    }
    if (found == tree.end() && todo.empty()) {
      return false; // a directory may be implied by its files; the artifact itself may not
    }
    current = std::move(next);
  }
  return true;
}

} // namespace

std::size_t ImageScan::refused() const {
  return static_cast<std::size_t>(std::count_if(
      residue.begin(), residue.end(), [](const ResidueFinding& f) { return f.allowed.empty(); }));
}

tl::expected<ImageScan, std::string> scan_image(const LayoutImage& image,
                                                const ScanOptions& options) {
  std::optional<ElfIdent> platform =
      options.arch ? platform_elf(image.config.platform()) : std::nullopt;
  std::vector<LayerSummary> summaries(image.layers.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < image.layers.size(); i = next++) {
      try {
        summaries[i] = summarise(image.layers[i], options, platform);
      } catch (const std::exception& error) { // out of memory on a layer of millions of entries
        summaries[i].error =
            fmt::format("layer {}: {}", image.layers[i].path.string(), error.what());
      }
    }
  };
  std::size_t threads =
      std::min<std::size_t>(image.layers.size(), std::max(1U, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) {
    pool.emplace_back(work);
  }
  work();
  for (auto& thread : pool) {
    thread.join();
  }
  for (std::size_t i = 0; i < summaries.size(); ++i) {
    if (summaries[i].error.empty() && !summaries[i].links.empty()) {
      resolve_links(image.layers, i, summaries[i]);
    }
  }

  ImageScan scan;
  scan.platform = image.config.platform();
  scan.layers = image.layers.size();
  scan.arch_judged = platform.has_value();
  std::map<std::string, TreeEntry> tree;
  // Per path, the newest layer's package database; deleted ones dropped as the layers go.
  std::map<std::string, std::string> databases;
  for (std::size_t i = 0; i < summaries.size(); ++i) {
    LayerSummary& layer = summaries[i];
    if (!layer.error.empty()) {
      return tl::unexpected(layer.error);
    }
    const std::size_t number = i + 1;
    // A layer's whiteouts delete what the layers below it hold, never its own entries.
    auto drop_foreign = [&](const auto& covered) {
      std::erase_if(scan.foreign,
                    [&](const ForeignBinary& binary) { return covered(binary.path.substr(1)); });
      std::erase_if(databases, [&](const auto& entry) { return covered(entry.first); });
    };
    for (const auto& gone : layer.whiteouts) {
      for (auto& finding : scan.residue) {
        if (finding.deleted == 0 &&
            (finding.path.substr(1) == gone || under(finding.path.substr(1), gone))) {
          finding.deleted = number;
        }
      }
      drop_foreign([&](const std::string& path) { return path == gone || under(path, gone); });
      erase_tree(tree, gone, false);
    }
    for (const auto& dir : layer.opaques) {
      for (auto& finding : scan.residue) {
        if (finding.deleted == 0 && under(finding.path.substr(1), dir)) {
          finding.deleted = number;
        }
      }
      drop_foreign([&](const std::string& path) { return under(path, dir); });
      erase_tree(tree, dir, true);
    }
    scan.elf_files += layer.elf_files;
    for (auto& [path, ident] : layer.foreign) {
      ForeignBinary binary{std::move(path), elf_description(ident), number, {}};
      if (const ResidueAllow* allow = allowed_residue(options.arch_allow, binary.path)) {
        binary.allowed = allow->reason;
      }
      scan.foreign.push_back(std::move(binary));
    }
    for (auto& [path, text] : layer.databases) {
      databases[path] = std::move(text);
    }
    for (auto& [path, entry] : layer.entries) {
      if (entry.type != LayerEntry::Type::dir) {
        erase_tree(tree, path, true); // a file in a folder's place hides what the folder held
      }
      tree[path] = std::move(entry);
    }
    for (auto& hit : layer.hits) {
      ResidueFinding finding;
      finding.path = std::move(hit.path);
      finding.rule = std::move(hit.rule);
      finding.detail = std::move(hit.detail);
      finding.added = number;
      if (const ResidueAllow* allow = allowed_residue(options.allow, finding.path)) {
        finding.allowed = allow->reason;
      }
      scan.residue.push_back(std::move(finding));
    }
  }
  for (auto& finding : scan.residue) {
    finding.layers = scan.layers;
  }
  for (const auto& artifact : options.artifacts) {
    if (!exists(tree, artifact)) {
      scan.missing.push_back(artifact);
    }
  }
  // A foreign binary a later layer replaced (not deleted) is not in the final tree either.
  std::erase_if(scan.foreign, [&](const ForeignBinary& binary) {
    return binary.allowed.empty() &&
           replaced_later(image.layers, binary.layer - 1, binary.path.substr(1));
  });
  for (const auto& [path, text] : databases) {
    for (auto& package : read_package_db(path, text)) {
      scan.packages.push_back(std::move(package));
    }
  }
  // os-release(5): /etc/os-release when there is one, else /usr/lib/os-release.
  for (const char* path : {"usr/lib/os-release", "etc/os-release"}) {
    if (auto found = databases.find(path); found != databases.end()) {
      scan.os = parse_os_release(found->second);
    }
  }
  return scan;
}

tl::expected<std::vector<ImageScan>, std::string> scan_layout(const std::filesystem::path& layout,
                                                              const ScanOptions& options,
                                                              const std::string& digest) {
  auto images = layout_images(layout, digest);
  if (!images) {
    return tl::unexpected(images.error());
  }
  std::vector<ImageScan> scans;
  for (const auto& image : *images) {
    auto scan = scan_image(image, options);
    if (!scan) {
      return tl::unexpected(scan.error());
    }
    if (images->size() > 1) {
      for (auto& finding : scan->residue) {
        finding.platform = scan->platform;
      }
    }
    scans.push_back(std::move(*scan));
  }
  return scans;
}

} // namespace kiln
