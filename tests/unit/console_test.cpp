// The console with several stages building at once, plain and live, written to memory.
#include "driver/console.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace kiln {
namespace {

/// A Console on a memory stream; text() is everything written so far.
class Captured {
public:
  explicit Captured(bool live) {
    m_stream = open_memstream(&m_buffer, &m_size);
    m_console.emplace(m_stream, live);
  }
  ~Captured() {
    m_console.reset();
    std::fclose(m_stream);
    std::free(m_buffer);
  }
  Console& console() { return *m_console; }
  /// Everything written, once the console (and its ticker) has stopped.
  std::string text_at_end() {
    m_console.reset();
    std::fflush(m_stream);
    return std::string(m_buffer, m_size);
  }

private:
  char* m_buffer = nullptr;
  size_t m_size = 0;
  std::FILE* m_stream = nullptr;
  std::optional<Console> m_console;
};

BuildProgress step(int k, int n, std::string instruction) {
  BuildProgress progress;
  progress.step = k;
  progress.steps = n;
  progress.instruction = std::move(instruction);
  return progress;
}

TEST(Console, ThePublishLineSaysEachLanesImageAndWhatDidNotRun) {
  PublishRecord published;
  published.ref = "127.0.0.1:5000/demo/app:1.0";
  published.status = "blocked";
  IndexLaneRecord amd64;
  amd64.lane = "amd64";
  amd64.image = "built-this-run";
  IndexLaneRecord s390x;
  s390x.lane = "s390x";
  s390x.image = "missing";
  published.lanes = {amd64, s390x};
  published.gates_not_run = {"smoke", "coherence", "push", "read-back", "sign", "tag"};
  EXPECT_EQ(publish_line(published),
            "kiln: publish 127.0.0.1:5000/demo/app:1.0: blocked; amd64 built-this-run, s390x "
            "missing; not run: smoke, coherence, push, read-back, sign, tag");
  published.status = "published";
  published.digest = "sha256:abc";
  published.gates_not_run.clear();
  published.lanes.pop_back();
  EXPECT_EQ(publish_line(published),
            "kiln: publish 127.0.0.1:5000/demo/app:1.0: published sha256:abc; amd64 "
            "built-this-run");
}

TEST(Console, PlainLinesArePrefixedWithTheirStageAndInstructionsClippedToOneLine) {
  Captured out(false);
  out.console().stage_started({2, 3, "zlib", 1, 1, std::nullopt});
  out.console().stage_started({3, 3, "png", 2, 3, std::nullopt});
  out.console().stage_progress("zlib", step(2, 2, "RUN make \\\n  && make install"));
  out.console().stage_progress("png", step(1, 2, "RUN " + std::string(300, 'x')));
  out.console().stage_finished("zlib", "ok in 3s");
  out.console().stage_finished("png", "failed after 1s: exit 2");
  EXPECT_EQ(out.text_at_end(), "kiln: [zlib] building, stage 2 of 3\n"
                               "kiln: [png] building (attempt 2/3), stage 3 of 3\n"
                               "kiln: [zlib] step 2/2: RUN make \\\n"
                               "kiln: [png] step 1/2: RUN " +
                                   std::string(96, 'x') +
                                   "...\n"
                                   "kiln: [zlib] ok in 3s\n"
                                   "kiln: [png] failed after 1s: exit 2\n");
}

TEST(Console, LiveModeKeepsALineForEachRunningStageBelowWhatScrolls) {
  // Read once the console is gone: its ticker redraws once a second from a thread of its own.
  std::string all;
  {
    // Each flush waits for the console's writer: what it draws is then on the terminal.
    Captured out(true);
    out.console().stage_started({1, 2, "zlib", 1, 1, std::nullopt});
    out.console().stage_started({2, 2, "png", 1, 1, std::nullopt});
    out.console().flush();
    out.console().note("a note");
    out.console().flush();
    out.console().stage_finished("zlib", "ok in 1s");
    out.console().flush();
    all = out.text_at_end();
  }
  // The two live lines are cleared (up two lines, clear to the end), the note printed, and
  // the block drawn again below it.
  size_t note = all.find("\033[2A\r\033[Jkiln: a note\n");
  ASSERT_NE(note, std::string::npos) << all;
  std::string block = all.substr(note + std::string("\033[2A\r\033[Jkiln: a note\n").size());
  EXPECT_EQ(block.rfind("kiln: zlib  starting  ", 0), 0u) << block;
  EXPECT_NE(block.find("\nkiln: png  starting  "), std::string::npos) << block;
  // From the line that ends zlib on, only png's live line is drawn.
  size_t ended = all.rfind("kiln: [zlib] ok in 1s\n");
  ASSERT_NE(ended, std::string::npos) << all;
  std::string finished = all.substr(ended);
  EXPECT_EQ(finished.rfind("kiln: [zlib] ok in 1s\nkiln: png  starting", 0), 0u) << finished;
  EXPECT_EQ(finished.find("kiln: zlib  "), std::string::npos) << "zlib's live line is gone";
}

TEST(Console, ATerminalThatStopsReadingHoldsNoCallerAndLosesOnlyCountedLines) {
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  ::fcntl(ends[1], F_SETPIPE_SZ, 4096);
  std::FILE* out = ::fdopen(ends[1], "w");
  ASSERT_NE(out, nullptr);
  std::optional<Console> console(std::in_place, out, false);
  // Nobody reads: twice the queue's limit of notes, every call returning at once (a call that
  // waited for the reader would hang this test here).
  const std::string line(100, 'x');
  const size_t notes = 2 * Console::k_queue_limit / line.size();
  for (size_t i = 0; i < notes; ++i) {
    console->note(line);
  }
  std::string shown;
  std::thread reader([&] {
    char buffer[65536];
    ssize_t got = 0;
    while ((got = ::read(ends[0], buffer, sizeof buffer)) > 0) {
      shown.append(buffer, static_cast<size_t>(got));
    }
  });
  console->note("after the reader came back");
  console.reset();
  std::fclose(out);
  reader.join();
  ::close(ends[0]);

  // What was dropped is said, with how much (once each time the terminal took text again),
  // and every line is either shown or counted.
  const std::string said = " line(s) of kiln's output were dropped while nothing read it";
  size_t dropped = 0;
  for (size_t at = shown.find(said); at != std::string::npos; at = shown.find(said, at + 1)) {
    size_t count_start = shown.rfind("kiln: ", at) + 6;
    dropped += std::stoul(shown.substr(count_start, at - count_start));
  }
  size_t written = 0;
  for (size_t pos = shown.find("kiln: " + line + "\n"); pos != std::string::npos;
       pos = shown.find("kiln: " + line + "\n", pos + 1)) {
    ++written;
  }
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(written + dropped, notes);
  EXPECT_NE(shown.find("kiln: after the reader came back\n"), std::string::npos);
}

} // namespace
} // namespace kiln
