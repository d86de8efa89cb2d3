#include "driver/kiln_tools.h"

#include <system_error>

#include <unistd.h>

#include "util/fs.h"

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
  return install_tool(source, kiln_tools_dir(records));
}

tl::expected<void, std::string> install_tool(const fs::path& source, const fs::path& tools_dir) {
  fs::path target = tools_dir / source.filename();
  // By content, not size and time: a relink of the same bytes must leave the copy (and so every
  // stage's build context) untouched, and a different program of the same size and time must
  // not be missed. The program is a megabyte or two, compared a chunk at a time.
  if (same_bytes(source, target)) {
    return {};
  }
  std::error_code ec;
  fs::create_directories(tools_dir, ec);
  fs::path tmp = target;
  tmp += ".tmp" + std::to_string(::getpid());
  fs::copy_file(source, tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec) {
    // A rename, so a concurrent run never binds a half-copied program.
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
