#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <tl/expected.hpp>

#include "dockerfile/parser.h"
#include "util/diagnostic.h"

namespace kiln {

/// A Dockerfile as a run reads it, once: the parse answers every question about it (declared
/// ARGs, stage names, parents, mounted secrets), the text is what lint quotes and reads its
/// suppression comments from.
struct DockerfileSource {
  std::filesystem::path path;
  std::string text;
  Dockerfile parsed;
};

/// Reads and parses `path`. The error is a parse error at its file:line:col, or what kept the
/// file from being read (with no position: the caller knows where the file was named).
tl::expected<std::shared_ptr<const DockerfileSource>, Diagnostic>
load_dockerfile(const std::filesystem::path& path);

} // namespace kiln
