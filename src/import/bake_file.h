// What `docker buildx bake` describes, read from the JSON that `docker buildx bake --print`
// prints (or a bake file written in JSON): its targets and groups, in buildx's own field names
// (bake/bake.go `Target`), nothing kiln-specific yet. bake_chain.h turns it into a chain file.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

#include "util/diagnostic.h"

namespace kiln {

/// A field of a target that kiln has no place for, as the report names it: `output`,
/// `ssh`, ... and its value shown short (`type=registry`).
struct BakeField {
  std::string key;
  std::string shown;
};

/// `secret` entries: `id=...,src=...` / `id=...,env=...` strings or `{id, src, env}` objects.
struct BakeSecret {
  std::string id;
  std::string src;
  std::string env;
};

struct BakeTarget {
  std::string key;  // its name in the file's "target" object
  std::string name; // `name` when set (a matrix target's name template), else the key
  int line = 0;     // of its key, for messages
  std::string description;
  std::vector<std::string> inherits;
  std::optional<std::string> context;
  std::optional<std::string> dockerfile;
  std::optional<std::string> dockerfile_inline;
  std::optional<std::string> target;
  /// `args` in file order; a null value (the Dockerfile's default) has no value.
  std::vector<std::pair<std::string, std::optional<std::string>>> args;
  std::vector<std::string> tags;
  std::vector<std::string> platforms;
  std::vector<std::pair<std::string, std::string>> contexts;
  std::vector<BakeSecret> secrets;
  /// `cache-from` and `cache-to`, each in BuildKit's `type=...,key=value` form.
  std::vector<std::string> cache_from;
  std::vector<std::string> cache_to;
  /// `matrix`: each variable and its values, when every value is a string.
  std::vector<std::pair<std::string, std::vector<std::string>>> matrix;
  bool no_cache = false;
  /// Everything else the target sets, in file order.
  std::vector<BakeField> other;
};

struct BakeGroup {
  std::string name;
  std::vector<std::string> targets; // targets or groups
};

struct BakeFile {
  std::vector<BakeTarget> targets; // in file order, `inherits` already applied
  std::vector<BakeGroup> groups;
  std::vector<std::string> other_blocks; // top-level keys besides group and target
};

/// Parse bake JSON `text`, read from `file` (named in errors). A malformed file or a field of
/// the wrong shape is an error at its line and column; a field kiln does not know is kept in
/// `other`, never an error, so a newer buildx's output still imports.
tl::expected<BakeFile, Diagnostic> parse_bake_json(std::string_view text, const std::string& file);

} // namespace kiln
