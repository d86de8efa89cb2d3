#pragma once

// Fuzz inputs that stand for several files (a chain folder, an OCI layout, sccache's two
// streams): `==> name <==` lines, each followed by that file's content, as make_seeds.sh writes
// them from tests/fixtures. What comes before the first such line is the file `first`.

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace kiln::fuzz {

struct BundleFile {
  std::string name;
  std::string_view content;
};

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// The files of `input`; a name given twice keeps its last content.
inline std::vector<BundleFile> split_bundle(std::string_view input, std::string_view first) {
  constexpr std::string_view k_open = "==> ";
  constexpr std::string_view k_close = " <==";
  std::vector<BundleFile> files;
  std::string name(first);
  size_t start = 0;
  size_t line = 0;
  auto close_file = [&](size_t end) {
    if (!name.empty()) {
      std::erase_if(files, [&](const BundleFile& file) { return file.name == name; });
      files.push_back({name, input.substr(start, end - start)});
    }
  };
  while (line < input.size()) {
    size_t end = input.find('\n', line);
    size_t next = end == std::string_view::npos ? input.size() : end + 1;
    std::string_view text = input.substr(line, next - line);
    if (text.ends_with('\n')) {
      text.remove_suffix(1);
    }
    if (text.size() > k_open.size() + k_close.size() && text.starts_with(k_open) &&
        text.ends_with(k_close)) {
      close_file(line);
      name = std::string(text.substr(k_open.size(), text.size() - k_open.size() - k_close.size()));
      start = next;
    }
    line = next;
  }
  close_file(input.size());
  return files;
}

/// A folder of its own for the life of the fuzzing process, emptied for every input.
class ScratchDir {
public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::abort();
    }
    m_path = pattern;
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(m_path, ignored);
  }

  const std::filesystem::path& path() const { return m_path; }

  /// Empty the folder, then write `files` into it. A name that would leave the folder (absolute,
  /// `..`) or that the filesystem refuses is skipped: the fuzzer is not testing the filesystem.
  void write(const std::vector<BundleFile>& files) const {
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(m_path, ignored)) {
      std::filesystem::remove_all(entry.path(), ignored);
    }
    for (const BundleFile& file : files) {
      std::filesystem::path relative(file.name);
      if (!inside(relative)) {
        continue;
      }
      std::filesystem::path path = m_path / relative;
      std::filesystem::create_directories(path.parent_path(), ignored);
      std::ofstream(path, std::ios::binary)
          .write(file.content.data(), static_cast<std::streamsize>(file.content.size()));
    }
  }

private:
  static bool inside(const std::filesystem::path& relative) {
    if (relative.empty() || relative.is_absolute() || relative.native().size() > 200 ||
        relative.native().find('\0') != std::string::npos) {
      return false;
    }
    for (const auto& part : relative) {
      if (part == ".." || part == ".") {
        return false;
      }
    }
    return true;
  }

  std::filesystem::path m_path;
};

} // namespace kiln::fuzz
