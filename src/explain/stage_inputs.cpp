#include "explain/stage_inputs.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <re2/re2.h>

#include "chain/plan.h"
#include "dockerfile/external_refs.h"
#include "dockerfile/mounts.h"
#include "dockerfile/references.h"
#include "dockerfile/source.h"
#include "driver/shown_command.h"
#include "explain/context_files.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/strings.h"

namespace kiln {

using json = nlohmann::json;

namespace {

/// The names in `in_scope` that `text` refers to as `$NAME` or `${NAME...`.
std::vector<std::string> named_in(const std::string& text,
                                  const std::vector<std::string>& in_scope) {
  std::vector<std::string_view> referred = referenced_names(text);
  std::vector<std::string> named;
  for (const auto& name : in_scope) {
    if (std::find(referred.begin(), referred.end(), name) != referred.end()) {
      named.push_back(name);
    }
  }
  return named;
}

bool is_remote_source(std::string_view source) {
  return source.starts_with("http://") || source.starts_with("https://") ||
         source.starts_with("git@") || source.starts_with("git://");
}

/// A RUN that fetches from the network: what it gets can change while its text does not.
std::string network_fetch(const std::string& script) {
  static const RE2 fetch(R"((?:^|[\s;&|(])(curl|wget|git\s+clone|git\s+fetch)\s)");
  std::string tool;
  if (RE2::PartialMatch(script, fetch, &tool)) {
    return "network fetch (" + tool + ")";
  }
  return {};
}

void add_unique(std::vector<std::string>& list, std::string item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) {
    list.push_back(std::move(item));
  }
}

} // namespace

StageInputs collect_inputs(const Chain& chain, const Stage& stage, const BuildRequest& request,
                           const InputSources& sources) {
  StageInputs in;
  in.stage = stage.name;
  in.lane = stage.lane;
  in.dockerfile = std::filesystem::relative(stage.dockerfile, chain.dir).generic_string();
  in.bypass = sources.no_cache ? "--no-cache" : stage.kind == StageKind::smoke ? "smoke" : "";
  std::map<std::string, std::string> build_args;
  std::vector<std::pair<std::string, std::string>> secrets; // value -> what is shown instead
  for (const auto& [name, value] : request.build_args) {
    build_args[name] = value;
    ArgInput arg{{}, {}, build_arg_source(chain, stage, sources.overrides, name)};
    if (is_secret_build_arg(name, value)) {
      arg.hashed = hmac_sha256_hex(sources.secret_key, value);
      secrets.emplace_back(value, "<secret " + arg.hashed.substr(0, 12) + ">");
    } else {
      arg.value = value;
    }
    in.args[name] = std::move(arg);
  }
  auto hide_secrets = [&](std::string text) {
    for (const auto& [value, shown] : secrets) {
      for (size_t at = text.find(value); at != std::string::npos; at = text.find(value, at)) {
        text.replace(at, value.size(), shown);
        at += shown.size();
      }
    }
    return text;
  };
  std::set<std::string>
      handed; // the chain stages the build is handed, as its Dockerfile names them
  for (const auto& context : request.contexts) {
    handed.insert(lower(context.name));
  }
  auto parent_of = [&](std::string_view name) -> std::optional<std::string> {
    std::string key = lower(name);
    if (handed.count(key) == 0) {
      return std::nullopt;
    }
    for (const auto& context : request.contexts) {
      if (lower(context.name) == key) {
        return context.name;
      }
    }
    return std::nullopt;
  };

  const Dockerfile& df = stage.dockerfile_source->parsed;
  std::vector<StageScope> scopes = stage_scopes(df, build_args);
  std::vector<bool> built = stages_built(df, stage.target, scopes);
  std::optional<DockerIgnore> ignore;
  if (auto text = read_dockerignore(stage.dockerfile, stage.context)) {
    ignore = DockerIgnore::parse(*text);
  }
  std::set<std::string> own_stages;
  for (const auto& scope : scopes) {
    if (!scope.name.empty()) {
      own_stages.insert(scope.name);
    }
  }

  int index = -1;
  std::map<std::string, std::string> vars;
  std::vector<std::string> in_scope;
  for (const auto& ins : df.instructions) {
    if (keyword_is(ins, "from")) {
      ++index;
      vars.clear();
      in_scope.clear();
    }
    if (index < 0 || static_cast<size_t>(index) >= built.size() || !built[index]) {
      continue; // global ARGs reach the build through FROM's expansion; unbuilt stages never
    }
    StepInput step;
    step.line = ins.start.line;
    step.text = ins.original;
    for (const auto& heredoc : ins.heredocs) {
      step.text += "\n" + heredoc.content;
    }
    step.text = hide_secrets(step.text);
    if (keyword_is(ins, "from")) {
      const std::string& base = scopes[index].base;
      if (auto parent = parent_of(base)) {
        step.parents[*parent] = sources.identity(*parent);
      } else if (!base.empty() && lower(base) != "scratch" && own_stages.count(lower(base)) == 0) {
        step.base = base;
        in.bases[base] = "";
      }
      step.expanded = hide_secrets("FROM " + base);
    } else if (keyword_is(ins, "run")) {
      step.expanded = step.text;
      step.args = in_scope;
      for (const auto& flag : ins.flags) {
        if (flag.name != "mount") {
          continue;
        }
        std::string type(mount_option(flag.value, {"type"}).value_or("bind"));
        if (auto from = mount_option(flag.value, {"from"}); from && !from->empty()) {
          if (auto parent = parent_of(*from)) {
            step.parents[*parent] = sources.identity(*parent);
          }
        }
        if (type == "secret") {
          add_unique(step.unhashed,
                     "secret " + std::string(mount_option(flag.value, {"id"}).value_or("")));
        } else if (type == "cache") {
          auto id = mount_option(flag.value, {"id"});
          auto target = mount_option(flag.value, {"target", "dst", "destination"});
          add_unique(step.unhashed,
                     "cache mount " + std::string(id && !id->empty() ? *id : target.value_or("")));
        } else if (type == "ssh") {
          add_unique(step.unhashed, "ssh agent");
        }
      }
      if (std::string fetch = network_fetch(step.text); !fetch.empty()) {
        add_unique(step.unhashed, fetch);
      }
    } else {
      step.expanded = hide_secrets(expand_words(ins.original, vars, df.escape).value);
      step.args = named_in(ins.original, in_scope);
      if (keyword_is(ins, "arg")) {
        for (size_t i = 0; i + 1 < ins.args.size(); i += 2) {
          const std::string& name = ins.args[i];
          if (auto given = build_args.find(name); given != build_args.end()) {
            vars[name] = given->second;
          } else if (arg_sets_value(ins, i)) {
            vars[name] = expand_words(ins.args[i + 1], vars, df.escape).value;
          }
          add_unique(in_scope, name);
        }
      } else if (keyword_is(ins, "env")) {
        for (size_t i = 0; i + 1 < ins.args.size(); i += 2) {
          vars[ins.args[i]] = expand_words(ins.args[i + 1], vars, df.escape).value;
        }
      } else if (keyword_is(ins, "copy") || keyword_is(ins, "add")) {
        std::optional<std::string> from;
        for (const auto& flag : ins.flags) {
          if (flag.name == "from") {
            from = flag.value;
          }
        }
        if (from) {
          if (auto parent = parent_of(expand_words(*from, vars, df.escape).value)) {
            step.parents[*parent] = sources.identity(*parent);
          }
        } else {
          std::vector<std::string> words =
              ins.json_form ? ins.args : split_blank(ins.args.empty() ? "" : ins.args[0]);
          for (size_t w = 0; w + 1 < words.size(); ++w) {
            std::string source = expand_words(words[w], vars, df.escape).value;
            if (source.starts_with("<<")) {
              continue; // a heredoc: its content is in the text
            }
            if (keyword_is(ins, "add") && is_remote_source(source)) {
              add_unique(step.unhashed, "network fetch " + source);
              continue;
            }
            for (const auto& file :
                 selected_files(stage.context, source, ignore ? &*ignore : nullptr)) {
              std::filesystem::path path = stage.context / file;
              std::error_code ec;
              if (std::filesystem::is_symlink(path, ec)) {
                step.files[file] = "link:" + std::filesystem::read_symlink(path, ec).string();
              } else if (auto hash = sources.hashes.hash(path)) {
                step.files[file] = *hash;
              } else {
                step.files[file] = "unreadable: " + hash.error();
              }
            }
          }
        }
      }
    }
    in.steps.push_back(std::move(step));
  }
  return in;
}

json to_json(const StageInputs& in) {
  json args = json::object();
  for (const auto& [name, arg] : in.args) {
    json a = {{"source", arg.source}};
    if (arg.hashed.empty()) {
      a["value"] = arg.value;
    } else {
      a["hmac"] = arg.hashed;
    }
    args[name] = std::move(a);
  }
  json steps = json::array();
  for (const auto& s : in.steps) {
    json step = {{"line", s.line}, {"text", s.text}};
    if (s.expanded != s.text) {
      step["expanded"] = s.expanded;
    }
    auto put = [&](const char* key, const auto& value) {
      if (!value.empty()) {
        step[key] = value;
      }
    };
    put("args", s.args);
    put("files", s.files);
    put("parents", s.parents);
    put("base", s.base);
    put("unhashed", s.unhashed);
    steps.push_back(std::move(step));
  }
  return {{"schema", 1},
          {"run", in.run_id},
          {"stage", in.stage},
          {"lane", in.lane},
          {"engine", in.engine},
          {"worker", in.worker},
          {"dockerfile", in.dockerfile},
          {"bypass", in.bypass},
          {"args", std::move(args)},
          {"bases", in.bases},
          {"steps", std::move(steps)},
          {"image", in.image},
          {"ended", in.ended}};
}

tl::expected<StageInputs, std::string> inputs_from_json(const json& j) {
  try {
    if (!j.is_object() || j.value("schema", 0) != 1) {
      return tl::make_unexpected("not a stage inputs record of schema 1");
    }
    StageInputs in;
    in.run_id = j.value("run", "");
    in.stage = j.at("stage").get<std::string>();
    in.lane = j.value("lane", "");
    in.engine = j.value("engine", "");
    in.worker = j.value("worker", "");
    in.dockerfile = j.value("dockerfile", "");
    in.bypass = j.value("bypass", "");
    in.image = j.value("image", "");
    in.ended = j.value("ended", "");
    for (const auto& [name, a] : j.at("args").items()) {
      in.args[name] = {a.value("value", ""), a.value("hmac", ""), a.value("source", "")};
    }
    in.bases = j.value("bases", std::map<std::string, std::string>{});
    for (const auto& s : j.at("steps")) {
      StepInput step;
      step.line = s.at("line").get<int>();
      step.text = s.at("text").get<std::string>();
      step.expanded = s.value("expanded", step.text);
      step.args = s.value("args", std::vector<std::string>{});
      step.files = s.value("files", std::map<std::string, std::string>{});
      step.parents = s.value("parents", std::map<std::string, std::string>{});
      step.base = s.value("base", "");
      step.unhashed = s.value("unhashed", std::vector<std::string>{});
      in.steps.push_back(std::move(step));
    }
    return in;
  } catch (const json::exception& e) {
    return tl::make_unexpected(std::string(e.what()));
  }
}

tl::expected<std::string, std::string> records_secret_key(const std::filesystem::path& records) {
  const std::filesystem::path file = records / "explain-key";
  if (auto key = read_file(file, 4096); key && key->size() >= 32) {
    return std::string(trim_space(*key));
  }
  std::ifstream random("/dev/urandom", std::ios::binary);
  std::string bytes(32, '\0');
  if (!random.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    return tl::make_unexpected("cannot read /dev/urandom for the key of " + file.string());
  }
  std::string key;
  for (unsigned char c : bytes) {
    key += fmt::format("{:02x}", c);
  }
  auto written = write_file_atomic(file, key + "\n");
  if (!written) {
    return tl::make_unexpected(written.error());
  }
  ::chmod(file.c_str(), 0600);
  return key;
}

std::filesystem::path inputs_file(const std::filesystem::path& folder, const std::string& stage) {
  std::string name = stage;
  std::replace(name.begin(), name.end(), '/', '~');
  return folder / "inputs" / (name + ".json");
}

tl::expected<std::optional<StageInputs>, std::string>
read_inputs(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    return std::optional<StageInputs>{};
  }
  auto text = read_file(file, 256 << 20);
  if (!text) {
    return tl::make_unexpected(text.error());
  }
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded()) {
    return tl::make_unexpected(file.string() + ": not JSON");
  }
  auto in = inputs_from_json(j);
  if (!in) {
    return tl::make_unexpected(file.string() + ": " + in.error());
  }
  return std::optional<StageInputs>(std::move(*in));
}

} // namespace kiln
