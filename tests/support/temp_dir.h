#pragma once

#include <filesystem>
#include <string>

namespace kiln::testing {

/// A scratch folder of its own under the system's temporary folder, removed with everything
/// in it when the object goes.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return m_path; }
  /// `path() / relative`, written with `content` (folders made as needed); returns the path.
  std::filesystem::path write(const std::string& relative, const std::string& content) const;
  /// The whole of `path() / relative`, "" when it cannot be read.
  std::string read(const std::string& relative) const;

private:
  std::filesystem::path m_path;
};

} // namespace kiln::testing
