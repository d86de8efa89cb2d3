// The engine's read loop hands its output to a queue and never waits for the log or readers.
#include "driver/attempt_runner.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "fake_engine.h"
#include "temp_dir.h"
#include "util/byte_queue.h"

namespace kiln {
namespace {

using testing::FakeBuild;
using testing::FakeEngine;
using testing::TempDir;

TEST(ByteQueue, ChunksComeOutInOrderAndAFullQueueDropsOneGapItReports) {
  ByteQueue queue(10, std::chrono::milliseconds(0));
  EXPECT_TRUE(queue.push("abc"));
  EXPECT_TRUE(queue.push("defg"));
  EXPECT_FALSE(queue.push("hijk")); // 11 bytes would wait, and nobody takes
  EXPECT_FALSE(queue.push("l"));    // after a drop, every chunk until the reader takes
  auto first = queue.pop();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->bytes, "abcdefg");
  EXPECT_EQ(first->dropped_after, 5u);
  EXPECT_TRUE(queue.push("mn"));
  queue.close();
  auto second = queue.pop();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->bytes, "mn");
  EXPECT_EQ(second->dropped_after, 0u);
  EXPECT_FALSE(queue.pop());
  EXPECT_EQ(queue.dropped(), 5u);
}

TEST(ByteQueue, AReaderThatKeepsUpSlowsTheWriterInsteadOfLosingBytes) {
  ByteQueue queue(4, std::chrono::seconds(30));
  std::string taken;
  std::thread reader([&] {
    while (auto chunk = queue.pop()) {
      taken += chunk->bytes;
      EXPECT_EQ(chunk->dropped_after, 0u);
    }
  });
  for (char c = 'a'; c <= 'z'; ++c) {
    EXPECT_TRUE(queue.push(std::string(3, c)));
  }
  queue.close();
  reader.join();
  EXPECT_EQ(taken.size(), 78u);
  EXPECT_EQ(queue.dropped(), 0u);
}

TEST(RunAttempt, ALogThatCannotBeWrittenKeepsTheBuildFromNothing) {
  TempDir dir;
  // The log is a pipe nobody reads yet: a write past its 64 KiB blocks.
  std::filesystem::path fifo = dir.path() / "attempt.log";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  auto opened = RecordLog::open(fifo);
  ASSERT_TRUE(opened) << opened.error();
  std::optional<RecordLog> log(std::move(*opened));

  std::atomic<bool> reading{false};
  std::atomic<bool> read_by_the_build{false};
  std::thread drain([&] {
    // Started by the build once all its output is out; after 20 s at the latest, so a build
    // that waited for its log still ends.
    for (int tenth = 0; tenth < 200 && !reading; ++tenth) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    reading = true;
    char buffer[65536];
    ::fcntl(reader, F_SETFL, 0);
    while (::read(reader, buffer, sizeof buffer) > 0) {
    }
  });

  FakeEngine engine;
  FakeBuild build = FakeBuild::ok();
  // 2 MiB before the image id: far past what the pipe holds.
  build.lines.insert(build.lines.begin(), 2048, std::string(1023, 'x'));
  build.during = [&] {
    read_by_the_build = !reading;
    reading = true;
  };
  engine.script("s", {build});
  BuildRequest request;
  request.stage = "s";
  request.tag = "localhost/s:latest";
  AttemptOutcome outcome = run_attempt(engine, request, *log, {});
  log.reset(); // the writer's end closed: the drain sees the end
  drain.join();
  ::close(reader);
  EXPECT_TRUE(read_by_the_build) << "the build waited for its log";
  EXPECT_TRUE(outcome.exit.ok());
  EXPECT_EQ(outcome.dropped_bytes, 0u); // 2 MiB fit in the queue
}

} // namespace
} // namespace kiln
