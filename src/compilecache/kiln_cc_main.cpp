#include <cstdio>
#include <cstring>

#include "compilecache/launcher.h"
#include "compilecache/session.h"

namespace {

constexpr const char* k_help =
    "usage: kiln-cc <compiler> [args...]\n"
    "  compile through sccache when its server answers, else through ccache, else with the\n"
    "  compiler itself; for CMAKE_<LANG>_COMPILER_LAUNCHER or RUSTC_WRAPPER\n"
    "usage: kiln-cc session <verb> [options]   (kiln-cc session --help: the verbs)\n"
    "  kiln-cc session run -- CMD [ARGS...]     a whole compile step in one sccache session\n"
    "kiln-cc --help | --version\n";

} // namespace

// Kept to a dispatch: a compile launcher runs once per translation unit. No compiler is named
// --help or --version, so these never shadow a compile (ccache would print its own help).
int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "session") == 0) {
    return kiln::cc::run_session(argc - 2, argv + 2);
  }
  if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(k_help, stdout);
    return 0;
  }
  if (argc >= 2 && std::strcmp(argv[1], "--version") == 0) {
    std::fputs("kiln-cc " KILN_VERSION "\n", stdout);
    return 0;
  }
  return kiln::cc::run_launcher(argc - 1, argv + 1);
}
