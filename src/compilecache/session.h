#pragma once

namespace kiln::cc {

/// `kiln-cc session <probe|start|drain|stats|stop|run> [options]`: sccache session control for
/// the RUN steps that compile. argv[0] is the verb. Returns the exit code.
int run_session(int argc, char** argv);

} // namespace kiln::cc
