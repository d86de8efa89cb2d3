#include "dockerfile_shapes.h"

#include <fmt/format.h>

namespace kiln::testing {

namespace {

std::string private_address(int i) {
  return fmt::format("10.{}.{}.{}", i / 62500, i / 250 % 250, i % 250 + 1);
}

} // namespace

std::string flag_on_every_continuation_line(int n) {
  std::string text = "FROM scratch\nRUN \\\n";
  for (int i = 0; i < n; ++i) {
    text += "  --a=b \\\n";
  }
  return text + "  true\n";
}

std::string arg_lines(int n) {
  std::string text = "FROM scratch\n";
  for (int i = 0; i < n; ++i) {
    text += fmt::format("ARG A{}\n", i);
  }
  return text + fmt::format("RUN echo $A1\nFROM scratch AS second\nRUN echo $A{}\n", n - 1);
}

std::string out_of_scope_references(int n) {
  std::string args = "FROM scratch\nARG";
  std::string run = "FROM scratch\nRUN echo";
  for (int i = 0; i < n; ++i) {
    args += fmt::format(" V{}", i);
    run += fmt::format(" $V{}", i);
  }
  return args + "\n" + run + "\n";
}

std::string references_in_one_env_value(int n) {
  std::string text = "FROM scratch\nENV X=";
  for (int i = 0; i < n; ++i) {
    text += fmt::format("$N{}", i);
  }
  return text + "\n";
}

std::string private_address_variables(int n) {
  std::string text = "FROM scratch\nENV";
  for (int i = 0; i < n; ++i) {
    text += fmt::format(" A{}=http://{}/", i, private_address(i));
  }
  return text + "\n";
}

std::string addresses_in_one_value(int n) {
  std::string text = "FROM scratch\nENV A=";
  for (int i = 0; i < n; ++i) {
    text += (i == 0 ? "" : ",") + private_address(i);
  }
  return text + "\n";
}

std::string near_miss_references(int n) {
  std::string args = "FROM scratch\nARG";
  std::string copy = "COPY";
  for (int i = 0; i < n; ++i) {
    args += fmt::format(" NAME{}X=1", i);
    copy += fmt::format(" $NAME{}Y", i);
  }
  return args + "\n" + copy + " /dst/\n";
}

} // namespace kiln::testing
