// The arch gate's readers on any bytes. The whole input is a file's head as the layer scan reads
// it; its first line is also a platform, and what follows that line a second head to judge on
// it, so an input can carry both halves of a verdict (`linux/s390x\n\x7fELF...`).
#include <string>

#include "fuzz_bundle.h"
#include "fuzz_check.h"
#include "gates/elf_arch.h"

namespace {

void check_ident(const kiln::ElfIdent& ident) {
  FUZZ_CHECK(ident.bits == 32 || ident.bits == 64);
  std::string description = kiln::elf_description(ident);
  FUZZ_CHECK(description.starts_with(ident.bits == 32 ? "ELF 32-bit " : "ELF 64-bit "));
  FUZZ_CHECK(kiln::elf_matches(ident, ident));
}

std::optional<kiln::ElfIdent> read_checked(std::string_view head) {
  auto ident = kiln::read_elf_ident(head);
  if (head.size() < kiln::k_elf_head_bytes || !head.starts_with("\177ELF")) {
    FUZZ_CHECK(!ident.has_value());
  }
  if (ident) {
    check_ident(*ident);
    // Only the first k_elf_head_bytes count: the scan may read more or exactly that many.
    auto prefix = kiln::read_elf_ident(head.substr(0, kiln::k_elf_head_bytes));
    FUZZ_CHECK(prefix && prefix->bits == ident->bits &&
               prefix->little_endian == ident->little_endian && prefix->machine == ident->machine);
  }
  return ident;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  std::string_view input = fuzz::as_text(data, size);
  auto whole = read_checked(input);
  std::size_t newline = input.find('\n');
  std::string_view line = input.substr(0, newline);
  std::string_view rest = newline == std::string_view::npos ? "" : input.substr(newline + 1);
  auto file = read_checked(rest);
  auto platform = platform_elf(line);
  if (platform) {
    check_ident(*platform);
    for (const auto& ident : {whole, file}) {
      if (ident) {
        (void)elf_matches(*ident, *platform);
        if (ident->machine == 247) {
          FUZZ_CHECK(elf_matches(*ident, *platform)); // eBPF runs on every machine
        }
      }
    }
  }
  return 0;
}
