// kiln-cc's reading of sccache's output against real sccache 0.4 recordings
// (tests/fixtures/sccache-0.4; its README and record.sh say how each was made).
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compilecache/sccache_output.h"

namespace kiln::cc {
namespace {

struct Recording {
  std::string out;
  std::string err;
  int exit_code = -1;
};

std::string read_fixture(const std::string& file) {
  std::ifstream in(std::string(KILN_TEST_FIXTURES) + "/sccache-0.4/" + file, std::ios::binary);
  EXPECT_TRUE(in) << file;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Recording recording(const std::string& name) {
  return {read_fixture(name + ".stdout"), read_fixture(name + ".stderr"),
          std::stoi(read_fixture(name + ".rc"))};
}

std::string failure_of(const Recording& r) {
  const SccacheFailureClass* c = find_own_failure(r.out, r.err, r.exit_code);
  return c != nullptr ? std::string(c->name) : "";
}

// ---- sccache's own failures: run the compiler directly --------------------------------------

TEST(LauncherFailureClasses, EachRecordedOwnFailureHasItsClass) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"server-fatal-cwd-invisible", "server fatal error"},
      {"server-killed-before-compile", "server connection lost"},
      {"foreign-listener", "server connection lost"},
      {"compiler-not-supported", "compiler not supported"},
      {"server-startup-failed", "server startup failed"},
      {"server-startup-timed-out", "server startup timed out"},
      {"server-unreachable", "server unreachable"},
      {"cwd-gone", "working directory gone"},
      {"compiler-not-found", "client error"},
  };
  for (const auto& [name, expected] : cases) {
    EXPECT_EQ(failure_of(recording(name)), expected) << name;
  }
}

// ---- the compiler's own results: pass on untouched ------------------------------------------

TEST(LauncherFailureClasses, CompilerResultsAreNeverOwnFailures) {
  for (const char* name :
       {"clean-miss", "clean-hit", "compile-error", "compile-error-quoting-sccache",
        "preprocessor-error-quoting-sccache", "compiler-killed-by-signal",
        "compile-terminated-by-signal", "server-killed-during-compile"}) {
    EXPECT_EQ(failure_of(recording(name)), "") << name;
  }
}

TEST(LauncherFailureClasses, ExitCodeAloneNeverDecides) {
  // sccache exits 254 for its fatal errors and for compilers killed by signals, 2 for its
  // client errors; a compiler may exit with either.
  Recording error = recording("compile-error");
  for (int code : {1, 2, 254}) {
    EXPECT_EQ(find_own_failure(error.out, error.err, code), nullptr) << code;
  }
  Recording fatal = recording("server-fatal-cwd-invisible");
  EXPECT_EQ(find_own_failure(fatal.out, fatal.err, 0), nullptr) << "a success is a success";
  EXPECT_EQ(failure_of(fatal), "server fatal error");
  EXPECT_NE(find_own_failure(fatal.out, fatal.err, 1), nullptr) << "the text decides the class";
}

TEST(LauncherFailureClasses, PhrasesCountOnlyWhereSccacheWritesThem) {
  Recording fatal = recording("server-fatal-cwd-invisible");
  Recording lost = recording("server-killed-before-compile");
  Recording cwd = recording("cwd-gone");
  Recording error = recording("compile-error");
  // After compiler output on the same stream: a diagnostic quoting it.
  EXPECT_EQ(find_own_failure("", error.err + fatal.err, 254), nullptr);
  EXPECT_EQ(find_own_failure("", error.err + lost.err, 2), nullptr);
  EXPECT_EQ(find_own_failure("prog output\n" + cwd.out, "", 1), nullptr);
  // With compiler output on the other stream: sccache's own failures come alone.
  EXPECT_EQ(find_own_failure("a.c: some output\n", fatal.err, 254), nullptr);
  EXPECT_EQ(find_own_failure(cwd.out, "a.c:1: error\n", 1), nullptr);
  // On the other stream than sccache uses.
  EXPECT_EQ(find_own_failure(fatal.err, "", 254), nullptr);
  EXPECT_EQ(find_own_failure("", cwd.out, 1), nullptr);
  // "failed to execute compile" with another cause is still the client's own error.
  EXPECT_EQ(failure_of(recording("compiler-not-found")), "client error");
}

// ---- sccache's notes around a compile that did run ------------------------------------------

TEST(LauncherSccacheNotes, SignalNoteNamesTheSignalAndItsBytes) {
  Recording server = recording("compiler-killed-by-signal");
  auto note = find_signal_note(server.out, server.exit_code);
  ASSERT_TRUE(note);
  EXPECT_EQ(note->signal, 9);
  EXPECT_EQ(note->length, server.out.size());
  EXPECT_LE(note->length, k_signal_note_max);

  Recording local = recording("compile-terminated-by-signal");
  note = find_signal_note("compiler stdout\n" + local.out, local.exit_code);
  ASSERT_TRUE(note);
  EXPECT_EQ(note->signal, 9);
  EXPECT_EQ(note->length, local.out.size());
}

TEST(LauncherSccacheNotes, SignalNoteNeedsSccachesExitCode) {
  Recording server = recording("compiler-killed-by-signal");
  Recording local = recording("compile-terminated-by-signal");
  EXPECT_FALSE(find_signal_note(server.out, 2));
  EXPECT_FALSE(find_signal_note(server.out, 0));
  EXPECT_FALSE(find_signal_note(local.out, 254));
  EXPECT_FALSE(find_signal_note("", 254));
  EXPECT_FALSE(find_signal_note(server.out.substr(0, server.out.size() - 1), 254));
  EXPECT_FALSE(find_signal_note("sccache: Compiler killed by signal \n", 254));
}

TEST(LauncherSccacheNotes, LocalCompileWarningCoversOnlySccachesLine) {
  Recording during = recording("server-killed-during-compile");
  Recording direct = recording("compile-error");
  std::size_t warning = local_compile_warning_length(during.err);
  ASSERT_GT(warning, 0u);
  // What follows the warning is byte for byte what the same compile prints through the server.
  EXPECT_EQ(during.err.substr(warning), direct.err);
  EXPECT_EQ(local_compile_warning_length(direct.err), 0u);
  EXPECT_EQ(local_compile_warning_length(direct.err + during.err), 0u);
}

// ---- holding and passing on ------------------------------------------------------------------

struct Sunk {
  std::string out;
  std::string err;
  std::string order; // 'o' and 'e' per non-empty write
};

SccacheOutput::Sink sink_into(Sunk& sunk) {
  return [&sunk](Stream stream, std::string_view bytes) {
    if (bytes.empty()) {
      return;
    }
    (stream == Stream::out ? sunk.out : sunk.err).append(bytes);
    sunk.order.push_back(stream == Stream::out ? 'o' : 'e');
  };
}

/// Feed a recording in small chunks, both streams alternating, as a pipe would.
void feed(SccacheOutput& output, const Recording& r, std::size_t chunk = 5) {
  for (std::size_t i = 0; i < std::max(r.out.size(), r.err.size()); i += chunk) {
    if (i < r.out.size()) {
      output.add(Stream::out, std::string_view(r.out).substr(i, chunk));
    }
    if (i < r.err.size()) {
      output.add(Stream::err, std::string_view(r.err).substr(i, chunk));
    }
    output.settle();
  }
}

TEST(LauncherHeldOutput, OwnFailureIsHeldWholeAndNothingPassesOn) {
  for (const char* name :
       {"server-fatal-cwd-invisible", "server-killed-before-compile", "cwd-gone"}) {
    Recording r = recording(name);
    Sunk sunk;
    SccacheOutput output(sink_into(sunk), 64 * 1024);
    feed(output, r);
    EXPECT_TRUE(output.holding()) << name;
    EXPECT_EQ(output.held_out(), r.out) << name;
    EXPECT_EQ(output.held_err(), r.err) << name;
    EXPECT_NE(find_own_failure(output.held_out(), output.held_err(), r.exit_code), nullptr);
    EXPECT_EQ(sunk.order, "") << name;
  }
}

TEST(LauncherHeldOutput, CompileErrorPassesOnByteForByte) {
  Recording r = recording("compile-error");
  r.out = "some compiler stdout, longer than the signal note is, so that it is split up\n";
  Sunk sunk;
  SccacheOutput output(sink_into(sunk), 64 * 1024);
  feed(output, r);
  EXPECT_FALSE(output.finish(r.exit_code));
  EXPECT_EQ(sunk.out, r.out);
  EXPECT_EQ(sunk.err, r.err);
  EXPECT_EQ(sunk.order, "oe") << "stdout first, as sccache writes them";
  EXPECT_FALSE(output.compiled_locally());
}

TEST(LauncherHeldOutput, LocalCompileDropsOnlySccachesWarning) {
  Recording r = recording("server-killed-during-compile");
  Sunk sunk;
  SccacheOutput output(sink_into(sunk), 64 * 1024);
  feed(output, r);
  EXPECT_EQ(find_own_failure(output.held_out(), output.held_err(), r.exit_code), nullptr);
  output.finish(r.exit_code);
  EXPECT_TRUE(output.compiled_locally());
  EXPECT_EQ(sunk.err, recording("compile-error").err);
}

TEST(LauncherHeldOutput, SignalNoteIsDroppedAndReported) {
  Recording r = recording("compiler-killed-by-signal");
  Sunk sunk;
  SccacheOutput output(sink_into(sunk), 64 * 1024);
  feed(output, r);
  auto note = output.finish(r.exit_code);
  ASSERT_TRUE(note);
  EXPECT_EQ(note->signal, 9);
  EXPECT_EQ(sunk.out, "");
  EXPECT_EQ(sunk.err, r.err);
}

TEST(LauncherHeldOutput, FloodStreamsWithBoundedHoldAndArrivesWhole) {
  // A warning flood: megabytes on stderr, some stdout, and sccache's local-compile warning
  // first; held bytes never exceed the limit plus one read.
  const std::size_t limit = 64 * 1024;
  const std::size_t chunk = 4096;
  Recording r;
  r.err = std::string(recording("server-killed-during-compile")
                          .err.substr(0, local_compile_warning_length(
                                             recording("server-killed-during-compile").err)));
  std::string flood;
  for (int i = 0; flood.size() < 5 * 1024 * 1024; ++i) {
    flood += "big.c:" + std::to_string(i) + ":5: warning: unused variable 'x' [-Wunused]\n";
  }
  r.err += flood;
  r.out = std::string(200 * 1024, 'o');
  r.exit_code = 0;
  Sunk sunk;
  SccacheOutput output(sink_into(sunk), limit);
  std::size_t max_held = 0;
  for (std::size_t i = 0; i < std::max(r.out.size(), r.err.size()); i += chunk) {
    if (i < r.out.size()) {
      output.add(Stream::out, std::string_view(r.out).substr(i, chunk));
    }
    if (i < r.err.size()) {
      output.add(Stream::err, std::string_view(r.err).substr(i, chunk));
    }
    output.settle();
    max_held = std::max(max_held, output.held_out().size() + output.held_err().size());
  }
  EXPECT_FALSE(output.holding());
  EXPECT_LE(max_held, limit + 2 * chunk);
  EXPECT_FALSE(output.finish(0));
  // Megabytes: compared as a whole, since a failing EXPECT_EQ would diff them line by line.
  EXPECT_TRUE(sunk.out == r.out) << sunk.out.size() << " bytes against " << r.out.size();
  EXPECT_TRUE(sunk.err == flood) << "sccache's warning dropped, the rest whole: "
                                 << sunk.err.substr(0, 200);
  EXPECT_TRUE(output.compiled_locally());
}

TEST(LauncherHeldOutput, SignalNoteAfterAStreamedFloodIsStillFound) {
  Recording note = recording("compiler-killed-by-signal");
  std::string out(300 * 1024, 'x');
  std::string err(100 * 1024, 'y');
  Sunk sunk;
  SccacheOutput output(sink_into(sunk), 64 * 1024);
  // The server path: the compiler's stdout, its stderr, then sccache's note on stdout.
  for (std::size_t i = 0; i < out.size(); i += 4096) {
    output.add(Stream::out, std::string_view(out).substr(i, 4096));
    output.settle();
  }
  output.add(Stream::err, err);
  output.settle();
  output.add(Stream::out, note.out);
  output.settle();
  auto found = output.finish(note.exit_code);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->signal, 9);
  EXPECT_TRUE(sunk.out == out) << sunk.out.size() << " bytes against " << out.size();
  EXPECT_TRUE(sunk.err == err) << sunk.err.size() << " bytes against " << err.size();
  EXPECT_EQ(sunk.order.find("eo"), std::string::npos) << "all stdout before stderr";
}

TEST(LauncherHeldOutput, FlushPassesEverythingOnAsItIs) {
  Recording r = recording("compiler-killed-by-signal");
  Sunk sunk;
  SccacheOutput output(sink_into(sunk), 64 * 1024);
  feed(output, r);
  output.flush();
  EXPECT_EQ(sunk.out, r.out);
  EXPECT_EQ(sunk.err, r.err);
}

} // namespace
} // namespace kiln::cc
