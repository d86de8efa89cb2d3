#include "driver/kiln_tools.h"

#include <system_error>

#include <unistd.h>

namespace kiln {

namespace fs = std::filesystem;

namespace {

fs::path kiln_cc_beside_kiln() {
  std::error_code ec;
  fs::path path = fs::read_symlink("/proc/self/exe", ec).parent_path() / "kiln-cc";
  return !ec && fs::is_regular_file(path, ec) ? path : fs::path();
}

} // namespace

fs::path kiln_tools_dir(const fs::path& records) {
  return kiln_cc_beside_kiln().empty() ? fs::path() : records / "tools";
}

tl::expected<void, std::string> refresh_kiln_tools(const fs::path& records) {
  fs::path source = kiln_cc_beside_kiln();
  if (source.empty()) {
    return {};
  }
  fs::path target = kiln_tools_dir(records) / "kiln-cc";
  std::error_code ec;
  // Size and modification time tell a rebuilt kiln-cc apart without reading either file.
  if (fs::is_regular_file(target, ec) && fs::file_size(target, ec) == fs::file_size(source, ec) &&
      fs::last_write_time(target, ec) == fs::last_write_time(source, ec) && !ec) {
    return {};
  }
  fs::create_directories(target.parent_path(), ec);
  fs::path tmp = target;
  tmp += ".tmp" + std::to_string(::getpid());
  fs::copy_file(source, tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec) {
    fs::last_write_time(tmp, fs::last_write_time(source, ec), ec);
  }
  if (!ec) {
    // A rename, so a concurrent run never binds a half-copied binary.
    fs::rename(tmp, target, ec);
  }
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return tl::unexpected("cannot copy " + source.string() + " to " + target.string() + ": " +
                          ec.message());
  }
  return {};
}

} // namespace kiln
