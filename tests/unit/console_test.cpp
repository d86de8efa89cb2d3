// The console with several stages building at once, plain and live, written to memory.
#include "driver/console.h"

#include <cstdio>
#include <cstdlib>

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

TEST(Console, TheIndexLineSaysEachLanesImageAndWhatDidNotRun) {
  IndexRecord index;
  index.ref = "127.0.0.1:5000/demo/app:1.0";
  index.status = "blocked";
  index.lanes = {{"amd64", "amd64/final", "linux/amd64", "built-this-run", "r2", "", ""},
                 {"arm64", "arm64/final", "linux/arm64", "stale", "r1", "", "built by run r1"},
                 {"s390x", "s390x/final", "linux/s390x", "missing", "", "", "no build"}};
  index.gates_not_run = {"freshness", "push", "read-back"};
  EXPECT_EQ(index_line(index),
            "kiln: index 127.0.0.1:5000/demo/app:1.0: blocked; amd64 built-this-run, arm64 stale "
            "(run r1), s390x missing; not run: freshness, push, read-back");
  index.status = "pushed";
  index.digest = "sha256:abc";
  index.gates_not_run.clear();
  index.lanes.pop_back();
  index.lanes[1].image = "built-this-run";
  EXPECT_EQ(index_line(index), "kiln: index 127.0.0.1:5000/demo/app:1.0: pushed sha256:abc; "
                               "amd64 built-this-run, arm64 built-this-run");
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
    Captured out(true);
    out.console().stage_started({1, 2, "zlib", 1, 1, std::nullopt});
    out.console().stage_started({2, 2, "png", 1, 1, std::nullopt});
    out.console().note("a note");
    out.console().stage_finished("zlib", "ok in 1s");
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

} // namespace
} // namespace kiln
