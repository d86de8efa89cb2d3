#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "util/cancel.h"

namespace kiln {

/// What kiln asks of a registry, through skopeo: pushes that keep every digest (what is pushed
/// is the bytes the gates read, and a digest that changed on the way is a failure), manifests
/// read back byte for byte, tags moved from one digest. Every command and its output go to the
/// log.
class RegistryClient {
public:
  struct Options {
    bool tls_verify = true;
    const CancelToken* cancel = nullptr; // nullptr: Ctrl-C
    /// A registry that stops answering is a stall; zero: none.
    std::chrono::milliseconds stall_timeout{0};
    std::function<void(std::string_view)> log = {};
    /// A folder of the caller's where raw answers are kept while read.
    std::filesystem::path scratch = {};
  };

  explicit RegistryClient(Options options) : m_options(std::move(options)) {}

  /// Push what the OCI layout at `layout` names `name` (an index with everything it lists) to
  /// `destination`, `<repository>@<digest>`: no tag moves, and skopeo refuses a manifest whose
  /// digest is not that one.
  tl::expected<void, std::string> push(const std::filesystem::path& layout, const std::string& name,
                                       const std::string& destination);

  /// The manifest or index `reference` names, as the registry serves it.
  tl::expected<std::string, std::string> manifest(const std::string& reference);

  /// Copy `from` (a registry reference by digest) to `to`, every image of an index with it and
  /// every digest unchanged: a tag moved, no blob sent twice.
  tl::expected<void, std::string> copy(const std::string& from, const std::string& to);

  /// The image `reference` names, with its blobs, into the OCI layout `layout` as `name`.
  tl::expected<void, std::string>
  fetch(const std::string& reference, const std::filesystem::path& layout, const std::string& name);

  /// Whether the last failure was a stop by the cancel token (Ctrl-C).
  bool interrupted() const { return m_interrupted; }
  /// The failed command's last lines: what failure classification reads.
  const std::vector<std::string>& tail() const { return m_tail; }

private:
  tl::expected<void, std::string> run(std::vector<std::string> argv,
                                      const std::filesystem::path& stdout_file = {});
  std::vector<std::string> tls(const char* flag) const;

  Options m_options;
  bool m_interrupted = false;
  std::vector<std::string> m_tail;
};

} // namespace kiln
