#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <tl/expected.hpp>

namespace kiln {

/// Every name a Dockerfile declares with ARG, global or per stage, in first-seen order.
/// Honours the escape directive, line continuations, comments and heredoc bodies.
std::vector<std::string> declared_args(std::string_view dockerfile_text);

/// The same, read from a file; the error names the file and why it could not be read.
tl::expected<std::vector<std::string>, std::string>
declared_args_in_file(const std::filesystem::path& file);

} // namespace kiln
