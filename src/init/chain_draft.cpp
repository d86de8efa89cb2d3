// kiln init's proposal: which Dockerfiles make which stages, in what order, with which pins.
// It reads the Dockerfiles as the chain loader will (the same parser and the same references),
// so the chain it writes loads with the needs this draft ordered it by.
#include "init/chain_draft.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "chain/versions.h"
#include "chain/written_chain.h"
#include "dockerfile/external_refs.h"
#include "dockerfile/source.h"
#include "dockerfile/stage_names.h"
#include "util/strings.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

bool is_dockerfile_name(const std::string& name) {
  for (const char* base : {"Dockerfile", "Containerfile"}) {
    if (name == base || (name.starts_with(std::string(base) + ".") &&
                         !name.ends_with(".dockerignore") && !name.ends_with(".md"))) {
      return true;
    }
  }
  return name.ends_with(".Dockerfile") || name.ends_with(".dockerfile") ||
         name.ends_with(".Containerfile");
}

/// What a file's name says of its stage: `base` for `base.Dockerfile` or `Dockerfile.base`,
/// "" for a plain `Dockerfile` (its folder names it).
std::string name_in_file(const std::string& file) {
  for (const char* base : {"Dockerfile", "Containerfile"}) {
    if (file == base) {
      return "";
    }
    if (file.starts_with(std::string(base) + ".")) {
      return file.substr(std::string(base).size() + 1);
    }
  }
  return file.substr(0, file.rfind('.'));
}

/// A pin's name: what a versions file holds, not a flag or a path.
bool is_version_like(const std::string& name) {
  for (const char* end : {"VERSION", "RELEASE", "_REV", "_COMMIT", "_SHA", "_TAG", "_DIGEST"}) {
    if (name.ends_with(end)) {
      return true;
    }
  }
  return false;
}

struct Found {
  DraftStage stage;
  std::shared_ptr<const DockerfileSource> source;
};

} // namespace

tl::expected<ChainDraft, std::string> draft_chain(const fs::path& dir,
                                                  const DraftOptions& options) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    return tl::unexpected(fmt::format("{} is not a folder", dir.string()));
  }
  ChainDraft draft;
  fs::path full = fs::absolute(dir).lexically_normal();
  draft.name = as_stage_name((full.has_filename() ? full : full.parent_path()).filename().string());

  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(dir, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    std::string name = it->path().filename().string();
    if (it->is_directory(error)) {
      // A hidden folder is a tool's (.git); a records folder holds kiln's runs.
      if (name.starts_with(".") || fs::exists(it->path() / "runs") ||
          fs::exists(it->path() / "kiln.lock")) {
        it.disable_recursion_pending();
      }
    } else if (is_dockerfile_name(name) && it->is_regular_file(error)) {
      files.push_back(fs::relative(it->path(), dir));
    }
  }
  if (error) {
    return tl::unexpected(fmt::format("cannot read {}: {}", dir.string(), error.message()));
  }
  if (files.empty()) {
    return tl::unexpected(fmt::format(
        "no Dockerfile under {} (looked for Dockerfile, Containerfile, *.Dockerfile and "
        "Dockerfile.*)",
        dir.string()));
  }
  std::sort(files.begin(), files.end());

  KeyValues pinned;
  if (fs::exists(dir / "versions.env")) {
    auto versions = load_versions(dir / "versions.env");
    if (!versions) {
      return tl::unexpected(fmt::format("{} does not load: {}", (dir / "versions.env").string(),
                                        versions.error().front().message));
    }
    pinned = *versions;
    draft.versions_kept = true;
  }
  auto is_pinned = [&](const std::string& name) {
    return std::any_of(pinned.begin(), pinned.end(),
                       [&](const auto& p) { return p.first == name; });
  };

  std::vector<Found> found;
  std::set<std::string> taken;
  for (const auto& file : files) {
    auto source = load_dockerfile(dir / file);
    if (!source) {
      return tl::unexpected(fmt::format("{}:{}: {}", (dir / file).string(), source.error().pos.line,
                                        source.error().message));
    }
    std::string from_file = name_in_file(file.filename().string());
    bool plain = from_file.empty();
    std::string base_name = as_stage_name(
        plain ? (file.has_parent_path() ? file.parent_path().filename().string() : draft.name)
              : from_file);
    std::vector<std::string> targets = {""};
    if (options.per_target) {
      if (auto named = named_stages((*source)->parsed); named.size() > 1) {
        targets = named;
      }
    }
    for (const auto& target : targets) {
      Found each;
      each.source = *source;
      each.stage.dockerfile = file;
      each.stage.context = plain ? file.parent_path() : fs::path();
      each.stage.target = target;
      std::string name = target.empty() ? base_name : as_stage_name(target);
      // Two files of one name in two folders: the folder tells them apart.
      if (taken.count(name) && file.has_parent_path()) {
        name = as_stage_name(file.parent_path().filename().string() + "-" + name);
      }
      for (int n = 2; taken.count(name); ++n) {
        name = fmt::format("{}-{}", name, n);
      }
      taken.insert(name);
      each.stage.name = name;
      each.stage.smoke =
          name.find("smoke") != std::string::npos || name.find("test") != std::string::npos;
      found.push_back(std::move(each));
    }
  }

  // Pins: version-like ARGs with the default their Dockerfile gives; the rest each stage is
  // left to set.
  std::map<std::string, size_t> pin_index;
  for (auto& each : found) {
    std::set<std::string> seen;
    const Dockerfile& df = each.source->parsed;
    std::map<std::string, std::string> defaults; // as a later default reads them
    for (const auto& ins : df.instructions) {
      if (!keyword_is(ins, "arg")) {
        continue;
      }
      for (size_t i = 0; i + 1 < ins.args.size(); i += 2) {
        const std::string& name = ins.args[i];
        bool has_default = arg_sets_value(ins, i);
        std::string value;
        if (has_default) {
          value = expand_words(ins.args[i + 1], defaults, df.escape).value;
          defaults[name] = value;
        }
        if (!seen.insert(name).second || is_pinned(name)) {
          continue;
        }
        if (is_version_like(name) && !draft.versions_kept) {
          auto known = pin_index.find(name);
          if (known == pin_index.end()) {
            pin_index.emplace(name, draft.pins.size());
            draft.pins.push_back(
                {name, has_default ? value : "",
                 fmt::format("{}:{}", each.stage.dockerfile.string(), ins.start.line)});
          } else if (draft.pins[known->second].value.empty() && has_default) {
            draft.pins[known->second].value = value;
          }
        } else if (!has_default) {
          each.stage.unset_args.push_back(name);
        }
      }
    }
  }

  // Needs: the stages each Dockerfile names, then an order where each comes after them (the
  // files' order among those free to go).
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < found.size(); ++i) {
    by_name.emplace(found[i].stage.name, i);
  }
  std::map<std::string, std::string> args;
  for (const auto& pin : draft.pins) {
    args[pin.name] = pin.value;
  }
  for (const auto& [name, value] : pinned) {
    args[name] = value;
  }
  std::vector<std::vector<size_t>> needs(found.size());
  for (size_t i = 0; i < found.size(); ++i) {
    for (const auto& ref : external_refs(found[i].source->parsed, found[i].stage.target, args)) {
      auto need = by_name.find(lower(ref.ref));
      if (need != by_name.end() && need->second != i &&
          std::find(needs[i].begin(), needs[i].end(), need->second) == needs[i].end()) {
        needs[i].push_back(need->second);
        found[i].stage.needs.push_back(need->first);
      }
    }
  }
  std::vector<bool> placed(found.size(), false);
  while (draft.stages.size() < found.size()) {
    size_t next = found.size();
    for (size_t i = 0; i < found.size() && next == found.size(); ++i) {
      if (!placed[i] && std::all_of(needs[i].begin(), needs[i].end(),
                                    [&](size_t need) { return placed[need]; })) {
        next = i;
      }
    }
    if (next == found.size()) {
      // A cycle: the rest in file order, for the loader to report where it closes.
      next = static_cast<size_t>(std::find(placed.begin(), placed.end(), false) - placed.begin());
    }
    placed[next] = true;
    draft.stages.push_back(std::move(found[next].stage));
  }
  return draft;
}

std::string render_chain(const ChainDraft& draft) {
  std::string out = fmt::format(
      "# The chain of the Dockerfiles in this folder, as `kiln init` proposed it. Every key is\n"
      "# described in docs/chain-file.md; docs/tutorial.md walks from here to a published image.\n"
      "#   kiln lint --chain chain.toml        check the chain and its Dockerfiles\n"
      "#   kiln run chain.toml --dry-run       the plan: each stage's build command, in order\n"
      "#   kiln run chain.toml                 build it\n"
      "\n"
      "[chain]\n"
      "name = {}\n"
      "engine = \"buildah\"  # or \"buildkit\" (docs/buildkit.md)\n",
      toml_string(draft.name));
  if (draft.versions_kept || !draft.pins.empty()) {
    out += "# The pins: each stage receives those its Dockerfile declares with ARG.\n"
           "versions = \"versions.env\"\n";
  }
  out += "records = \"records\"  # where each run's logs and manifest go (docs/records.md)\n";
  for (const auto& stage : draft.stages) {
    out += "\n[[stage]]\n";
    out += fmt::format("name = {}\n", toml_string(stage.name));
    if (stage.smoke) {
      out += "# A test run of the image it needs: its output must report passed tests\n"
             "# (docs/chain-file.md#smoke-stages).\n"
             "kind = \"smoke\"\n";
    }
    out += fmt::format("dockerfile = {}\n", toml_string(stage.dockerfile.string()));
    if (!stage.context.empty()) {
      out += fmt::format("context = {}\n", toml_string(stage.context.string()));
    }
    if (!stage.target.empty()) {
      out += fmt::format("target = {}\n", toml_string(stage.target));
    }
    if (!stage.needs.empty()) {
      out += fmt::format("# Needs {}: its Dockerfile names {}, so kiln builds {} first.\n",
                         join(stage.needs, ", "), stage.needs.size() == 1 ? "it" : "them",
                         stage.needs.size() == 1 ? "it" : "them");
    }
    if (!stage.unset_args.empty()) {
      std::vector<std::string> pairs;
      for (const auto& name : stage.unset_args) {
        pairs.push_back(name + " = \"\"");
      }
      out += fmt::format("# Its Dockerfile declares {} with no default; set {} here if the build "
                         "needs {}:\n# build_args = {{ {} }}\n",
                         join(stage.unset_args, ", "), stage.unset_args.size() == 1 ? "it" : "them",
                         stage.unset_args.size() == 1 ? "it" : "them", join(pairs, ", "));
    }
  }
  return out;
}

std::string render_versions(const ChainDraft& draft) {
  std::string out =
      "# The pins of the chain, one KEY=VALUE a line: a stage receives those its Dockerfile\n"
      "# declares with ARG, and changing one rebuilds exactly those stages.\n";
  for (const auto& pin : draft.pins) {
    if (pin.value.empty()) {
      out +=
          fmt::format("# {}=    declared at {} with no default: set it\n", pin.name, pin.declared);
    } else {
      out += fmt::format("{}={}\n", pin.name, pin.value);
    }
  }
  return out;
}

} // namespace kiln
