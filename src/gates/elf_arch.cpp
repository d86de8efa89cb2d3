#include "gates/elf_arch.h"

#include <algorithm>
#include <array>
#include <vector>

#include <fmt/format.h>

#include "util/strings.h"

namespace kiln {

namespace {

// e_machine values, from the ELF spec's registry as Linux's uapi elf-em.h lists them.
constexpr std::uint16_t k_em_386 = 3;
constexpr std::uint16_t k_em_mips = 8;
constexpr std::uint16_t k_em_ppc64 = 21;
constexpr std::uint16_t k_em_s390 = 22;
constexpr std::uint16_t k_em_arm = 40;
constexpr std::uint16_t k_em_x86_64 = 62;
constexpr std::uint16_t k_em_aarch64 = 183;
constexpr std::uint16_t k_em_riscv = 243;
constexpr std::uint16_t k_em_bpf = 247;
constexpr std::uint16_t k_em_loongarch = 258;

struct Arch {
  std::string_view name;
  ElfIdent ident;
};

// The GOARCH names OCI platforms use. One machine number covers a family, told apart by class
// and byte order: EM_MIPS is every MIPS, big- and little-endian, 32- and 64-bit (Linux's loader
// takes no other), and EM_PPC64 both ppc64 and ppc64le.
constexpr std::array k_arches = {
    Arch{"amd64", {64, true, k_em_x86_64}},      Arch{"386", {32, true, k_em_386}},
    Arch{"arm64", {64, true, k_em_aarch64}},     Arch{"arm", {32, true, k_em_arm}},
    Arch{"ppc64le", {64, true, k_em_ppc64}},     Arch{"ppc64", {64, false, k_em_ppc64}},
    Arch{"s390x", {64, false, k_em_s390}},       Arch{"riscv64", {64, true, k_em_riscv}},
    Arch{"mips64le", {64, true, k_em_mips}},     Arch{"mips64", {64, false, k_em_mips}},
    Arch{"mipsle", {32, true, k_em_mips}},       Arch{"mips", {32, false, k_em_mips}},
    Arch{"loong64", {64, true, k_em_loongarch}},
};

// The GOOS values whose programs are ELF; darwin and ios are Mach-O, windows PE, plan9 a.out,
// aix XCOFF.
constexpr std::array<std::string_view, 8> k_elf_oses = {
    "linux", "android", "freebsd", "netbsd", "openbsd", "dragonfly", "solaris", "illumos"};

struct MachineName {
  std::uint16_t machine;
  std::string_view name;
};

// Beyond the platforms' own machines, those whose files turn up in images: cross toolchains'
// test data, firmware for DSPs and GPUs. Mostly `file`'s words, so a finding reads like its
// output.
constexpr std::array k_machine_names = {
    MachineName{2, "SPARC"},
    MachineName{k_em_386, "Intel 80386"},
    MachineName{4, "Motorola m68k"},
    MachineName{k_em_mips, "MIPS"},
    MachineName{10, "MIPS R3000 LE"},
    MachineName{15, "PA-RISC"},
    MachineName{20, "PowerPC"},
    MachineName{k_em_ppc64, "64-bit PowerPC"},
    MachineName{k_em_s390, "IBM S/390"},
    MachineName{k_em_arm, "ARM"},
    MachineName{42, "Renesas SH"},
    MachineName{43, "SPARC V9"},
    MachineName{50, "IA-64"},
    MachineName{k_em_x86_64, "x86-64"},
    MachineName{94, "Tensilica Xtensa"},
    MachineName{164, "QUALCOMM DSP6"},
    MachineName{k_em_aarch64, "ARM aarch64"},
    MachineName{190, "NVIDIA CUDA"},
    MachineName{224, "AMD GPU"},
    MachineName{k_em_riscv, "RISC-V"},
    MachineName{k_em_bpf, "eBPF"},
    MachineName{252, "C-SKY"},
    MachineName{k_em_loongarch, "LoongArch"},
    MachineName{0x9026, "Alpha"},
};

} // namespace

std::optional<ElfIdent> read_elf_ident(std::string_view head) {
  if (head.size() < k_elf_head_bytes || !head.starts_with("\177ELF")) {
    return std::nullopt;
  }
  auto byte = [&](std::size_t at) { return static_cast<unsigned char>(head[at]); };
  int elf_class = byte(4);
  int data = byte(5);
  if ((elf_class != 1 && elf_class != 2) || (data != 1 && data != 2)) {
    return std::nullopt;
  }
  ElfIdent ident;
  ident.bits = elf_class == 1 ? 32 : 64;
  ident.little_endian = data == 1;
  ident.machine = static_cast<std::uint16_t>(ident.little_endian ? byte(18) | byte(19) << 8
                                                                 : byte(18) << 8 | byte(19));
  return ident;
}

std::optional<ElfIdent> platform_elf(std::string_view platform) {
  // containerd's platforms.Parse lower-cases, so `linux/AMD64` builds as linux/amd64.
  std::vector<std::string> parts = split(lower(platform), '/');
  if (parts.size() < 2 || parts.size() > 3 ||
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
    return std::nullopt;
  }
  if (std::find(k_elf_oses.begin(), k_elf_oses.end(), parts[0]) == k_elf_oses.end()) {
    return std::nullopt;
  }
  for (const Arch& arch : k_arches) {
    if (arch.name == parts[1]) {
      return arch.ident;
    }
  }
  return std::nullopt;
}

bool elf_matches(const ElfIdent& file, const ElfIdent& platform) {
  if (file.machine == k_em_bpf) {
    return true;
  }
  return file.machine == platform.machine && file.bits == platform.bits &&
         file.little_endian == platform.little_endian;
}

std::string elf_description(const ElfIdent& ident) {
  auto known = std::find_if(k_machine_names.begin(), k_machine_names.end(),
                            [&](const MachineName& name) { return name.machine == ident.machine; });
  std::string machine = known != k_machine_names.end() ? std::string(known->name)
                                                       : fmt::format("machine {}", ident.machine);
  return fmt::format("ELF {}-bit {} {}", ident.bits, ident.little_endian ? "LSB" : "MSB", machine);
}

} // namespace kiln
