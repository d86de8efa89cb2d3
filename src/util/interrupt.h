#pragma once

#include <chrono>
#include <string>

namespace kiln {

/// Route SIGINT and SIGTERM into a flag and a self-pipe, so the run loop and a running
/// engine notice them at their next poll instead of dying mid-write.
void install_interrupt_handlers();

/// Readable once SIGINT or SIGTERM has arrived, and stays readable; -1 before installation.
int interrupt_fd();

/// The signal that arrived, 0 when none.
int interrupt_signal();

/// "SIGINT" or "SIGTERM" once one arrived, "" before.
std::string interrupt_signal_name();

/// Sleep, waking early on an interrupt. Returns false when interrupted.
bool sleep_unless_interrupted(std::chrono::milliseconds duration);

} // namespace kiln
