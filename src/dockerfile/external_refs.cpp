#include "dockerfile/external_refs.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "dockerfile/mounts.h"
#include "util/strings.h"

namespace kiln {
namespace {

bool is_index(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// Per stage of the file: the stages it builds on, and what it reads from outside.
struct StageLinks {
  std::map<std::string, size_t> named; // the first stage of each name
  std::vector<std::vector<size_t>> builds_on;
  std::vector<std::vector<ExternalRef>> reads;
};

StageLinks stage_links(const Dockerfile& df, const std::vector<StageScope>& scopes) {
  StageLinks links;
  auto& named = links.named;
  auto& builds_on = links.builds_on;
  auto& reads = links.reads;
  for (const auto& scope : scopes) {
    if (!scope.name.empty()) {
      named.emplace(scope.name, static_cast<size_t>(scope.index));
    }
  }
  builds_on.resize(scopes.size());
  reads.resize(scopes.size());
  std::optional<size_t> stage;
  for (const auto& ins : df.instructions) {
    if (keyword_is(ins, "from")) {
      stage = stage ? *stage + 1 : 0;
      const std::string& base = scopes[*stage].base;
      // FROM finds only an earlier stage; a later stage's name names an image.
      if (auto own = named.find(lower(base)); own != named.end() && own->second < *stage) {
        builds_on[*stage].push_back(own->second);
      } else if (!base.empty() && lower(base) != "scratch" && base.find('$') == std::string::npos) {
        reads[*stage].push_back(
            {base, "FROM " + ins.args[0], ins.arg_pos.empty() ? ins.start : ins.arg_pos[0]});
      }
      continue;
    }
    if (!stage) {
      continue;
    }
    for (const auto& flag : ins.flags) {
      std::optional<std::string_view> from;
      std::string written;
      if (keyword_is(ins, "copy") && flag.name == "from") {
        from = flag.value;
        written = "COPY --from=" + flag.value;
      } else if (keyword_is(ins, "run") && flag.name == "mount") {
        from = mount_option(flag.value, {"from"});
        written = "RUN --mount=" + flag.value;
      }
      if (!from || from->empty() || from->find('$') != std::string_view::npos) {
        continue;
      }
      std::string name = lower(*from);
      if (is_index(name)) {
        // A number is a stage's index in BuildKit and buildah alike.
        size_t index = 0;
        auto parsed = std::from_chars(name.data(), name.data() + name.size(), index);
        if (parsed.ec == std::errc() && index < scopes.size()) {
          builds_on[*stage].push_back(index);
        }
      } else if (auto own = named.find(name); own != named.end()) {
        builds_on[*stage].push_back(own->second);
      } else if (name != "scratch") {
        reads[*stage].push_back({std::string(*from), std::move(written), flag.pos});
      }
    }
  }

  return links;
}

std::vector<bool> built_from(const StageLinks& links, size_t count, std::string_view target) {
  std::vector<bool> built(count, false);
  std::vector<size_t> todo;
  if (target.empty()) {
    if (count > 0) {
      todo.push_back(count - 1);
    }
  } else if (auto own = links.named.find(lower(target)); own != links.named.end()) {
    todo.push_back(own->second);
  } else {
    // Such a target fails the build anyway; checking every stage misses nothing meanwhile.
    built.assign(count, true);
  }
  while (!todo.empty()) {
    size_t next = todo.back();
    todo.pop_back();
    if (!built[next]) {
      built[next] = true;
      todo.insert(todo.end(), links.builds_on[next].begin(), links.builds_on[next].end());
    }
  }
  return built;
}

} // namespace

std::vector<bool> stages_built(const Dockerfile& df, std::string_view target,
                               const std::vector<StageScope>& scopes) {
  return built_from(stage_links(df, scopes), scopes.size(), target);
}

std::vector<ExternalRef> external_refs(const Dockerfile& df, std::string_view target,
                                       const std::map<std::string, std::string>& build_args) {
  std::vector<StageScope> scopes = stage_scopes(df, build_args);
  StageLinks links = stage_links(df, scopes);
  std::vector<bool> built = built_from(links, scopes.size(), target);
  std::vector<ExternalRef> refs;
  for (size_t i = 0; i < scopes.size(); ++i) {
    if (built[i]) {
      refs.insert(refs.end(), links.reads[i].begin(), links.reads[i].end());
    }
  }
  return refs;
}

} // namespace kiln
