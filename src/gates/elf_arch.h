#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

/// The rules of the arch gate: every ELF file in a published image must be built for the
/// image's platform, so a linux/s390x image holding x86-64 binaries, or an arm64 image with one
/// stray x86-64 tool, is refused. The layer scan reads each regular file's first bytes and asks
/// these; nothing here reads a file.

/// What an ELF file's identification and header say about the machine it runs on.
struct ElfIdent {
  int bits = 0;              // 32 or 64 (EI_CLASS)
  bool little_endian = true; // EI_DATA
  std::uint16_t machine = 0; // e_machine, read in the file's own byte order
};

/// How many leading bytes of a file read_elf_ident needs: e_machine ends at byte 20.
constexpr std::size_t k_elf_head_bytes = 20;

/// The ident of an ELF file from its first bytes; nullopt when they are not an ELF header (too
/// short, wrong magic, an EI_CLASS or EI_DATA value that is neither 1 nor 2).
std::optional<ElfIdent> read_elf_ident(std::string_view head);

/// What the ELF files of an OCI platform (`os/arch[/variant]`, as in an image config or a lane:
/// linux/amd64, linux/arm64/v8, linux/arm/v7, linux/s390x, linux/loong64 ...) look like; nullopt
/// for an arch kiln does not know (the gate then says it could not judge) or an OS whose
/// binaries are not ELF (windows, darwin, plan9). Any variant is taken: arm's v6 and v7 or
/// amd64's v3 are instruction-set levels an ELF header does not record.
std::optional<ElfIdent> platform_elf(std::string_view platform);

/// Whether a file's ident is at home on a platform: the same machine, bits and byte order.
/// eBPF objects (EM_BPF) are loaded into the kernel of any machine, so they always match.
/// x32 (an x86-64 machine in a 32-bit class) does not match amd64: its programs need the
/// kernel's x32 syscall ABI, which most distribution kernels leave off (Debian's needs
/// `syscall.x32=y` at boot), so on an amd64 host they do not start.
bool elf_matches(const ElfIdent& file, const ElfIdent& platform);

/// A reader's name for an ident, mostly in `file`'s words: "ELF 64-bit LSB x86-64",
/// "ELF 32-bit LSB ARM", "ELF 64-bit MSB IBM S/390", an unknown machine as its number
/// ("ELF 64-bit LSB machine 4660").
std::string elf_description(const ElfIdent& ident);

} // namespace kiln
