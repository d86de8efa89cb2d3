#include "explain/context_files.h"

#include <fnmatch.h>

#include <algorithm>
#include <system_error>

namespace kiln {

namespace {

/// `path` relative to `context`, `/`-separated: a walk from the context yields paths under it,
/// so a prefix is cut instead of asking the filesystem (std::filesystem::relative resolves both
/// paths, several system calls per file of a 100,000-file context).
std::string relative_to(const std::filesystem::path& context, const std::filesystem::path& path) {
  const std::string& full = path.native();
  const std::string& base = context.native();
  size_t cut = base.size();
  while (cut < full.size() && full[cut] == '/') {
    ++cut;
  }
  return full.compare(0, base.size(), base) == 0 ? full.substr(cut) : path.generic_string();
}

bool has_pattern(std::string_view text) {
  return text.find_first_of("*?[") != std::string::npos;
}

/// Every file (and symlink, which COPY copies as one) at or under `rel`, unless ignored.
void add_tree(const std::filesystem::path& context, const std::string& rel,
              const DockerIgnore* ignore, std::vector<std::string>& out) {
  std::error_code ec;
  const std::filesystem::path root = rel.empty() ? context : context / rel;
  auto status = std::filesystem::symlink_status(root, ec);
  if (ec) {
    return;
  }
  if (!std::filesystem::is_directory(status)) {
    if (ignore == nullptr || !ignore->excludes(rel)) {
      out.push_back(rel);
    }
    return;
  }
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::string path = relative_to(context, it->path());
    if (it->is_directory(ec) && !it->is_symlink(ec)) {
      continue; // a directory a pattern ignores may still hold a file an exclusion keeps
    }
    if (ignore == nullptr || !ignore->excludes(path)) {
      out.push_back(std::move(path));
    }
  }
}

} // namespace

std::vector<std::string> selected_files(const std::filesystem::path& context,
                                        std::string_view source, const DockerIgnore* ignore) {
  std::string rel = clean_path(source);
  while (rel.starts_with("/")) {
    rel.erase(0, 1);
  }
  if (rel == ".") {
    rel.clear();
  }
  if (rel == ".." || rel.starts_with("../")) {
    return {};
  }
  std::vector<std::string> files;
  if (!has_pattern(rel)) {
    add_tree(context, rel, ignore, files);
  } else {
    // Walk from the deepest folder with no pattern in its name; match each path below it.
    auto first = rel.find_first_of("*?[");
    auto slash = rel.rfind('/', first);
    std::string fixed = slash == std::string::npos ? std::string() : rel.substr(0, slash);
    std::error_code ec;
    const std::filesystem::path start = fixed.empty() ? context : context / fixed;
    for (auto it = std::filesystem::recursive_directory_iterator(start, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      std::string path = relative_to(context, it->path());
      if (::fnmatch(rel.c_str(), path.c_str(), FNM_PATHNAME) == 0) {
        add_tree(context, path, ignore, files);
        it.disable_recursion_pending();
      }
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

} // namespace kiln
