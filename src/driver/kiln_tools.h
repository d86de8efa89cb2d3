#pragma once

#include <filesystem>
#include <string>

#include <tl/expected.hpp>

namespace kiln {

/// `<records>/tools`, the folder every stage is offered as the build context `kiln-tools`, or
/// an empty path when no kiln-cc stands beside the running kiln. A folder of its own, because a
/// build context is a whole folder and kiln's own holds far more.
std::filesystem::path kiln_tools_dir(const std::filesystem::path& records);

/// Make kiln_tools_dir(records) hold a current copy of the kiln-cc beside the running kiln.
tl::expected<void, std::string> refresh_kiln_tools(const std::filesystem::path& records);

/// Make `tools_dir` hold a current copy of the program `source`, under the same name.
tl::expected<void, std::string> install_tool(const std::filesystem::path& source,
                                             const std::filesystem::path& tools_dir);

} // namespace kiln
