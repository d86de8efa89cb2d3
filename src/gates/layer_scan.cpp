#include "gates/layer_scan.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include <fmt/format.h>

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

/// What one layer contributes, read apart from the others.
struct LayerSummary {
  std::vector<ResidueHit> hits;
  std::vector<std::string> whiteouts;
  std::vector<std::string> opaques;
  std::vector<std::pair<std::string, TreeEntry>> entries; // only when artifacts are asked for
  std::string error;
};

/// A layer the scan reads: a tar by its media type, or one with none given. A layout may hold
/// other blobs among an image's "layers" (an attestation's in-toto statement).
bool is_tar_layer(const LayerBlob& blob) {
  return blob.media_type.empty() || blob.media_type.find("tar") != std::string::npos;
}

LayerSummary summarise(const LayerBlob& blob, const ScanOptions& options) {
  LayerSummary summary;
  if (!is_tar_layer(blob)) {
    return summary;
  }
  const bool tree = !options.artifacts.empty();
  auto walked = walk_layer(blob.path, [&](const LayerEntry& entry, const ContentReader& content) {
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
    if (!options.residue || entry.type != LayerEntry::Type::file) {
      return;
    }
    if (std::string_view rule = residue_rule(entry.path); !rule.empty()) {
      if (auto detail = residue_detail(rule, content(k_residue_read_limit))) {
        summary.hits.push_back({"/" + entry.path, std::string(rule), std::move(*detail)});
      }
    }
  });
  if (!walked) {
    summary.error = walked.error();
  }
  return summary;
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
  std::vector<LayerSummary> summaries(image.layers.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < image.layers.size(); i = next++) {
      try {
        summaries[i] = summarise(image.layers[i], options);
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

  ImageScan scan;
  scan.platform = image.config.platform();
  scan.layers = image.layers.size();
  std::map<std::string, TreeEntry> tree;
  for (std::size_t i = 0; i < summaries.size(); ++i) {
    LayerSummary& layer = summaries[i];
    if (!layer.error.empty()) {
      return tl::unexpected(layer.error);
    }
    const std::size_t number = i + 1;
    // A layer's whiteouts delete what the layers below it hold, never its own entries.
    for (const auto& gone : layer.whiteouts) {
      for (auto& finding : scan.residue) {
        if (finding.deleted == 0 &&
            (finding.path.substr(1) == gone || under(finding.path.substr(1), gone))) {
          finding.deleted = number;
        }
      }
      erase_tree(tree, gone, false);
    }
    for (const auto& dir : layer.opaques) {
      for (auto& finding : scan.residue) {
        if (finding.deleted == 0 && under(finding.path.substr(1), dir)) {
          finding.deleted = number;
        }
      }
      erase_tree(tree, dir, true);
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
