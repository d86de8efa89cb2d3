#include "compilecache/sccache_output.h"

#include <array>
#include <utility>

namespace kiln::cc {

namespace {

// sccache's own failures, as sccache 0.4 writes them (and the sources of 0.17 still do, word for
// word at the start of the line). The recording behind each is named; the README there says
// how it was made. First match wins, so the catch-all comes last.
constexpr std::array<SccacheFailureClass, 8> k_failure_classes = {{
    // The server failed the compile for reasons of its own and sent this instead of the
    // compiler's output; exit 254. The field notes' 2952 of 3062 bypasses: spawning the
    // preprocessor in a working directory the server cannot see (server-fatal-cwd-invisible).
    {"server fatal error", Stream::err, "sccache: encountered fatal error\n", ""},
    // The server went away before answering: it died, or it was another container's server
    // (server-killed-before-compile, foreign-listener). This class once killed a build
    // because a launcher knew only the one above.
    {"server connection lost", Stream::err, "sccache: error: failed to execute compile\n",
     "sccache: caused by: Failed to send data to or receive data from server"},
    // sccache could not identify the compiler, where ccache would just run it
    // (compiler-not-supported).
    {"compiler not supported", Stream::err, "sccache: error: failed to execute compile\n",
     "sccache: caused by: Compiler not supported: "},
    // No server answered, so the client started one, and that failed (server-startup-failed)
    // or never reported back (server-startup-timed-out), or then refused connections
    // (server-unreachable; newer sccache appends the refusal to the same message).
    {"server startup failed", Stream::err, "sccache: error: Server startup failed: ", ""},
    {"server startup timed out", Stream::err,
     "sccache: error: Timed out waiting for server startup", ""},
    {"server unreachable", Stream::err, "sccache: error: Connection to server timed out", ""},
    // The client could not read its working directory (CMake's TryCompile deleted it): on
    // stdout, exit 1, which without this class is indistinguishable from a compile error.
    {"working directory gone", Stream::out,
     "sccache: sccache: Couldn't determine current working directory\n", ""},
    // Every other error the client reports is its own too: the compiler's output only ever
    // reaches the client inside a finished compile, which the client then prints and exits
    // with (compiler-not-found: sccache's PATH lookup; the direct run then says it plainly).
    {"client error", Stream::err, "sccache: error: ", ""},
}};

constexpr std::string_view k_local_compile_warning =
    "sccache: warning: The server looks like it shut down unexpectedly, compiling locally "
    "instead\n";

// The server ran the compiler and it died of a signal: exit 254. The client ran it: exit 2.
constexpr std::array<std::pair<std::string_view, int>, 2> k_signal_notes = {{
    {"sccache: Compiler killed by signal ", 254},
    {"sccache: Compile terminated by signal ", 2},
}};

} // namespace

const SccacheFailureClass* find_own_failure(std::string_view out, std::string_view err,
                                            int exit_code) {
  if (exit_code == 0) {
    return nullptr;
  }
  for (const SccacheFailureClass& c : k_failure_classes) {
    std::string_view text = c.stream == Stream::out ? out : err;
    std::string_view other = c.stream == Stream::out ? err : out;
    if (other.empty() && text.starts_with(c.prefix) &&
        (c.contains.empty() || text.find(c.contains) != std::string_view::npos)) {
      return &c;
    }
  }
  return nullptr;
}

std::size_t local_compile_warning_length(std::string_view err) {
  return err.starts_with(k_local_compile_warning) ? k_local_compile_warning.size() : 0;
}

std::optional<SignalNote> find_signal_note(std::string_view out_tail, int exit_code) {
  if (!out_tail.ends_with('\n')) {
    return std::nullopt;
  }
  std::string_view body = out_tail.substr(0, out_tail.size() - 1);
  std::size_t digits = 0;
  while (digits < body.size() && digits < 3 && body[body.size() - 1 - digits] >= '0' &&
         body[body.size() - 1 - digits] <= '9') {
    ++digits;
  }
  if (digits == 0) {
    return std::nullopt;
  }
  int signal = 0;
  for (char c : body.substr(body.size() - digits)) {
    signal = signal * 10 + (c - '0');
  }
  std::string_view head = body.substr(0, body.size() - digits);
  for (const auto& [text, code] : k_signal_notes) {
    if (exit_code == code && head.ends_with(text) && signal > 0) {
      return SignalNote{signal, text.size() + digits + 1};
    }
  }
  return std::nullopt;
}

SccacheOutput::SccacheOutput(Sink sink, std::size_t hold_limit)
    : m_sink(std::move(sink)), m_hold_limit(hold_limit) {}

void SccacheOutput::add(Stream stream, std::string_view bytes) {
  if (stream == Stream::out) {
    m_out.append(bytes);
    if (m_streaming) {
      pass_on_stdout(k_signal_note_max);
    }
  } else if (m_streaming) {
    // sccache writes the compiler's stdout in full before its stderr, and its signal note
    // after both: stdout held so far is complete and goes first, as it would have.
    pass_on_stdout(0);
    m_sink(Stream::err, bytes);
  } else {
    m_err.append(bytes);
  }
}

void SccacheOutput::settle() {
  if (!m_streaming && m_out.size() + m_err.size() > m_hold_limit) {
    m_streaming = true;
    if (m_err.empty()) {
      pass_on_stdout(k_signal_note_max);
    } else {
      pass_on_stdout(0);
      pass_on_stderr();
    }
  }
}

void SccacheOutput::pass_on_stdout(std::size_t keep) {
  if (m_out.size() > keep) {
    std::size_t head = m_out.size() - keep;
    m_sink(Stream::out, std::string_view(m_out).substr(0, head));
    m_out.erase(0, head);
  }
}

void SccacheOutput::pass_on_stderr() {
  std::size_t warning = local_compile_warning_length(m_err);
  m_compiled_locally = warning > 0;
  m_sink(Stream::err, std::string_view(m_err).substr(warning));
  m_err.clear();
  m_err.shrink_to_fit();
}

std::optional<SignalNote> SccacheOutput::finish(int exit_code) {
  std::optional<SignalNote> note = find_signal_note(m_out, exit_code);
  if (note) {
    m_out.resize(m_out.size() - note->length);
  }
  pass_on_stdout(0);
  if (!m_streaming) {
    m_streaming = true;
    pass_on_stderr();
  }
  return note;
}

void SccacheOutput::flush() {
  pass_on_stdout(0);
  if (!m_streaming) {
    m_streaming = true;
    m_sink(Stream::err, m_err);
    m_err.clear();
  }
}

} // namespace kiln::cc
