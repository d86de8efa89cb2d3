#include "driver/image_gates.h"

#include <algorithm>

#include <fmt/format.h>

#include "dockerfile/parents.h"
#include "dockerfile/source.h"
#include "driver/build_request.h"
#include "gates/image_env.h"
#include "gates/layer_scan.h"
#include "util/diagnostic.h"
#include "util/strings.h"

namespace kiln {

GateRecord ImageGates::grade(const std::string& subject, const ImageEnv& env) const {
  GateRecord record;
  record.subject = subject;
  if (!env) {
    // An image whose config cannot be read cannot be shown clean: refuse, never wave through.
    record.verdict = "unreadable";
    record.reason = env.error();
    return record;
  }
  for (const auto& finding : grade_env(parse_env_list(*env), m_chain.gates.host_env_names)) {
    record.findings.push_back(finding.message);
  }
  record.verdict = record.findings.empty() ? "pass" : "refused";
  return record;
}

std::vector<GateRecord> ImageGates::grade_parents(const Stage& stage, const BuildRequest& request) {
  std::vector<GateRecord> records;
  if (!stage.dockerfile_source) {
    // The chain loader parses every stage's Dockerfile: only a stage made by hand has none.
    GateRecord record;
    record.subject = "parents of " + stage.dockerfile.string();
    record.verdict = "unreadable";
    record.reason = "the Dockerfile was not loaded with the chain";
    return {record};
  }
  std::map<std::string, std::string> args(request.build_args.begin(), request.build_args.end());
  for (const auto& parent : parent_images(stage.dockerfile_source->parsed, args)) {
    auto context =
        std::find_if(request.contexts.begin(), request.contexts.end(),
                     [&](const NamedContext& c) { return lower(c.name) == lower(parent.ref); });
    std::string subject;
    if (context != request.contexts.end()) {
      // The stage it needs under that name, in its own lane.
      std::string need = context->name;
      for (const auto& each : stage.needs) {
        if (const Stage* needed = m_chain.find_stage(each);
            needed != nullptr && needed->known_as() == context->name) {
          need = each;
        }
      }
      if (std::find(m_built_by_run.begin(), m_built_by_run.end(), need) != m_built_by_run.end()) {
        continue;
      }
      subject = fmt::format("parent {} ({}, from an earlier run)", context->name,
                            m_engine.stage_image_place(*context));
    } else {
      subject = "parent " + parent.ref;
    }
    {
      std::lock_guard lock(m_mutex);
      if (auto seen = m_graded.find(subject); seen != m_graded.end()) {
        records.push_back(seen->second);
        continue;
      }
    }
    GateRecord record;
    if (context != request.contexts.end()) {
      record = grade(subject, image_env(m_engine.stage_image_config(*context)));
    } else if (auto env = m_engine.external_image_env(parent.ref)) {
      record = grade(subject, *env);
    } else {
      record.subject = subject;
      record.verdict = "not-graded";
      record.reason = fmt::format("{} resolves {} inside its daemon, where kiln cannot read it "
                                  "before the build; the final image's gate grades what it "
                                  "passes on",
                                  m_engine.name(), parent.ref);
    }
    {
      std::lock_guard lock(m_mutex);
      m_graded[subject] = record;
    }
    records.push_back(record);
  }
  return records;
}

bool ImageGates::graded_after_build(const Stage& stage) const {
  return stage.gate_image_env || stage.known_as() == m_chain.gates.final_stage;
}

GateRecord ImageGates::grade_built(const Stage& stage) {
  // A graded image is built to its local place first and pushed only once it passed.
  NamedContext context = stage_context(m_chain, stage);
  context.pushed.clear();
  return grade(fmt::format("image of stage {}", stage.name),
               image_env(m_engine.stage_image_config(context)));
}

bool ImageGates::layers_read_after_build(const Stage& stage) const {
  return graded_after_build(stage) || !stage.artifacts.empty() || stage.max_layers > 0;
}

std::vector<GateRecord> ImageGates::grade_layers(const Stage& stage,
                                                 const std::filesystem::path& scratch) {
  const bool residue = graded_after_build(stage);
  const bool artifacts = !stage.artifacts.empty() || stage.max_layers > 0;
  std::string subject = fmt::format("image of stage {}", stage.name);
  auto records = [&](const std::string& verdict, const std::string& reason) {
    std::vector<GateRecord> out;
    for (const char* gate : {"residue", "artifacts"}) {
      if (std::string_view(gate) == "residue" ? residue : artifacts) {
        GateRecord record;
        record.gate = gate;
        record.subject = subject;
        record.verdict = verdict;
        record.reason = reason;
        out.push_back(std::move(record));
      }
    }
    return out;
  };
  NamedContext context = stage_context(m_chain, stage);
  context.pushed.clear(); // read before any push, from where the build left it
  auto layout = m_engine.stage_image_layout(context, scratch);
  if (!layout) {
    return records("unreadable", layout.error());
  }
  ScanOptions options;
  options.residue = residue;
  options.allow = m_chain.gates.residue_allow;
  options.artifacts = stage.artifacts;
  auto scans = scan_layout(layout->path, options, layout->digest);
  if (!scans) {
    return records("unreadable", scans.error());
  }
  std::vector<GateRecord> out = records("pass", "");
  for (GateRecord& record : out) {
    std::vector<std::string> allowed;
    for (const ImageScan& scan : *scans) {
      std::string where = scans->size() > 1 ? scan.platform + ": " : "";
      if (record.gate == "residue") {
        for (const auto& finding : scan.residue) {
          (finding.allowed.empty() ? record.findings : allowed).push_back(residue_message(finding));
        }
        continue;
      }
      for (const auto& missing : scan.missing) {
        record.findings.push_back(fmt::format(
            "{}{} is missing: the stage lists it in `artifacts`, and the image's layers do not "
            "hold it (nor a symlink to it whose target they hold)",
            where, printable(missing)));
      }
      if (stage.max_layers > 0 && scan.layers > static_cast<size_t>(stage.max_layers)) {
        record.findings.push_back(
            fmt::format("{}the image has {} layers, over the stage's max_layers of {}: merge "
                        "RUN steps, or build in a stage and COPY --from its result",
                        where, scan.layers, stage.max_layers));
      }
    }
    record.verdict = record.findings.empty() ? "pass" : "refused";
    if (!allowed.empty()) {
      record.reason = fmt::format("{} allowed by [gates] residue_allow: {}", allowed.size(),
                                  join(allowed, " | "));
    }
  }
  return out;
}

std::vector<std::string> gate_lines(const std::string& stage, const GateRecord& record) {
  std::vector<std::string> lines;
  const bool env = record.gate == "image-env";
  if (record.verdict == "pass") {
    lines.push_back(fmt::format("stage {}: {} gate: {} passes{}", stage, record.gate,
                                record.subject, record.reason.empty() ? "" : "; " + record.reason));
  } else if (record.verdict == "not-graded") {
    lines.push_back(fmt::format("stage {}: {} gate: {} not graded: {}", stage, record.gate,
                                record.subject, record.reason));
  } else if (record.verdict == "unreadable") {
    lines.push_back(fmt::format("stage {}: {} gate refused {}: its {} cannot be read: {}", stage,
                                record.gate, record.subject, env ? "config" : "layers",
                                record.reason));
  } else {
    std::string what = env ? "build-host setting(s) in its Env"
                       : record.gate == "residue"
                           ? "build-host file(s) in its layers"
                           : "finding(s) against its artifacts and max_layers";
    lines.push_back(fmt::format("stage {}: {} gate refused {}: {} {}", stage, record.gate,
                                record.subject, record.findings.size(), what));
    for (const auto& finding : record.findings) {
      lines.push_back("  " + finding);
    }
  }
  return lines;
}

} // namespace kiln
