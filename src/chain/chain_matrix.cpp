// Matrix stages: a [[stage]] table with `matrix = { lib = ["zlib", "png"] }` is read as one
// stage per combination of the values, `${lib}` replaced in every string of the table, as
// `docker buildx bake` expands a target's matrix. Each copy keeps the table's source positions,
// so whatever is wrong with one is reported at the line of the table it came from.
#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "chain/loader.h"
#include "util/strings.h"

namespace kiln::chain_loading {

namespace {

/// `text` with each `${name}` of a variable in `binding` replaced; any other `${...}` stays.
std::string substitute(std::string_view text, const MatrixBinding& binding) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 2, "${") == 0) {
      size_t close = text.find('}', i + 2);
      if (close != std::string_view::npos) {
        std::string_view name = text.substr(i + 2, close - i - 2);
        auto value = std::find_if(binding.begin(), binding.end(),
                                  [&](const auto& each) { return each.first == name; });
        if (value != binding.end()) {
          out += value->second;
          i = close + 1;
          continue;
        }
      }
    }
    out += text[i++];
  }
  return out;
}

} // namespace

void substitute_matrix(toml::node& node, const toml::node& written, const MatrixBinding& binding) {
  if (auto* text = node.as_string()) {
    text->get() = substitute(written.as_string()->get(), binding);
  } else if (auto* table = node.as_table()) {
    for (auto&& [key, value] : *table) {
      substitute_matrix(value, *written.as_table()->get(key), binding);
    }
  } else if (auto* array = node.as_array()) {
    for (size_t i = 0; i < array->size(); ++i) {
      substitute_matrix(*array->get(i), *written.as_array()->get(i), binding);
    }
  }
}

std::vector<MatrixBinding> Loader::matrix_bindings(const toml::table& stage) {
  const toml::node* node = stage.get("matrix");
  if (node == nullptr) {
    return {MatrixBinding()};
  }
  const std::string_view example = "write matrix = { lib = [\"zlib\", \"png\"] } and use ${lib}";
  const auto* matrix = node->as_table();
  if (matrix == nullptr || matrix->empty()) {
    error(pos(*node),
          fmt::format("'matrix' in [[stage]] must be a table of variables, not {}",
                      matrix ? "an empty table" : type_name(*node)),
          std::string(example));
    return {};
  }
  // toml++ keeps keys sorted; the variables vary in the order they are written, the last the
  // fastest, so the stages come out in the order a reader expects.
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (auto&& [key, value] : *matrix) {
    entries.emplace_back(&key, &value);
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.first->source().begin < b.first->source().begin;
  });
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  size_t combinations = 1;
  bool valid = true;
  for (const auto& [key, value] : entries) {
    const std::string name(key->str());
    if (!is_identifier(name)) {
      error(pos(key->source().begin), fmt::format("matrix variable '{}' is not valid", name),
            std::string(k_identifier_rule));
      valid = false;
    }
    const auto* array = value->as_array();
    if (array == nullptr || array->empty()) {
      error(pos(*value),
            fmt::format("matrix variable '{}' must be an array of values, not {}", name,
                        array ? "an empty array" : type_name(*value)),
            std::string(example));
      valid = false;
      continue;
    }
    std::vector<std::string> values;
    for (const auto& element : *array) {
      std::string text;
      if (const auto* string = element.as_string()) {
        text = string->get();
      } else if (const auto* integer = element.as_integer()) {
        text = std::to_string(integer->get());
      }
      if (text.empty()) {
        error(pos(element),
              fmt::format("each value of matrix variable '{}' must be a string or an integer, "
                          "not {}",
                          name, element.is_string() ? "an empty string" : type_name(element)),
              "write it in quotes");
        valid = false;
      } else if (std::find(values.begin(), values.end(), text) != values.end()) {
        error(pos(element),
              fmt::format("matrix variable '{}' holds '{}' twice, which would make two stages "
                          "alike",
                          name, text),
              "remove one");
        valid = false;
      } else {
        values.push_back(std::move(text));
      }
    }
    combinations *= std::max<size_t>(values.size(), 1);
    axes.emplace_back(name, std::move(values));
  }
  if (valid && combinations > k_max_matrix_stages) {
    error(pos(*node),
          fmt::format("the matrix makes {} stages, more than the {} allowed", combinations,
                      k_max_matrix_stages),
          "split it into several stages");
    valid = false;
  }
  if (!valid) {
    return {};
  }
  std::vector<MatrixBinding> out;
  std::set<std::string> names;
  const auto* name = stage.get_as<std::string>("name");
  for (size_t n = 0; n < combinations; ++n) {
    MatrixBinding binding(axes.size());
    size_t rest = n;
    for (size_t a = axes.size(); a-- > 0;) {
      const auto& values = axes[a].second;
      binding[a] = {axes[a].first, values[rest % values.size()]};
      rest /= values.size();
    }
    // bake's rule: every combination names a target of its own.
    if (name != nullptr && !names.insert(substitute(name->get(), binding)).second) {
      std::vector<std::string> uses;
      for (const auto& axis : axes) {
        uses.push_back("${" + axis.first + "}");
      }
      error(pos(*name),
            fmt::format("the matrix names two stages '{}': the name must differ for each "
                        "combination",
                        substitute(name->get(), binding)),
            fmt::format("use the matrix's variables in the name, e.g. name = \"{}-{}\"",
                        name->get(), join(uses, "-")));
      return {};
    }
    out.push_back(std::move(binding));
  }
  return out;
}

} // namespace kiln::chain_loading
