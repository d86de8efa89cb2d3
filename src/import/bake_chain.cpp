#include "import/bake_chain.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "chain/loader.h"
#include "chain/written_chain.h"
#include "util/strings.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

/// Why kiln has no place for a field of a bake target, by its name in buildx's schema.
std::string_view why_not(std::string_view field) {
  static const std::map<std::string_view, std::string_view> reasons = {
      {"output", "kiln keeps the image in the engine's store; see docs/publish.md"},
      {"ssh", "kiln forwards no SSH agent to a build"},
      {"network", "kiln builds with the engine's default network"},
      {"entitlements", "kiln grants a build no entitlements"},
      {"labels", "kiln labels each image with its chain, stage, lane and pins; see docs/lanes.md"},
      {"annotations", "kiln's published index carries its own; see docs/publish.md"},
      {"attest", "kiln attaches provenance and an SBOM when it publishes; see docs/publish.md"},
      {"pull", "the engine pulls a base image it does not have"},
      {"no-cache-filter", "kiln run --no-cache rebuilds whole stages"},
      {"shm-size", "kiln passes no run options to a build"},
      {"ulimits", "kiln passes no run options to a build"},
      {"extra-hosts", "kiln passes no run options to a build"},
      {"resources", "kiln sizes builds with its job budget; see docs/disk-and-resources.md"},
      {"call", "kiln builds; kiln lint checks Dockerfiles"},
      {"policy", "kiln has no build policies"},
      {"matrix", "kiln's matrix takes lists of strings"},
  };
  auto found = reasons.find(field);
  return found != reasons.end() ? found->second : "not a field kiln knows";
}

/// A comment line of the chain file: one line, nothing a TOML comment may not hold.
std::string comment_text(std::string_view text) {
  std::string shown;
  for (char c : printable(text)) {
    if (c == '\n') {
      shown += "\\n";
    } else {
      shown += c;
    }
  }
  return shown;
}

bool is_bare_key(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

std::string toml_key(std::string_view key) {
  return is_bare_key(key) ? std::string(key) : toml_string(key);
}

std::string toml_strings(const std::vector<std::string>& values) {
  std::vector<std::string> quoted;
  for (const auto& value : values) {
    quoted.push_back(toml_string(value));
  }
  return "[" + join(quoted, ", ") + "]";
}

/// bake writes a literal `${` as `$${` (and `%{` as `%%{`) in the values it templates.
std::string unescaped(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((text.substr(i, 3) == "$${" || text.substr(i, 3) == "%%{")) {
      ++i;
    }
    out += text[i];
  }
  return out;
}

bool is_remote(std::string_view where) {
  return where.find("://") != std::string_view::npos || where.rfind("git@", 0) == 0 ||
         where.rfind("github.com/", 0) == 0;
}

std::string_view without_cwd(std::string_view where) {
  return where.rfind("cwd://", 0) == 0 ? where.substr(6) : where;
}

bool has_template(std::string_view text) {
  return text.find("${") != std::string_view::npos;
}

struct Stage {
  const BakeTarget* target = nullptr;
  std::string name;
  fs::path dockerfile; // absolute
  fs::path context;    // absolute
  std::vector<size_t> needs;
  std::vector<std::string> platforms; // normalised
  std::vector<std::pair<std::string, std::string>> build_args;
  std::vector<std::string> secrets; // inline tables
  std::vector<std::string> cache_from;
  std::vector<std::string> cache_to;
  std::vector<std::pair<std::string, std::vector<std::string>>> matrix;
};

class Importer {
public:
  Importer(const BakeFile& bake, const BakeImport& options) : m_bake(bake), m_options(options) {
    for (size_t i = 0; i < bake.targets.size(); ++i) {
      m_index.emplace(bake.targets[i].key, i);
    }
  }

  tl::expected<ImportedChain, std::string> run() {
    if (auto selected = select(); !selected) {
      return tl::unexpected(selected.error());
    }
    for (const auto& block : m_bake.other_blocks) {
      m_dropped.push_back(fmt::format("{} (kiln does not evaluate bake's {} blocks: import what "
                                      "`docker buildx bake --print` prints)",
                                      block, block));
    }
    for (size_t i = 0; i < m_bake.targets.size(); ++i) {
      if (m_selected.count(i)) {
        add_stage(m_bake.targets[i]);
      }
    }
    name_stages();
    for (auto& stage : m_stages) {
      map_fields(stage);
    }
    auto order = run_order();
    if (!order) {
      return tl::unexpected(order.error());
    }
    return ImportedChain{render(*order), m_dropped};
  }

private:
  void drop(const BakeTarget& target, std::string_view what, std::string_view why) {
    m_dropped.push_back(fmt::format("target {}: {} ({})", target.key, what, why));
  }

  /// The targets of the group, and every target they reach through `target:` contexts.
  tl::expected<void, std::string> select() {
    std::map<std::string, const BakeGroup*> groups;
    for (const auto& group : m_bake.groups) {
      groups[group.name] = &group;
    }
    std::vector<std::string> pending;
    if (groups.count(m_options.group)) {
      pending.push_back(m_options.group);
      m_group_found = true;
    } else if (m_options.group_given) {
      std::vector<std::string> names;
      for (const auto& [name, group] : groups) {
        names.push_back(name);
      }
      return tl::unexpected(
          fmt::format("the bake file has no group '{}'{}", m_options.group,
                      names.empty() ? std::string() : "; its groups: " + join(names, ", ")));
    } else {
      for (const auto& target : m_bake.targets) {
        pending.push_back(target.key);
      }
    }
    std::set<std::string> seen_groups;
    while (!pending.empty()) {
      std::string name = std::move(pending.back());
      pending.pop_back();
      if (auto target = m_index.find(name); target != m_index.end()) {
        if (!m_selected.insert(target->second).second) {
          continue;
        }
        for (const auto& [key, where] : m_bake.targets[target->second].contexts) {
          if (where.rfind("target:", 0) == 0 && m_index.count(where.substr(7))) {
            pending.push_back(where.substr(7));
          }
        }
      } else if (auto group = groups.find(name); group != groups.end()) {
        if (seen_groups.insert(name).second) {
          pending.insert(pending.end(), group->second->targets.begin(),
                         group->second->targets.end());
        }
      } else {
        return tl::unexpected(
            fmt::format("a group names '{}', which is neither a target nor a group", name));
      }
    }
    return {};
  }

  void add_stage(const BakeTarget& target) {
    if (target.dockerfile_inline) {
      drop(target, "dockerfile-inline",
           "kiln builds from a Dockerfile on disk: write it to a file and name it in dockerfile; "
           "the target is not imported");
      return;
    }
    std::string context(without_cwd(target.context.value_or(".")));
    if (is_remote(context)) {
      drop(target, fmt::format("context {}", context),
           "kiln builds from a local folder; the target is not imported");
      return;
    }
    Stage stage;
    stage.target = &target;
    fs::path base = m_options.bake_file.parent_path();
    stage.context = (base / context).lexically_normal();
    std::string dockerfile = target.dockerfile.value_or("Dockerfile");
    // bake reads a relative Dockerfile from the context (a cwd:// one from its own folder);
    // kiln from the chain file's folder.
    stage.dockerfile = dockerfile.rfind("cwd://", 0) == 0
                           ? (base / without_cwd(dockerfile)).lexically_normal()
                           : (stage.context / dockerfile).lexically_normal();
    m_stage_of.emplace(target.key, m_stages.size());
    m_stages.push_back(std::move(stage));
  }

  /// Each stage is named after its target, unless every stage that builds on it knows it
  /// by another context name: kiln hands a needed stage to a build under the stage's name, so
  /// the stage takes that name and `FROM <context name>` still finds it.
  void name_stages() {
    std::map<size_t, std::set<std::string>> known_as;
    for (const auto& stage : m_stages) {
      for (const auto& [key, where] : stage.target->contexts) {
        if (auto need = needed_stage(where)) {
          known_as[*need].insert(key);
        }
      }
    }
    std::set<std::string> taken;
    for (size_t i = 0; i < m_stages.size(); ++i) {
      Stage& stage = m_stages[i];
      const BakeTarget& target = *stage.target;
      std::string name = as_stage_name(target.name);
      if (auto keys = known_as.find(i);
          keys != known_as.end() && keys->second.size() == 1 &&
          chain_loading::is_lower_name(*keys->second.begin(), false)) {
        name = *keys->second.begin();
      }
      if (!target.matrix.empty() && !has_template(target.name)) {
        // Each copy of a matrix stage needs a name of its own.
        for (const auto& [variable, values] : target.matrix) {
          name += "-${" + variable + "}";
        }
      }
      std::string unique = name;
      for (int n = 2; taken.count(unique); ++n) {
        unique = fmt::format("{}-{}", name, n);
      }
      taken.insert(unique);
      stage.name = unique;
    }
  }

  std::optional<size_t> needed_stage(std::string_view where) const {
    if (where.rfind("target:", 0) != 0) {
      return std::nullopt;
    }
    auto found = m_stage_of.find(std::string(where.substr(7)));
    return found != m_stage_of.end() ? std::optional(found->second) : std::nullopt;
  }

  void map_fields(Stage& stage) {
    const BakeTarget& target = *stage.target;
    for (const auto& [key, where] : target.contexts) {
      if (auto need = needed_stage(where)) {
        stage.needs.push_back(*need);
        if (m_stages[*need].name != key) {
          drop(target,
               fmt::format("context {} = {} is handed over as '{}'", key, where,
                           m_stages[*need].name),
               fmt::format("kiln gives a needed stage to a build under the stage's name, and "
                           "other stages know this one by other names: write FROM {} for {}",
                           m_stages[*need].name, key));
        }
      } else if (where.rfind("target:", 0) == 0) {
        drop(target, fmt::format("context {} = {}", key, where),
             "that target is not imported, so no stage builds it");
      } else {
        drop(target, fmt::format("context {} = {}", key, where),
             "kiln gives a build only the images of the stages it needs");
      }
    }
    std::optional<std::vector<std::string>> declared;
    if (m_options.declared_args && !has_template(stage.dockerfile.string())) {
      declared = m_options.declared_args(stage.dockerfile);
    }
    for (const auto& [name, value] : target.args) {
      if (!value) {
        drop(target, fmt::format("args.{} = null", name),
             "kiln passes no value, so the Dockerfile's default applies");
      } else if (declared &&
                 std::find(declared->begin(), declared->end(), name) == declared->end()) {
        drop(target, fmt::format("args.{}", name),
             "the Dockerfile declares no such ARG, and kiln refuses a build arg a build ignores");
      } else {
        stage.build_args.emplace_back(name, unescaped(*value));
      }
    }
    if (target.tags.size() > 1) {
      drop(target, "tags " + join({target.tags.begin() + 1, target.tags.end()}, " "),
           "a stage has one tag: kiln tags the first");
    }
    for (const auto& platform : target.platforms) {
      auto normal = chain_loading::normalize_platform(platform);
      if (!normal) {
        drop(target, "platform " + platform, normal.error());
      } else if (std::find(stage.platforms.begin(), stage.platforms.end(), *normal) ==
                 stage.platforms.end()) {
        stage.platforms.push_back(*normal);
      }
    }
    for (const auto& secret : target.secrets) {
      std::string shown = "secret id=" + secret.id;
      if (!chain_loading::is_secret_id(secret.id)) {
        drop(target, shown, "kiln's secret ids are letters, digits, '_', '.' and '-'");
      } else if (!secret.env.empty() && is_identifier(secret.env)) {
        stage.secrets.push_back(fmt::format("{{ id = {}, env = {} }}", toml_string(secret.id),
                                            toml_string(secret.env)));
      } else if (!secret.src.empty() && secret.env.empty()) {
        fs::path src = (m_options.bake_file.parent_path() / secret.src).lexically_normal();
        if (m_options.is_file && m_options.is_file(src)) {
          stage.secrets.push_back(fmt::format("{{ id = {}, file = {} }}", toml_string(secret.id),
                                              toml_string(chain_path(src))));
        } else {
          drop(target, shown + ",src=" + secret.src,
               "no such file here, and kiln checks a secret's file when it loads the chain");
        }
      } else {
        drop(target, shown, "kiln passes a secret from an environment variable or a file");
      }
    }
    for (const auto& spec : target.cache_from) {
      std::string written =
          spec.find('=') == std::string::npos ? "type=registry,ref=" + spec : spec;
      if (cache_type(written) == "registry") {
        stage.cache_from.push_back(written);
      } else {
        drop(target, "cache-from " + spec,
             "a stage imports type=registry caches; kiln keeps the local tier itself");
      }
    }
    for (const auto& spec : target.cache_to) {
      std::string type = cache_type(spec);
      if (type == "registry" || type == "inline") {
        stage.cache_to.push_back(spec);
      } else {
        drop(target, "cache-to " + spec,
             "a stage exports type=registry or type=inline caches; kiln keeps the local tier "
             "itself");
      }
    }
    if (target.no_cache) {
      drop(target, "no-cache", "kiln run --no-cache rebuilds every stage");
    }
    for (const auto& field : target.other) {
      drop(target, field.shown.empty() ? field.key : field.key + " " + field.shown,
           why_not(field.key));
    }
    stage.matrix = target.matrix;
  }

  static std::string cache_type(std::string_view spec) {
    for (const auto& field : split(spec, ',')) {
      if (field.rfind("type=", 0) == 0) {
        return field.substr(5);
      }
    }
    return {};
  }

  /// `path` as the chain file names it: relative to the chain's folder.
  std::string chain_path(const fs::path& path) const {
    fs::path relative = path.lexically_relative(m_options.chain_dir.lexically_normal());
    return relative.empty() ? path.generic_string() : relative.generic_string();
  }

  /// Stages after the stages they need, otherwise in file order.
  tl::expected<std::vector<size_t>, std::string> run_order() const {
    std::vector<size_t> order;
    std::vector<bool> placed(m_stages.size(), false);
    while (order.size() < m_stages.size()) {
      bool progress = false;
      for (size_t i = 0; i < m_stages.size(); ++i) {
        if (placed[i]) {
          continue;
        }
        const auto& needs = m_stages[i].needs;
        if (std::all_of(needs.begin(), needs.end(), [&](size_t need) { return placed[need]; })) {
          placed[i] = true;
          order.push_back(i);
          progress = true;
          break;
        }
      }
      if (!progress) {
        std::vector<std::string> left;
        for (size_t i = 0; i < m_stages.size(); ++i) {
          if (!placed[i]) {
            left.push_back(m_stages[i].target->key);
          }
        }
        return tl::unexpected(fmt::format("targets {} build on each other through target: "
                                          "contexts, so none can be built first",
                                          join(left, ", ")));
      }
    }
    return order;
  }

  static std::string lane_name(const std::string& platform) {
    std::vector<std::string> parts = split(platform, '/');
    std::string name = parts.size() > 1 ? parts[1] : platform;
    if (parts.size() > 2) {
      name += "-" + parts[2];
    }
    if (parts[0] != "linux") {
      name = parts[0] + "-" + name;
    }
    return as_stage_name(name);
  }

  std::string render(const std::vector<size_t>& order) const {
    std::string out = fmt::format(
        "# Imported by `kiln import bake` from {} ({}); docs/import-bake.md says what maps to "
        "what.\n",
        comment_text(m_options.bake_file.filename().string()),
        !m_group_found ? std::string("every target")
                       : comment_text(fmt::format("group \"{}\"", m_options.group)));
    if (!m_dropped.empty()) {
      out += "#\n# Could not carry over:\n";
      for (const auto& line : m_dropped) {
        out += "#   " + comment_text(line) + "\n";
      }
    }
    bool caches = std::any_of(m_stages.begin(), m_stages.end(), [](const Stage& stage) {
      return !stage.cache_from.empty() || !stage.cache_to.empty();
    });
    out += fmt::format("\n[chain]\nname = {}\n", toml_string(m_options.chain_name));
    if (caches) {
      out += "# Stages import or export registry caches, which only BuildKit has.\n"
             "engine = \"buildkit\"\n";
    }
    std::vector<std::string> platforms;
    for (size_t i : order) {
      for (const auto& platform : m_stages[i].platforms) {
        if (std::find(platforms.begin(), platforms.end(), platform) == platforms.end()) {
          platforms.push_back(platform);
        }
      }
    }
    std::set<std::string> all_platforms(platforms.begin(), platforms.end());
    for (const auto& platform : platforms) {
      out += fmt::format("\n[[lane]]\nname = {}\nplatform = {}\n", toml_string(lane_name(platform)),
                         toml_string(platform));
    }
    for (size_t i : order) {
      const Stage& stage = m_stages[i];
      const BakeTarget& target = *stage.target;
      out += "\n[[stage]]\n";
      if (stage.name != target.name || !target.description.empty()) {
        out += "# bake target " + comment_text(target.key) +
               (target.description.empty() ? "" : ": " + comment_text(target.description)) + "\n";
      }
      out += fmt::format("name = {}\ndockerfile = {}\n", toml_string(stage.name),
                         toml_string(chain_path(stage.dockerfile)));
      if (std::string context = chain_path(stage.context); context != "." && context != "./") {
        out += fmt::format("context = {}\n", toml_string(context));
      }
      if (target.target) {
        out += fmt::format("target = {}\n", toml_string(*target.target));
      }
      if (!target.tags.empty()) {
        out += fmt::format("tag = {}\n", toml_string(target.tags.front()));
      }
      if (!stage.needs.empty()) {
        std::vector<std::string> needs;
        for (size_t need : stage.needs) {
          if (std::find(needs.begin(), needs.end(), m_stages[need].name) == needs.end()) {
            needs.push_back(m_stages[need].name);
          }
        }
        out += fmt::format("needs = {}\n", toml_strings(needs));
      }
      std::set<std::string> own(stage.platforms.begin(), stage.platforms.end());
      if (!own.empty() && own != all_platforms) {
        std::vector<std::string> lanes;
        for (const auto& platform : stage.platforms) {
          lanes.push_back(lane_name(platform));
        }
        out += fmt::format("lanes = {}\n", toml_strings(lanes));
      }
      if (!stage.matrix.empty()) {
        std::vector<std::string> variables;
        for (const auto& [name, values] : stage.matrix) {
          variables.push_back(toml_key(name) + " = " + toml_strings(values));
        }
        out += "matrix = { " + join(variables, ", ") + " }\n";
      }
      if (!stage.build_args.empty()) {
        std::vector<std::string> args;
        for (const auto& [name, value] : stage.build_args) {
          args.push_back(toml_key(name) + " = " + toml_string(value));
        }
        out += "build_args = { " + join(args, ", ") + " }\n";
      }
      if (!stage.secrets.empty()) {
        out += "secrets = [" + join(stage.secrets, ", ") + "]\n";
      }
      if (!stage.cache_from.empty()) {
        out += "cache_from = " + toml_strings(stage.cache_from) + "\n";
      }
      if (!stage.cache_to.empty()) {
        out += "cache_to = " + toml_strings(stage.cache_to) + "\n";
      }
    }
    return out;
  }

  const BakeFile& m_bake;
  const BakeImport& m_options;
  std::map<std::string, size_t> m_index; // target key -> index in m_bake.targets
  std::set<size_t> m_selected;
  bool m_group_found = false; // the targets are the group's, not every target of the file
  std::vector<Stage> m_stages;
  std::map<std::string, size_t> m_stage_of; // target key -> index in m_stages
  std::vector<std::string> m_dropped;
};

} // namespace

tl::expected<ImportedChain, std::string> bake_to_chain(const BakeFile& bake,
                                                       const BakeImport& options) {
  return Importer(bake, options).run();
}

} // namespace kiln
