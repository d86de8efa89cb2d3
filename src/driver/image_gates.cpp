#include "driver/image_gates.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "dockerfile/parents.h"
#include "dockerfile/source.h"
#include "driver/build_request.h"
#include "gates/image_env.h"
#include "util/diagnostic.h"
#include "util/strings.h"

namespace kiln {

bool graded_after_build(const Chain& chain, const Stage& stage) {
  return stage.gate_image_env || stage.known_as() == chain.gates.final_stage;
}

bool layers_read_after_build(const Chain& chain, const Stage& stage) {
  return graded_after_build(chain, stage) || !stage.artifacts.empty() || stage.max_layers > 0;
}

std::vector<std::pair<std::string, std::string>> history_build_args(std::string_view line) {
  std::vector<std::pair<std::string, std::string>> args;
  line = trim(line);
  if (line.starts_with("RUN ")) {
    line.remove_prefix(4);
  }
  if (!line.starts_with("|")) {
    return args;
  }
  line.remove_prefix(1);
  size_t count = 0;
  auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), count);
  if (ec != std::errc() || count == 0 || count > 1000) {
    return args;
  }
  line.remove_prefix(static_cast<size_t>(end - line.data()));
  // The engines write `NAME=value` words unquoted, one per argument, before the command.
  for (size_t i = 0; i < count; ++i) {
    line = trim(line);
    size_t space = line.find(' ');
    std::string_view word = line.substr(0, space);
    size_t eq = word.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      break;
    }
    args.emplace_back(std::string(word.substr(0, eq)), std::string(word.substr(eq + 1)));
    line = space == std::string_view::npos ? std::string_view() : line.substr(space);
  }
  return args;
}

std::optional<std::string> inherited_run_command(const Dockerfile& df, const std::string& target) {
  struct Built {
    std::string name; // lower case
    std::string base;
    bool sets_command = false;
  };
  std::vector<Built> stages;
  for (const auto& ins : df.instructions) {
    if (keyword_is(ins, "from")) {
      Built stage;
      stage.base = ins.args.empty() ? std::string() : ins.args[0];
      if (ins.args.size() >= 3) {
        stage.name = lower(ins.args[2]);
      }
      stages.push_back(std::move(stage));
    } else if (!stages.empty() && (keyword_is(ins, "cmd") || keyword_is(ins, "entrypoint"))) {
      stages.back().sets_command = true;
    }
  }
  if (stages.empty()) {
    return std::nullopt;
  }
  const Built* at = &stages.back();
  if (!target.empty()) {
    auto found = std::find_if(stages.begin(), stages.end(),
                              [&](const Built& s) { return s.name == lower(target); });
    if (found == stages.end()) {
      return std::nullopt;
    }
    at = &*found;
  }
  // Up the FROMs that name earlier stages of the file, to the image from outside it.
  for (size_t hops = 0; hops <= stages.size(); ++hops) {
    if (at->sets_command) {
      return std::nullopt;
    }
    auto parent = std::find_if(stages.begin(), stages.end(), [&](const Built& s) {
      return !s.name.empty() && s.name == lower(at->base) && &s < at;
    });
    if (parent == stages.end()) {
      return at->base;
    }
    at = &*parent;
  }
  return std::nullopt;
}

GateRecord ImageGates::grade(const std::string& subject, const ImageEnv& env) const {
  GateRecord record;
  record.subject = subject;
  if (!env) {
    // An image whose config cannot be read cannot be shown clean; the run says it could not
    // check it, it never waves it through.
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

GateRecord ImageGates::grade_built(const Stage& stage, const NamedContext& image) {
  ImageConfigRead config = m_engine.stage_image_config(image);
  GateRecord record = grade(fmt::format("image of stage {}", stage.name), image_env(config));
  if (!config) {
    return record;
  }
  // A build arg a RUN used is spelled out in the history the image ships: an address or a
  // secret passed that way is published as surely as an ENV.
  for (size_t i = 0; i < config->history.size(); ++i) {
    auto args = history_build_args(config->history[i]);
    for (const auto& finding : grade_env(args, {})) {
      if (finding.rule == "leak-address" || finding.rule == "leak-secret") {
        record.findings.push_back(
            fmt::format("history entry {} (a RUN's build args, shipped in the image's config): "
                        "{}; pass it as a build secret (RUN --mount=type=secret), which leaves "
                        "no trace in the history",
                        i + 1, finding.message));
      }
    }
  }
  record.verdict = record.findings.empty() ? "pass" : "refused";
  const bool has_command = !config->cmd.empty() || !config->entrypoint.empty();
  if (stage.known_as() == m_chain.gates.final_stage && has_command && stage.dockerfile_source) {
    if (auto from = inherited_run_command(stage.dockerfile_source->parsed, stage.target)) {
      record.warnings.push_back(fmt::format(
          "the image's {} ({}) is inherited from {}, not set by {}: a consumer who runs the "
          "image starts what its parent runs (a build tool's shell or compiler); set CMD or "
          "ENTRYPOINT in its Dockerfile",
          config->entrypoint.empty() ? "Cmd" : "Entrypoint",
          printable(join(config->entrypoint.empty() ? config->cmd : config->entrypoint, " ")),
          *from, stage.dockerfile.filename().string()));
    }
  }
  return record;
}

ScanOptions ImageGates::scan_options(const Stage& stage) const {
  ScanOptions options;
  options.residue = graded_after_build(m_chain, stage);
  options.allow = m_chain.gates.residue_allow;
  options.artifacts = stage.artifacts;
  options.arch = options.residue;
  options.arch_allow = m_chain.gates.arch_allow;
  // Only an image that can be published carries an SBOM: the final stage's.
  options.sbom = stage.known_as() == m_chain.gates.final_stage;
  return options;
}

std::optional<std::vector<ImageScan>> ImageGates::scans_of(const std::string& identity) const {
  std::lock_guard lock(m_mutex);
  auto found = m_scanned.find(identity);
  if (found == m_scanned.end()) {
    return std::nullopt;
  }
  return found->second;
}

std::vector<GateRecord> ImageGates::grade_layers(const Stage& stage, const NamedContext& image,
                                                 const std::string& identity) {
  const ScanOptions options = scan_options(stage);
  const bool artifacts = !stage.artifacts.empty() || stage.max_layers > 0;
  std::vector<const char*> gates;
  if (options.residue) {
    gates = {"residue", "arch"};
  }
  if (artifacts) {
    gates.push_back("artifacts");
  }
  std::string subject = fmt::format("image of stage {}", stage.name);
  auto records = [&](const std::string& verdict, const std::string& reason) {
    std::vector<GateRecord> out;
    for (const char* gate : gates) {
      GateRecord record;
      record.gate = gate;
      record.subject = subject;
      record.verdict = verdict;
      record.reason = reason;
      out.push_back(std::move(record));
    }
    return out;
  };
  const std::string key = ScanCache::key(identity, options);
  std::optional<std::vector<ImageScan>> scans = m_scans.find(key);
  const bool remembered = scans.has_value();
  if (!scans) {
    auto images = m_engine.stage_images(image);
    if (!images) {
      return records("unreadable", images.error());
    }
    scans.emplace();
    for (const auto& each : *images) {
      auto scan = scan_image(each, options);
      if (!scan) {
        return records("unreadable", scan.error());
      }
      if (images->size() > 1) {
        for (auto& finding : scan->residue) {
          finding.platform = scan->platform;
        }
      }
      scans->push_back(std::move(*scan));
    }
    m_scans.keep(key, *scans);
  }
  {
    std::lock_guard lock(m_mutex);
    m_scanned[identity] = *scans;
  }
  std::vector<GateRecord> out = records("pass", "");
  for (GateRecord& record : out) {
    record.remembered = remembered;
    std::vector<std::string> allowed;
    for (const ImageScan& scan : *scans) {
      std::string where = scans->size() > 1 ? scan.platform + ": " : "";
      if (record.gate == "residue") {
        for (const auto& finding : scan.residue) {
          (finding.allowed.empty() ? record.findings : allowed).push_back(residue_message(finding));
        }
      } else if (record.gate == "arch") {
        if (!scan.arch_judged) {
          record.warnings.push_back(
              fmt::format("{}kiln does not know what the ELF files of {} look like: not judged",
                          where, scan.platform.empty() ? "(no platform)" : scan.platform));
        }
        for (const auto& binary : scan.foreign) {
          std::string message = fmt::format("{}{}: {}, added in layer {} of {}, in a {} image",
                                            where, printable(binary.path), binary.description,
                                            binary.layer, scan.layers, scan.platform);
          if (binary.allowed.empty()) {
            record.findings.push_back(message +
                                      "; build it for the lane's platform, or allow it in "
                                      "[gates] arch_allow with a reason");
          } else {
            allowed.push_back(message + " (allowed: " + binary.allowed + ")");
          }
        }
      } else {
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
    }
    record.verdict = record.findings.empty() ? "pass" : "refused";
    if (!allowed.empty()) {
      record.reason =
          fmt::format("{} allowed by [gates] {}: {}", allowed.size(),
                      record.gate == std::string("arch") ? "arch_allow" : "residue_allow",
                      join(allowed, " | "));
    }
  }
  return out;
}

std::vector<std::string> gate_lines(const std::string& stage, const GateRecord& record) {
  std::vector<std::string> lines;
  const bool env = record.gate == "image-env";
  const std::string remembered =
      record.remembered ? " (the scan of this image an earlier run made)" : "";
  if (record.verdict == "pass") {
    lines.push_back(fmt::format("stage {}: {} gate: {} passes{}{}", stage, record.gate,
                                record.subject, remembered,
                                record.reason.empty() ? "" : "; " + record.reason));
  } else if (record.verdict == "not-graded") {
    lines.push_back(fmt::format("stage {}: {} gate: {} not graded: {}", stage, record.gate,
                                record.subject, record.reason));
  } else if (record.verdict == "unreadable") {
    lines.push_back(fmt::format("stage {}: {} gate could not read {}: its {} cannot be read: {}",
                                stage, record.gate, record.subject, env ? "config" : "layers",
                                record.reason));
  } else {
    std::string what = env                        ? "build-host setting(s) in its config"
                       : record.gate == "residue" ? "build-host file(s) in its layers"
                       : record.gate == "arch"    ? "ELF file(s) of another platform"
                                               : "finding(s) against its artifacts and max_layers";
    lines.push_back(fmt::format("stage {}: {} gate refused {}{}: {} {}", stage, record.gate,
                                record.subject, remembered, record.findings.size(), what));
    for (const auto& finding : record.findings) {
      lines.push_back("  " + finding);
    }
  }
  for (const auto& warning : record.warnings) {
    lines.push_back(fmt::format("stage {}: {} gate: warning: {}", stage, record.gate, warning));
  }
  return lines;
}

} // namespace kiln
