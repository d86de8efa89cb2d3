#pragma once

#include <string>
#include <string_view>
#include <vector>

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

} // namespace kiln
