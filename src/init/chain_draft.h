#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "chain/chain.h"

namespace kiln {

/// A stage `kiln init` proposes for one Dockerfile (or one target of it).
struct DraftStage {
  std::string name;
  std::filesystem::path dockerfile;    // relative to the chain's folder
  std::filesystem::path context;       // relative to the chain's folder; "": the folder itself
  std::string target;                  // "": the Dockerfile's last stage
  bool smoke = false;                  // named like a test: kind = "smoke"
  std::vector<std::string> needs;      // the draft stages its Dockerfile names, as it names them
  std::vector<std::string> unset_args; // ARGs declared with no default and pinned nowhere
};

/// A pin `kiln init` writes to the versions file: a version-like ARG and its default.
struct DraftPin {
  std::string name;
  std::string value;    // "" when no Dockerfile gives it a default
  std::string declared; // where, `file:line`
};

/// What `kiln init` writes: a chain of the Dockerfiles found under a folder.
struct ChainDraft {
  std::string name;
  std::vector<DraftStage> stages; // in an order where each comes after what it needs
  /// The folder's versions file exists already: the chain names it, and nothing is written.
  bool versions_kept = false;
  std::vector<DraftPin> pins; // to write, when !versions_kept
};

struct DraftOptions {
  /// A Dockerfile with several named stages becomes one chain stage per named stage (its
  /// `target`), instead of one stage building its last.
  bool per_target = false;
};

/// Every Dockerfile under `dir` (`Dockerfile`, `Containerfile`, `*.Dockerfile`,
/// `Dockerfile.*`, hidden folders and record folders left out) as a draft chain, or why not.
tl::expected<ChainDraft, std::string> draft_chain(const std::filesystem::path& dir,
                                                  const DraftOptions& options);

/// The chain file of `draft`, commented for a newcomer.
std::string render_chain(const ChainDraft& draft);
/// Its versions file (only when it has pins to write).
std::string render_versions(const ChainDraft& draft);

} // namespace kiln
