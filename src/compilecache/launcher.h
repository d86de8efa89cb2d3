#pragma once

namespace kiln::cc {

/// `kiln-cc <compiler> <args...>`: run one compile through sccache, ccache or nothing,
/// whichever answers, falling back to the bare compiler when sccache fails for reasons of its
/// own. Returns the exit code kiln-cc exits with (the compiler's, untouched).
int run_launcher(int argc, char** argv);

} // namespace kiln::cc
