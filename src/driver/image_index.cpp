#include "driver/image_index.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "driver/build_request.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/strings.h"

namespace kiln {

namespace {

std::string label(const ImageConfig& config, const std::string& key) {
  auto it = config.labels.find(key);
  return it == config.labels.end() ? std::string() : it->second;
}

bool built_in_this_run(const std::string& outcome) {
  return outcome == "built" || outcome == "reused";
}

/// Why a lane's image is not this run's, in the words of the failure report.
std::string stale_detail(const LaneImage& image, const std::string& stamp,
                         const std::string& run_id) {
  std::string by = stamp.empty()     ? "it carries no run stamp"
                   : stamp == run_id ? "it is stamped by this run"
                                     : "built by run " + stamp;
  if (image.outcome.empty()) {
    return by + "; this run did not build " + image.stage;
  }
  if (!built_in_this_run(image.outcome)) {
    return fmt::format("{}; this run's build of {} ended {}", by, image.stage, image.outcome);
  }
  return by + ", not by this run";
}

IndexLaneRecord classify(const LaneImage& image, const std::string& run_id) {
  IndexLaneRecord lane{image.lane, image.stage, image.platform, "", "", "", ""};
  if (!image.config) {
    lane.image = "missing";
    lane.detail =
        image.outcome.empty() || built_in_this_run(image.outcome)
            ? image.config.error()
            : fmt::format("{} ended {}: {}", image.stage, image.outcome, image.config.error());
    return lane;
  }
  lane.run_id = label(*image.config, k_run_id_label);
  if (built_in_this_run(image.outcome) && lane.run_id == run_id) {
    lane.image = "built-this-run";
  } else {
    lane.image = "stale";
    lane.detail = stale_detail(image, lane.run_id, run_id);
  }
  return lane;
}

GateRecord gate(const std::string& name, const std::string& ref,
                std::vector<std::string> findings) {
  GateRecord record;
  record.gate = name;
  record.subject = "index " + ref;
  record.verdict = findings.empty() ? "pass" : "refused";
  record.findings = std::move(findings);
  return record;
}

std::vector<std::string> completeness(const std::vector<LaneImage>& images,
                                      const std::vector<IndexLaneRecord>& lanes) {
  std::vector<std::string> findings;
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (lanes[i].image == "missing") {
      findings.push_back(fmt::format("lane {}: no image of {}: {}", lanes[i].lane, lanes[i].stage,
                                     lanes[i].detail));
    }
    for (const auto& unfinished : images[i].unfinished) {
      findings.push_back(fmt::format("lane {}: {}", lanes[i].lane, unfinished));
    }
  }
  return findings;
}

std::vector<std::string> coherence(const std::vector<LaneImage>& images,
                                   const std::string& run_id) {
  std::vector<std::string> findings;
  const ImageConfig* first = nullptr;
  std::string first_lane;
  for (const auto& image : images) {
    const ImageConfig& config = *image.config; // completeness passed: every image is there
    std::string stamp = label(config, k_run_id_label);
    if (stamp != run_id) {
      findings.push_back(
          stamp.empty() ? fmt::format("lane {}: its image carries no run stamp ({})", image.lane,
                                      k_run_id_label)
                        : fmt::format("lane {}: its image is stamped with run {}, not this run",
                                      image.lane, stamp));
    }
    if (!same_platform(config.platform(), image.platform)) {
      findings.push_back(fmt::format("lane {}: its image is for {}, and the lane builds {}",
                                     image.lane, config.platform(), image.platform));
    }
    if (first == nullptr) {
      first = &config;
      first_lane = image.lane;
      continue;
    }
    for (const char* key : {"dev.kiln.chain", "dev.kiln.pins"}) {
      if (label(config, key) != label(*first, key)) {
        findings.push_back(fmt::format("lane {}: {} is '{}', lane {}'s is '{}'", image.lane, key,
                                       label(config, key), first_lane, label(*first, key)));
      }
    }
  }
  return findings;
}

std::vector<std::string> freshness(const std::vector<IndexLaneRecord>& lanes) {
  std::vector<std::string> findings;
  for (const auto& lane : lanes) {
    if (lane.image != "built-this-run") {
      findings.push_back(fmt::format("lane {}: {}", lane.lane, lane.detail));
    }
  }
  return findings;
}

} // namespace

IndexVerdict judge_index(const std::string& ref, const std::vector<LaneImage>& images,
                         const std::string& run_id) {
  IndexVerdict verdict;
  for (const auto& image : images) {
    verdict.lanes.push_back(classify(image, run_id));
  }
  const std::vector<std::string> order = {"completeness", "coherence", "freshness"};
  for (size_t i = 0; i < order.size(); ++i) {
    std::vector<std::string> findings = i == 0   ? completeness(images, verdict.lanes)
                                        : i == 1 ? coherence(images, run_id)
                                                 : freshness(verdict.lanes);
    verdict.gates.push_back(gate(order[i], ref, std::move(findings)));
    if (verdict.gates.back().verdict != "pass") {
      verdict.gates_not_run.assign(order.begin() + static_cast<long>(i) + 1, order.end());
      verdict.gates_not_run.insert(verdict.gates_not_run.end(), {"push", "read-back"});
      break;
    }
  }
  return verdict;
}

namespace {

/// Runs the buildah commands of one index push, each logged with its output.
class ManifestTool {
public:
  ManifestTool(RecordLog& log, const BuildLimits& limits) : m_log(log), m_limits(limits) {}

  /// The command's output, or why it failed. `cleanup`: run even once the push was cancelled,
  /// as what removes the local lists must.
  tl::expected<std::string, std::string> run(const std::vector<std::string>& argv,
                                             bool cleanup = false) {
    m_log.write("$ " + quoted_command(argv) + "\n");
    std::string output;
    ProcessSpec spec{argv};
    static const CancelToken never;
    spec.cancel = cleanup ? &never : m_limits.cancel;
    spec.stall_timeout = cleanup ? std::chrono::milliseconds(0) : m_limits.stall_timeout;
    ProcessExit exit = run_process(spec, [&](std::string_view chunk) {
      output.append(chunk);
      m_log.write(chunk);
    });
    if (exit.interrupted) {
      m_interrupted = true;
    }
    if (!exit.ok()) {
      keep_tail(output);
      CapturedRun failed{exit, output};
      return tl::unexpected(fmt::format("`{}` failed: {}", quoted_command(argv), failed.failure()));
    }
    return output;
  }

  bool interrupted() const { return m_interrupted; }
  const Tail& tail() const { return m_tail; }

private:
  /// The last lines of a failed command's output, for classification.
  void keep_tail(const std::string& output) {
    m_tail.clear();
    for (const auto& line : split(output, '\n')) {
      if (!line.empty()) {
        m_tail.push_back(line);
      }
    }
    if (m_tail.size() > k_failure_tail_lines) {
      m_tail.erase(m_tail.begin(), m_tail.end() - static_cast<long>(k_failure_tail_lines));
    }
  }

  Tail m_tail;
  RecordLog& m_log;
  const BuildLimits& m_limits;
  bool m_interrupted = false;
};

} // namespace

IndexPush push_index(const std::string& ref, bool tls_verify, const std::vector<LaneImage>& images,
                     const std::string& run_id, RecordLog& log, const BuildLimits& limits) {
  IndexPush push;
  ManifestTool tool(log, limits);
  // Local list names of this run's own (an attempt before this one may have left them).
  const std::string list = "kiln-index-" + lower(run_id);
  const std::string readback = list + "-readback";
  const std::string tls = fmt::format("--tls-verify={}", tls_verify ? "true" : "false");
  auto remove_lists = [&] {
    for (const auto& name : {list, readback}) {
      if (run_process({{"buildah", "manifest", "exists", name}}, [](std::string_view) {}).ok()) {
        (void)tool.run({"buildah", "manifest", "rm", name}, true);
      }
    }
  };
  auto fail = [&](std::string why) {
    push.failure = std::move(why);
    push.interrupted = tool.interrupted();
    push.tail = tool.tail();
    remove_lists();
    return push;
  };

  remove_lists();
  if (auto created = tool.run({"buildah", "manifest", "create", list}); !created) {
    return fail(created.error());
  }
  for (const auto& image : images) {
    std::vector<std::string> argv = {"buildah", "manifest", "add", tls};
    const ImageConfig& config = *image.config;
    argv.insert(argv.end(), {"--os", config.os, "--arch", config.architecture});
    if (!config.variant.empty()) {
      argv.insert(argv.end(), {"--variant", config.variant});
    }
    argv.insert(argv.end(), {"--annotation", "dev.kiln.lane=" + image.lane, "--annotation",
                             std::string(k_run_id_label) + "=" + run_id, list, image.source});
    auto added = tool.run(argv);
    if (!added) {
      return fail(added.error());
    }
    push.lane_digests.push_back(manifest_added_digest(*added));
  }
  // Pushed twice: buildah 1.28 exits 0 from a failed push when it is given --digestfile and
  // prints no error (tests/fixtures/buildah-1.28.2/manifest-push-refused), so the first push,
  // without it, says whether and why it failed; the second, finding everything there already,
  // writes the index's digest.
  std::vector<std::string> argv = {"buildah", "manifest", "push", "--all",          "--format",
                                   "oci",     tls,        list,   "docker://" + ref};
  if (auto pushed = tool.run(argv); !pushed) {
    return fail(pushed.error());
  }
  auto digest_file = log.path().parent_path() / "index.digest";
  std::error_code ignored;
  std::filesystem::remove(digest_file, ignored); // an earlier attempt's must not answer for this
  argv.insert(argv.end() - 2, {"--digestfile", digest_file.string()});
  auto again = tool.run(argv);
  auto digest = read_file(digest_file, 4096);
  push.digest = digest ? std::string(trim(*digest)) : std::string();
  if (!again || !is_oci_digest(push.digest)) {
    return fail(fmt::format("the index was pushed, but pushing it again for its digest wrote "
                            "none: {}",
                            again ? "the digest file is empty" : again.error()));
  }

  // Read back from the registry: the index it serves must list each lane's image.
  auto fetched =
      tool.run({"buildah", "manifest", "create", "--all", tls, readback, "docker://" + ref});
  if (!fetched) {
    return fail("read-back: " + fetched.error());
  }
  auto inspected = tool.run({"buildah", "manifest", "inspect", readback});
  if (!inspected) {
    return fail("read-back: " + inspected.error());
  }
  std::vector<IndexEntry> served = index_entries(*inspected);
  std::vector<std::string> wrong;
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string platform = images[i].config->platform();
    bool listed = std::any_of(served.begin(), served.end(), [&](const IndexEntry& entry) {
      return same_platform(entry.platform, platform) && entry.digest == push.lane_digests[i];
    });
    if (!listed) {
      wrong.push_back(fmt::format("{} ({} {})", images[i].lane, platform, push.lane_digests[i]));
    }
  }
  if (!wrong.empty()) {
    return fail(
        fmt::format("read-back: {} does not serve the image of lane {}", ref, join(wrong, ", ")));
  }
  if (served.size() != images.size()) {
    return fail(fmt::format("read-back: {} serves {} images for {} lanes", ref, served.size(),
                            images.size()));
  }
  remove_lists();
  push.ok = true;
  return push;
}

} // namespace kiln
