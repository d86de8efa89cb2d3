#pragma once

#include <functional>
#include <string>

namespace kiln {

/// Who writes `crashed` into a record when kiln fails inside: the run in progress sets it for
/// its life; empty outside a run.
void set_crash_recorder(std::function<void(const std::string& reason)> recorder);

/// The one way out of a fatal error (an exception that reached main, one that escaped a thread):
/// the run in progress records `crashed` with `reason` and says where its record is, the
/// reason goes to stderr, and the caller exits with k_exit_crash.
int report_crash(const std::string& reason);

/// Route std::terminate through report_crash, so an exception escaping a thread ends kiln
/// with its record written and the documented exit code, not a core dump and a `running`
/// manifest.
void install_crash_handler();

} // namespace kiln
