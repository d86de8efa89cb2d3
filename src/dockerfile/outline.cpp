#include "dockerfile/outline.h"

namespace kiln {
namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

nlohmann::json words(const std::vector<std::string>& args) {
  auto out = nlohmann::json::array();
  for (const auto& arg : args) {
    std::size_t i = 0;
    while (i < arg.size()) {
      while (i < arg.size() && is_blank(arg[i])) {
        ++i;
      }
      std::size_t begin = i;
      while (i < arg.size() && !is_blank(arg[i])) {
        ++i;
      }
      if (i > begin) {
        out.push_back(arg.substr(begin, i - begin));
      }
    }
  }
  return out;
}

nlohmann::json instruction_outline(const Instruction& ins) {
  nlohmann::json out;
  out["keyword"] = ins.keyword;
  out["start"] = ins.start.line;
  out["end"] = ins.end.line;
  auto flags = nlohmann::json::array();
  for (const auto& flag : ins.flags) {
    flags.push_back(flag.name + "=" + flag.value);
  }
  out["flags"] = std::move(flags);
  auto args = nlohmann::json::array();
  if (ins.keyword == "env" || ins.keyword == "label" || ins.keyword == "arg") {
    out["form"] = "pairs";
    for (std::size_t i = 0; i + 1 < ins.args.size(); i += 2) {
      args.push_back(ins.args[i]);
      bool has_value = ins.keyword != "arg" || ins.arg_has_value.at(i / 2);
      args.push_back(has_value ? nlohmann::json(ins.args[i + 1]) : nlohmann::json());
    }
  } else if (ins.json_form) {
    out["form"] = "json";
    for (const auto& arg : ins.args) {
      args.push_back(arg);
    }
  } else {
    out["form"] = "words";
    args = words(ins.args);
  }
  out["args"] = std::move(args);
  auto heredocs = nlohmann::json::array();
  for (const auto& heredoc : ins.heredocs) {
    heredocs.push_back(heredoc.name);
  }
  out["heredocs"] = std::move(heredocs);
  return out;
}

} // namespace

nlohmann::json outline_json(const tl::expected<Dockerfile, ParseError>& parsed) {
  nlohmann::json out;
  auto instructions = nlohmann::json::array();
  if (!parsed) {
    out["escape"] = nullptr;
    out["error"] = {{"line", parsed.error().pos.line}, {"message", parsed.error().message}};
  } else {
    out["escape"] = std::string(1, parsed->escape);
    out["error"] = nullptr;
    for (const auto& ins : parsed->instructions) {
      instructions.push_back(instruction_outline(ins));
    }
  }
  out["instructions"] = std::move(instructions);
  return out;
}

nlohmann::json outline_dockerfile(std::string_view text) {
  return outline_json(parse_dockerfile(text));
}

} // namespace kiln
