#pragma once

namespace kiln::cc {

/// The folder `kiln-cc session start` creates for one compile step and exports under this
/// name; the launcher and the other session verbs find the step's state there.
constexpr const char* k_session_env = "KILN_CC_SESSION";

/// In the session folder: one line per launcher run, appended with a single write(2) so
/// concurrent compiles never interleave: `<cache> <outcome>\n`, cache one of sccache, ccache,
/// direct; outcome one of ok, failed, bypass (sccache failed for its own reasons and the
/// compiler ran directly).
constexpr const char* k_launch_log = "launches";

/// What an unset PATH means, as execvp reads it.
constexpr const char* k_default_path = "/usr/local/bin:/usr/bin:/bin";

} // namespace kiln::cc
