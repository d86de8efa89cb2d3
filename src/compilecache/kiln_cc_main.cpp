#include <cstring>

#include "compilecache/launcher.h"
#include "compilecache/session.h"

// Kept to a dispatch: a compile launcher runs once per translation unit.
int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "session") == 0) {
    return kiln::cc::run_session(argc - 2, argv + 2);
  }
  return kiln::cc::run_launcher(argc - 1, argv + 1);
}
