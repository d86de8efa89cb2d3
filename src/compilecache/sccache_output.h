#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::cc {

/// Reading what `sccache <compiler> <args>` printed: did the compiler run, or did sccache fail
/// for reasons of its own? Recordings of every class are in tests/fixtures/sccache-0.4/.

enum class Stream { out, err };

/// One way sccache reports a failure of its own. When it does, the compiler's output is absent
/// (the server replaces it with the message, or the client failed before it got any), so
/// running the compiler directly is safe and loses nothing but the cache entry.
struct SccacheFailureClass {
  std::string_view name;     // for kiln-cc's own messages
  Stream stream;             // where sccache writes it
  std::string_view prefix;   // what that stream starts with
  std::string_view contains; // and must also contain; empty: nothing more
};

/// The class of sccache's own failure that a finished run shows, or nullptr when the output is
/// the compiler's (a clean compile, a real compile error) and must be passed on as it is.
/// `out` and `err` are everything sccache printed, `exit_code` its exit code. A class matches
/// only at the very start of its stream, with the other stream empty and a non-zero exit:
/// compiler diagnostics quote source lines, so the phrases alone can appear in a real error.
const SccacheFailureClass* find_own_failure(std::string_view out, std::string_view err,
                                            int exit_code);

/// sccache's warning, first on stderr, that it lost the server after the compile started and
/// ran the compiler itself: the output after it is the compiler's, so the compile must not run
/// again, but it went uncached like a bypass. 0 when `err` does not start with it.
std::size_t local_compile_warning_length(std::string_view err);

/// sccache's note, last on stdout, that the compiler died of a signal: it then exits 254 (the
/// server ran the compiler) or 2 (the client did), numbers a compiler can exit with too.
struct SignalNote {
  int signal = 0;
  std::size_t length = 0; // bytes of the note at the end of stdout
};
std::optional<SignalNote> find_signal_note(std::string_view out_tail, int exit_code);

/// The longest signal note: stdout's last this many bytes are held back until sccache exits.
constexpr std::size_t k_signal_note_max = 64;

/// Holds sccache's output until it is known not to be one of sccache's own failure messages,
/// then passes it on. sccache's own messages are a few hundred bytes and come alone, so once
/// more than `hold_limit` bytes have arrived the output is the compiler's and is streamed from
/// then on (a megabyte warning flood never sits in memory); only stdout's last
/// k_signal_note_max bytes stay held, for the signal note.
class SccacheOutput {
public:
  using Sink = std::function<void(Stream, std::string_view)>;

  SccacheOutput(Sink sink, std::size_t hold_limit);

  void add(Stream stream, std::string_view bytes);
  /// Call after each batch of add() calls that arrived together: switches to streaming once
  /// the hold limit is passed. (Deciding per batch, not per read, keeps sccache's warning on
  /// stderr together with the compiler output that followed it.)
  void settle();

  /// False once anything was passed on: sccache's own failures are then ruled out.
  bool holding() const { return !m_streaming; }
  std::string_view held_out() const { return m_out; }
  std::string_view held_err() const { return m_err; }

  /// sccache exited with `exit_code`: pass on what is held, without sccache's local-compile
  /// warning and its signal note. Returns the signal note when there was one.
  std::optional<SignalNote> finish(int exit_code);
  /// sccache died of a signal itself: pass on everything held as it is.
  void flush();
  /// sccache said it ran the compiler itself after losing the server (see
  /// local_compile_warning_length); its warning line was dropped.
  bool compiled_locally() const { return m_compiled_locally; }

private:
  /// Pass on stdout held so far except its last `keep` bytes.
  void pass_on_stdout(std::size_t keep);
  /// Pass on stderr held so far, without sccache's local-compile warning.
  void pass_on_stderr();

  Sink m_sink;
  std::size_t m_hold_limit;
  std::string m_out;
  std::string m_err;
  bool m_streaming = false;
  bool m_compiled_locally = false;
};

} // namespace kiln::cc
