#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln::forensics {

// What one line of a step's output says, each check cheap enough for every line of a
// gigabyte log: the callers run them only on lines a byte scan singled out.

/// A compiler, linker or build tool's error line: `file:3:1: error: ...`, `collect2: error: ...`,
/// `gcc: fatal error: ...`, `error: ...` at the start, `...: undefined reference to ...`,
/// `make: *** ...` / `make[2]: *** ...`, `ninja: build stopped: ...`, ninja's `FAILED: ...`.
/// CMake errors and Python tracebacks span lines: see ErrorBlock.
bool is_error_line(std::string_view text);
/// The error lines a first word makes (make's, ninja's): is_error_line without its searches of
/// the whole line for `error:`, `: undefined reference to` and `: multiple definition of`.
bool starts_error_line(std::string_view text);

/// `CMake Error at CMakeLists.txt:3 (find_package):` or `CMake Error: ...`.
bool is_cmake_error(std::string_view text);
/// Python's `Traceback (most recent call last):`.
bool is_traceback_start(std::string_view text);

/// A line that runs a C or C++ compiler on one source: a cc/gcc/g++/c++/clang/clang++ word (a
/// path, a cross prefix `x86_64-linux-gnu-gcc` or a version suffix `gcc-12` allowed) with `-c`.
/// `has_dash_c`: the caller already saw a ` -c ` word on the line.
bool is_compiler_invocation(std::string_view text);
/// Ninja's `[12/340] Building CXX object ...` and CMake's make `[ 50%] Building C object ...`.
bool is_build_progress_compile(std::string_view text);

/// The job count of a `-j N`, `-jN`, `--parallel N` or `--parallel=N` word starting at `text`
/// (the `-` of the option); nullopt when no number follows (`-j`, `-j$(nproc)`).
std::optional<long> jobs_option(std::string_view text);

/// Network fetches in a shell command that let the tool draw its progress into the log:
/// `wget` without `--progress=...`, `-q`/`--quiet` or `-nv`/`--no-verbose`; `curl` without
/// `-s`/`-sS`/`--silent`/`--no-progress-meter` (a short-option cluster such as `-fsSL` counts).
int fetches_without_progress(std::string_view command);

/// The compile-cache counters a block of statistics printed, read line by line.
struct CacheCounts {
  long requests = 0;
  long hits = 0;
  long misses = 0;
};

/// A `<label>   <number>` line of sccache's text statistics (`--show-stats`, `--stop-server`):
/// the number after exactly `label` and blanks, nullopt for any other line ("Cache hits (C/C++)").
std::optional<long> sccache_text_count(std::string_view text, std::string_view label);

/// ccache 4's `-s`: `Cacheable calls:  302 /  302 (100.0%)`, `  Hits:  119 /  302 (39.40%)`,
/// `  Misses:  183 /  302 (60.60%)`: the first number after `label:`.
std::optional<long> ccache_summary_count(std::string_view text, std::string_view label);

/// ccache 4's `--print-stats`: `<key>\t<number>`.
std::optional<long> ccache_print_stats_count(std::string_view text, std::string_view key);

/// Text cut to `limit` bytes without splitting a UTF-8 sequence, control characters other than
/// tab shown as spaces: a line fit for one line of a report.
std::string one_line(std::string_view text, size_t limit);

} // namespace kiln::forensics
