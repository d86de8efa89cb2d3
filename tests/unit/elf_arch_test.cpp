#include "gates/elf_arch.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path k_heads = fs::path(KILN_TEST_FIXTURES) / "elf";

std::string read_head(const std::string& name) {
  std::ifstream in(k_heads / name, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot open " << (k_heads / name);
    return {};
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool same(const ElfIdent& a, const ElfIdent& b) {
  return a.bits == b.bits && a.little_endian == b.little_endian && a.machine == b.machine;
}

struct PlatformCase {
  const char* platform;
  ElfIdent ident;
};

// What each platform a lane can name looks like, read off the ELF spec and elf-em.h.
const std::vector<PlatformCase> k_platforms = {
    {"linux/amd64", {64, true, 62}},     {"linux/arm64", {64, true, 183}},
    {"linux/arm64/v8", {64, true, 183}}, {"linux/arm/v7", {32, true, 40}},
    {"linux/arm/v6", {32, true, 40}},    {"linux/386", {32, true, 3}},
    {"linux/ppc64le", {64, true, 21}},   {"linux/ppc64", {64, false, 21}},
    {"linux/s390x", {64, false, 22}},    {"linux/riscv64", {64, true, 243}},
    {"linux/mips64le", {64, true, 8}},   {"linux/mips64", {64, false, 8}},
    {"linux/mipsle", {32, true, 8}},     {"linux/mips", {32, false, 8}},
    {"linux/loong64", {64, true, 258}},
};

TEST(PlatformElf, EachPlatformHasItsIdent) {
  for (const auto& c : k_platforms) {
    auto ident = platform_elf(c.platform);
    ASSERT_TRUE(ident.has_value()) << c.platform;
    EXPECT_TRUE(same(*ident, c.ident)) << c.platform << ": " << elf_description(*ident);
  }
}

TEST(PlatformElf, UnknownArchOrOsWithoutElfIsNotJudged) {
  for (const char* platform :
       {"plan9/amd64", "windows/amd64", "darwin/arm64", "linux/sparc64", "linux/wasm", "linux",
        "linux/", "/amd64", "linux//v7", "linux/amd64/v3/x", ""}) {
    EXPECT_FALSE(platform_elf(platform).has_value()) << platform;
  }
}

TEST(PlatformElf, VariantAndOtherElfOsesTakeTheArchsIdent) {
  EXPECT_TRUE(same(platform_elf("linux/amd64/v3").value(), {64, true, 62}));
  EXPECT_TRUE(same(platform_elf("freebsd/arm64").value(), {64, true, 183}));
}

// Lower-cased as containerd's platforms.Parse does; aliases (x86_64, aarch64) are not folded.
TEST(PlatformElf, UpperCaseIsReadAsLowerCase) {
  EXPECT_TRUE(same(platform_elf("linux/AMD64").value(), {64, true, 62}));
  EXPECT_TRUE(same(platform_elf("Linux/ARM64/V8").value(), {64, true, 183}));
  EXPECT_FALSE(platform_elf("linux/x86_64").has_value());
}

struct HeadCase {
  const char* file;
  ElfIdent ident;
  const char* description;
  std::set<std::string> platforms; // of k_platforms, those it is at home on
};

const std::vector<HeadCase> k_heads_cases = {
    {"x86_64-busybox.head", {64, true, 62}, "ELF 64-bit LSB x86-64", {"linux/amd64"}},
    {"i386-libc.head", {32, true, 3}, "ELF 32-bit LSB Intel 80386", {"linux/386"}},
    {"x32-perf-read-vdsox32.head", {32, true, 62}, "ELF 32-bit LSB x86-64", {}},
    {"aarch64.head",
     {64, true, 183},
     "ELF 64-bit LSB ARM aarch64",
     {"linux/arm64", "linux/arm64/v8"}},
    {"arm.head", {32, true, 40}, "ELF 32-bit LSB ARM", {"linux/arm/v7", "linux/arm/v6"}},
    {"ppc64le.head", {64, true, 21}, "ELF 64-bit LSB 64-bit PowerPC", {"linux/ppc64le"}},
    {"ppc64.head", {64, false, 21}, "ELF 64-bit MSB 64-bit PowerPC", {"linux/ppc64"}},
    {"s390x-object.head", {64, false, 22}, "ELF 64-bit MSB IBM S/390", {"linux/s390x"}},
    {"riscv64.head", {64, true, 243}, "ELF 64-bit LSB RISC-V", {"linux/riscv64"}},
    {"mips64el.head", {64, true, 8}, "ELF 64-bit LSB MIPS", {"linux/mips64le"}},
    {"mips64.head", {64, false, 8}, "ELF 64-bit MSB MIPS", {"linux/mips64"}},
    {"mipsel.head", {32, true, 8}, "ELF 32-bit LSB MIPS", {"linux/mipsle"}},
    {"mips.head", {32, false, 8}, "ELF 32-bit MSB MIPS", {"linux/mips"}},
    {"composed/loong64.head", {64, true, 258}, "ELF 64-bit LSB LoongArch", {"linux/loong64"}},
};

// Every head against every platform: at home on its own, refused on all the others.
TEST(ElfArchHeads, EachMatchesItsOwnPlatformsOnly) {
  for (const auto& c : k_heads_cases) {
    auto ident = read_elf_ident(read_head(c.file));
    ASSERT_TRUE(ident.has_value()) << c.file;
    EXPECT_TRUE(same(*ident, c.ident)) << c.file << ": " << elf_description(*ident);
    EXPECT_EQ(elf_description(*ident), c.description) << c.file;
    for (const auto& p : k_platforms) {
      EXPECT_EQ(elf_matches(*ident, *platform_elf(p.platform)), c.platforms.count(p.platform) == 1)
          << c.file << " on " << p.platform;
    }
  }
}

TEST(ElfArchHeads, Aarch64IsRefusedOnAmd64AndAtHomeOnArm64V8) {
  auto aarch64 = read_elf_ident(read_head("aarch64.head"));
  ASSERT_TRUE(aarch64.has_value());
  EXPECT_FALSE(elf_matches(*aarch64, *platform_elf("linux/amd64")));
  EXPECT_TRUE(elf_matches(*aarch64, *platform_elf("linux/arm64/v8")));
}

// e_machine 22 is 0x0016: read little-endian it would be 0x1600, a machine no one has.
TEST(ElfArchHeads, BigEndianS390xReadsItsMachineInItsOwnOrder) {
  std::string head = read_head("s390x-object.head");
  ASSERT_EQ(head.substr(18, 2), std::string("\x00\x16", 2));
  auto ident = read_elf_ident(head);
  ASSERT_TRUE(ident.has_value());
  EXPECT_FALSE(ident->little_endian);
  EXPECT_EQ(ident->machine, 22);
  EXPECT_TRUE(elf_matches(*ident, *platform_elf("linux/s390x")));
  EXPECT_FALSE(elf_matches(*ident, *platform_elf("linux/ppc64")));
}

TEST(ElfArchHeads, EbpfObjectMatchesEveryPlatform) {
  auto bpf = read_elf_ident(read_head("bpf-object.head"));
  ASSERT_TRUE(bpf.has_value());
  EXPECT_EQ(elf_description(*bpf), "ELF 64-bit LSB eBPF");
  for (const auto& p : k_platforms) {
    EXPECT_TRUE(elf_matches(*bpf, *platform_elf(p.platform))) << p.platform;
  }
  // A big-endian eBPF object too: the class and order are the loader's business, not the gate's.
  EXPECT_TRUE(elf_matches({64, false, 247}, *platform_elf("linux/amd64")));
}

TEST(ReadElfIdent, HeaderShorterThanTwentyBytesIsNotElf) {
  std::string head = read_head("x86_64-busybox.head");
  EXPECT_TRUE(read_elf_ident(head.substr(0, k_elf_head_bytes)).has_value());
  EXPECT_FALSE(read_elf_ident(head.substr(0, k_elf_head_bytes - 1)).has_value());
  EXPECT_FALSE(read_elf_ident("").has_value());
  EXPECT_FALSE(read_elf_ident("\177ELF").has_value());
}

TEST(ReadElfIdent, ShellScriptAndPngAreNotElf) {
  for (const char* file : {"not-elf-gunzip-script.head", "not-elf-git-logo-png.head"}) {
    std::string head = read_head(file);
    ASSERT_EQ(head.size(), 64u) << file;
    EXPECT_FALSE(read_elf_ident(head).has_value()) << file;
  }
}

TEST(ReadElfIdent, ClassOrDataOtherThanOneOrTwoIsNotElf) {
  std::string head = read_head("x86_64-busybox.head");
  for (std::size_t at : {4u, 5u}) {
    for (char value : {'\0', '\3', '\xff'}) {
      std::string changed = head;
      changed[at] = value;
      EXPECT_FALSE(read_elf_ident(changed).has_value()) << "byte " << at << " = " << int(value);
    }
  }
}

TEST(ElfMatches, X32IsNotAmd64) {
  auto x32 = read_elf_ident(read_head("x32-perf-read-vdsox32.head"));
  ASSERT_TRUE(x32.has_value());
  EXPECT_FALSE(elf_matches(*x32, *platform_elf("linux/amd64")));
  EXPECT_FALSE(elf_matches(*x32, *platform_elf("linux/386")));
}

TEST(ElfDescription, UnknownMachineIsItsNumber) {
  EXPECT_EQ(elf_description({64, true, 4660}), "ELF 64-bit LSB machine 4660");
  EXPECT_EQ(elf_description({32, false, 0}), "ELF 32-bit MSB machine 0");
}

// The test binary itself, read as the layer scan reads a file: a real header of whatever
// machine this runs on.
TEST(ElfArchHeads, ThisTestBinaryMatchesTheHostPlatform) {
#if defined(__x86_64__) && !defined(__ILP32__)
  const char* host = "linux/amd64";
#elif defined(__aarch64__)
  const char* host = "linux/arm64";
#else
  GTEST_SKIP() << "no host platform named for this machine";
  const char* host = "";
#endif
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::string head(k_elf_head_bytes, '\0');
  ASSERT_TRUE(in.read(head.data(), static_cast<std::streamsize>(head.size())));
  auto ident = read_elf_ident(head);
  ASSERT_TRUE(ident.has_value());
  EXPECT_TRUE(elf_matches(*ident, *platform_elf(host))) << elf_description(*ident);
}

} // namespace
} // namespace kiln
