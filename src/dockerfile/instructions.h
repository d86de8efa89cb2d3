#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

namespace kiln {

/// A Dockerfile cut into logical instructions: continuations joined with the active escape
/// character, comments and heredoc bodies dropped. A scanner for the few facts kiln reads
/// before a build (declared ARGs, stage names), not a parser.
struct Instructions {
  char escape = '\\';
  std::vector<std::string> lines; // one per instruction, keyword first
};

Instructions logical_instructions(std::string_view dockerfile_text);

/// The keyword of an instruction, lower-cased (`from`, `arg`), and the text after it.
std::string instruction_keyword(std::string_view instruction);
std::string_view instruction_arguments(std::string_view instruction);

/// A Dockerfile's text; the error names the file and why it could not be read.
tl::expected<std::string, std::string> read_dockerfile(const std::filesystem::path& file);

} // namespace kiln
