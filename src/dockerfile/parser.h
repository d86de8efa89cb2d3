#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

namespace kiln {

/// 1-based; column counts bytes, as BuildKit's does.
struct Position {
  int line = 0;
  int column = 0;
};

struct Heredoc {
  std::string name;
  std::string content; // with `<<-`, leading tabs already stripped from every line
  bool expand = true;  // false when any part of the delimiter word was quoted
  bool chomp = false;  // written `<<-`
};

/// `--mount=type=cache,target=/x` is name "mount", value "type=cache,target=/x"; quotes and
/// escapes in the flag word are already removed, as BuildKit does before handing flags on.
struct Flag {
  std::string name;
  std::string value;
  Position pos;
};

struct Instruction {
  std::string keyword;  // lower-case
  std::string original; // the logical line, continuations joined, heredoc bodies excluded
  std::vector<Flag> flags;
  /// Shell form: the raw rest of the line after the flags, one string. JSON form: the array
  /// elements. ENV/LABEL/ARG: key, value pairs with values raw (quotes kept, unexpanded, so
  /// expand_words can apply the scope later). FROM: image, then `AS` and name when present.
  std::vector<std::string> args;
  /// Where each of `args` starts in the file. A pair's value, a FROM word and the shell-form
  /// rest are their text as written there; a JSON element is placed at the array's start.
  std::vector<Position> arg_pos;
  /// ARG only, one entry per pair: whether `=` was written. `ARG NAME` takes the global
  /// default while `ARG NAME=` sets an empty one, and the pair alone cannot tell them apart.
  std::vector<bool> arg_has_value;
  bool json_form = false;
  std::vector<Heredoc> heredocs;
  Position start;
  Position end; // last physical line, heredoc terminator included
  /// Byte offset in the parsed text of the start of its first physical line: a caller that
  /// still holds the text finds the line there without splitting the whole file into lines.
  std::size_t line_offset = 0;
};

/// `ins.keyword == keyword`, lengths compared first: std::string == "literal" is an
/// out-of-line compare, and the parser and the rules test the keyword of every instruction.
inline bool keyword_is(const Instruction& ins, std::string_view keyword) {
  return std::string_view(ins.keyword) == keyword;
}

/// Whether the ARG pair holding `ins.args[i]` (its name or its value) was written with `=`.
inline bool arg_sets_value(const Instruction& ins, std::size_t i) {
  return i / 2 < ins.arg_has_value.size() && ins.arg_has_value[i / 2];
}

struct Dockerfile {
  char escape = '\\';
  std::string syntax;
  /// The `# check=` parser directive's value as written (BuildKit's lint configuration), and
  /// its line; empty and 0 without one.
  std::string check;
  int check_line = 0;
  std::vector<Instruction> instructions;
  std::vector<std::string> warnings;
  /// For each instruction continued across an empty line: its last continuation line, where
  /// BuildKit places the NoEmptyContinuation warning. Parallel to the `warnings` about them.
  std::vector<int> empty_continuation_lines;
};

struct ParseError {
  Position pos;
  std::string message;
};

/// How deeply `${VAR:-word}` may nest inside `word`. BuildKit sets no limit; kiln expands words
/// recursively, and a file nesting 25,000 deep overflowed its stack. Real files nest two or three.
constexpr int k_max_substitution_depth = 64;

/// Parses with BuildKit's rules (frontend/dockerfile/parser plus the unknown-instruction and
/// FROM-shape checks of its instructions package). Also an error: a word kiln expands (a flag
/// value, an argument of anything but RUN and the runtime-only instructions) that nests
/// substitutions deeper than k_max_substitution_depth.
tl::expected<Dockerfile, ParseError> parse_dockerfile(std::string_view text);

struct ExpandResult {
  std::string value;
  std::vector<std::string> unset; // names referenced but not set, first-seen order, unique
};

/// BuildKit's word processing: quotes removed, escapes applied, `$VAR`, `${VAR}`,
/// `${VAR:-w}`, `${VAR-w}`, `${VAR:+w}`, `${VAR+w}` expanded. Malformed input (an unclosed
/// quote or brace) is kept as far as it goes instead of failing: callers lint, they don't build.
/// Past k_max_substitution_depth the rest of the text is kept literally (parse_dockerfile has
/// already refused such a word in a file).
ExpandResult expand_words(std::string_view text, const std::map<std::string, std::string>& vars,
                          char escape);

struct StageScope {
  std::string name; // lower-case, empty for an unnamed stage
  int index = 0;
  std::string base;              // the FROM image with global ARGs expanded, as written otherwise
  Position from;                 // of its FROM
  std::vector<std::string> args; // declared in the stage
  std::map<std::string, std::string> env; // ENV in effect, inherited from FROM <stage>
};

/// The variables each stage sees, with BuildKit's ARG scoping: global ARGs (before the first
/// FROM) reach a stage only when redeclared there, no ARG crosses a FROM, and FROM <stage>
/// inherits that stage's ENV but not its ARGs. build_args override declared defaults.
std::vector<StageScope> stage_scopes(const Dockerfile& df,
                                     const std::map<std::string, std::string>& build_args);

} // namespace kiln
