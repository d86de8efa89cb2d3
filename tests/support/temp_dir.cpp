#include "temp_dir.h"

#include <atomic>
#include <fstream>
#include <system_error>

#include <unistd.h>

#include "util/fs.h"

namespace kiln::testing {

TempDir::TempDir() {
  static std::atomic<int> count{0};
  m_path = std::filesystem::temp_directory_path() /
           ("kiln-test-" + std::to_string(::getpid()) + "-" + std::to_string(count++));
  std::filesystem::remove_all(m_path);
  std::filesystem::create_directories(m_path);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(m_path, ignored);
}

std::filesystem::path TempDir::write(const std::string& relative,
                                     const std::string& content) const {
  std::filesystem::path file = m_path / relative;
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << content;
  return file;
}

std::string TempDir::read(const std::string& relative) const {
  return read_file(m_path / relative).value_or(std::string());
}

} // namespace kiln::testing
