#include "explain/rebuild_judge.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "disk/reclaim_journal.h"
#include "driver/build_request.h"
#include "util/fs.h"
#include "util/image_ref.h"

namespace kiln {

using json = nlohmann::json;

namespace {

/// An inputs file is what explains the next rebuild, never what a run needs to end: one that
/// cannot be written is missing from the next explanation ("new"), and the run goes on.
void keep(const std::filesystem::path& file, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  (void)write_file_atomic(file, text, Durability::rename_only);
}

} // namespace

RebuildJudge::RebuildJudge(const Chain& chain, const Engine& engine, const KeyValues& overrides,
                           bool no_cache)
    : m_chain(chain), m_engine(engine), m_overrides(overrides), m_no_cache(no_cache),
      m_hashes(chain.records / "file-hashes") {
  // Without a key a secret-shaped value is still never kept: its hash is keyed by nothing
  // anyone can read back, and compares equal to itself.
  m_key = records_secret_key(chain.records).value_or("kiln");
}

StageVerdict RebuildJudge::judge(const Stage& stage, const BuildRequest& request,
                                 const std::string& worker) {
  StageVerdict v;
  InputSources sources{m_overrides,
                       [&](const std::string& name) {
                         for (const auto& context : request.contexts) {
                           if (context.name == name) {
                             return context.identity;
                           }
                         }
                         return std::string();
                       },
                       m_hashes, m_key, m_no_cache};
  v.now = collect_inputs(m_chain, stage, request, sources);
  v.now.engine = m_engine.name();
  v.now.worker = worker;
  v.image = stage_context(m_chain, stage);
  // What each image from outside the chain resolves to now, as far as the engine can tell
  // before the build (buildah: the image under that name in its store).
  for (auto& [ref, digest] : v.now.bases) {
    digest = m_engine.external_image_digest(ref, v.image);
  }
  auto before = read_inputs(inputs_file(m_chain.records, stage.name));
  if (!before) {
    v.problem = before.error();
  } else {
    v.before = std::move(*before);
  }
  if (v.before) {
    v.evidence.reclaims = reclaims_since(m_chain.records, v.before->ended);
  }
  v.cause = rebuild_cause(v.now, v.before ? &*v.before : nullptr, v.evidence);
  // The store is asked only when nothing else says it rebuilds.
  if (!v.cause && v.before && !v.before->image.empty() &&
      !m_engine.holds_stage_image(v.image, v.before->image)) {
    std::string held = m_engine.stage_image_identity(v.image);
    v.evidence.image_gone =
        held.empty()
            ? fmt::format("the image of run {} ({}) is gone from {}'s store", v.before->run_id,
                          short_image_id(v.before->image), m_engine.name())
            : fmt::format("the stage's name in {}'s store holds {}, not the image of "
                          "run {} ({})",
                          m_engine.name(), short_image_id(held), v.before->run_id,
                          short_image_id(v.before->image));
    v.cause = cold_cause(v.now, *v.before, v.evidence);
  }
  if (v.cause && v.cause->kind != "new" && v.cause->kind != "cache-bypassed" &&
      v.cause->kind != "cold") {
    if ((v.earlier = earlier_build(stage.name, v.now))) {
      v.cause.reset();
    }
  }
  return v;
}

std::optional<StageInputs> RebuildJudge::earlier_build(const std::string& stage,
                                                       const StageInputs& now) const {
  std::vector<std::filesystem::path> runs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(m_chain.records / "runs", ec)) {
    runs.push_back(entry.path());
  }
  // Run ids start with their UTC start time: newest first.
  std::sort(runs.rbegin(), runs.rend());
  int searched = 0;
  for (const auto& run : runs) {
    auto earlier = read_inputs(inputs_file(run, stage));
    if (!earlier || !*earlier || (*earlier)->image.empty()) {
      continue;
    }
    if (++searched > k_earlier_runs_searched) {
      break;
    }
    if (!rebuild_cause(now, &**earlier, {})) {
      return std::move(**earlier);
    }
  }
  return std::nullopt;
}

std::optional<Cause> RebuildJudge::ended_ok(StageVerdict& v, const std::string& outcome,
                                            const std::string& image, const std::string& ended,
                                            bool import_dropped,
                                            const std::filesystem::path& run_folder) {
  v.now.run_id = run_folder.filename().string();
  v.now.image = image;
  v.now.ended = ended;
  // What the build itself resolved each outside image to (BuildKit says it in its metadata).
  for (auto& [ref, digest] : v.now.bases) {
    if (std::string resolved = m_engine.external_image_digest(ref, v.image); !resolved.empty()) {
      digest = resolved;
    }
  }
  std::optional<Cause> cause;
  if (outcome == "built") {
    v.evidence.import_dropped = import_dropped;
    cause = rebuild_cause(v.now, v.before ? &*v.before : nullptr, v.evidence);
    if (!cause) {
      cause = cold_cause(v.now, *v.before, v.evidence);
    }
  }
  std::string text = to_json(v.now).dump(1) + "\n";
  keep(inputs_file(run_folder, v.now.stage), text);
  keep(inputs_file(m_chain.records, v.now.stage), text);
  return cause;
}

void RebuildJudge::ended_otherwise(const StageVerdict& v, const std::filesystem::path& run_folder) {
  keep(inputs_file(run_folder, v.now.stage), to_json(v.now).dump(1) + "\n");
}

tl::expected<void, std::string> RebuildJudge::save() {
  return m_hashes.save();
}

} // namespace kiln
