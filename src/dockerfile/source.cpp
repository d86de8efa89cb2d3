#include "dockerfile/source.h"

#include "util/fs.h"

namespace kiln {

tl::expected<std::shared_ptr<const DockerfileSource>, Diagnostic>
load_dockerfile(const std::filesystem::path& path) {
  auto source = std::make_shared<DockerfileSource>();
  source->path = path;
  if (auto read = read_file_into(path, source->text); !read) {
    return tl::unexpected(Diagnostic{{}, read.error(), {}});
  }
  auto parsed = parse_dockerfile(source->text);
  if (!parsed) {
    return tl::unexpected(
        Diagnostic{{path.string(), parsed.error().pos.line, std::max(parsed.error().pos.column, 1)},
                   parsed.error().message,
                   {}});
  }
  source->parsed = std::move(*parsed);
  return source;
}

} // namespace kiln
