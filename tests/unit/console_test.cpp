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
