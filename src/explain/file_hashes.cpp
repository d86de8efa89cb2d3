#include "explain/file_hashes.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "util/fs.h"
#include "util/sha256.h"

namespace kiln {

namespace {

constexpr std::string_view k_header = "kiln file-hashes 1\n";

int64_t ns(const struct timespec& t) {
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

} // namespace

FileHashes::FileHashes(std::filesystem::path store) : m_store(std::move(store)) {
  auto text = read_file(m_store);
  if (!text || !std::string_view(*text).starts_with(k_header)) {
    return;
  }
  // One line per file: hash, dev, ino, size, mtime, ctime, path; tab-separated, path last.
  std::string_view rest = std::string_view(*text).substr(k_header.size());
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    if (nl == std::string_view::npos) {
      break; // a torn last line: that file is read again
    }
    std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    Entry e;
    std::string_view fields[6];
    bool whole = true;
    for (auto& field : fields) {
      auto tab = line.find('\t');
      if (tab == std::string_view::npos) {
        whole = false;
        break;
      }
      field = line.substr(0, tab);
      line.remove_prefix(tab + 1);
    }
    if (!whole || fields[0].size() != 64 || line.empty()) {
      continue;
    }
    try {
      e.hash = std::string(fields[0]);
      e.dev = std::stoull(std::string(fields[1]));
      e.ino = std::stoull(std::string(fields[2]));
      e.size = std::stoull(std::string(fields[3]));
      e.mtime_ns = std::stoll(std::string(fields[4]));
      e.ctime_ns = std::stoll(std::string(fields[5]));
    } catch (const std::exception&) {
      continue;
    }
    m_entries.emplace(std::string(line), std::move(e));
  }
}

tl::expected<std::string, std::string> FileHashes::hash(const std::filesystem::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    return tl::make_unexpected(fmt::format("cannot stat {}: {}", file.string(), strerror(errno)));
  }
  Entry seen{static_cast<uint64_t>(st.st_dev),
             static_cast<uint64_t>(st.st_ino),
             static_cast<uint64_t>(st.st_size),
             ns(st.st_mtim),
             ns(st.st_ctim),
             {}};
  const std::string key = file.string();
  {
    std::lock_guard lock(m_mutex);
    ++m_counts.files;
    if (auto it = m_entries.find(key); it != m_entries.end()) {
      seen.hash = it->second.hash;
      if (seen == it->second) {
        return seen.hash;
      }
    }
  }
  // Read outside the lock: other stages hash their own files meanwhile.
  auto digest = sha256_file_digest(file);
  if (!digest) {
    return tl::make_unexpected(digest.error());
  }
  seen.hash = digest->substr(7); // past "sha256:"
  std::lock_guard lock(m_mutex);
  ++m_counts.read;
  m_counts.bytes += seen.size;
  if (key.find_first_of("\t\n") == std::string::npos) {
    m_entries[key] = seen;
    m_changed = true;
  }
  return seen.hash;
}

tl::expected<void, std::string> FileHashes::save() {
  std::lock_guard lock(m_mutex);
  if (!m_changed) {
    return {};
  }
  const int64_t racy_after = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count() -
                             2'000'000'000;
  std::string text(k_header);
  text.reserve(m_entries.size() * 160);
  for (const auto& [path, e] : m_entries) {
    if (e.mtime_ns >= racy_after) {
      continue;
    }
    text += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\n", e.hash, e.dev, e.ino, e.size, e.mtime_ns,
                        e.ctime_ns, path);
  }
  auto written = write_file_atomic(m_store, text, Durability::rename_only);
  if (written) {
    m_changed = false;
  }
  return written;
}

FileHashes::Counts FileHashes::counts() const {
  std::lock_guard lock(m_mutex);
  return m_counts;
}

} // namespace kiln
