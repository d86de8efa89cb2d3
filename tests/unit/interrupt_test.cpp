// util/interrupt with real signals.
#include <chrono>
#include <csignal>

#include <poll.h>

#include <gtest/gtest.h>

#include "util/interrupt.h"

namespace kiln {
namespace {

TEST(Interrupt, SigtermIsRecordedAndWakesEveryPoller) {
  install_interrupt_handlers();
  ASSERT_GE(interrupt_fd(), 0);
  EXPECT_EQ(interrupt_signal(), 0);
  EXPECT_EQ(interrupt_signal_name(), "");
  EXPECT_TRUE(sleep_unless_interrupted(std::chrono::milliseconds(1)));

  ASSERT_EQ(std::raise(SIGTERM), 0);
  EXPECT_EQ(interrupt_signal(), SIGTERM);
  EXPECT_EQ(interrupt_signal_name(), "SIGTERM");
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(sleep_unless_interrupted(std::chrono::seconds(30)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // The pipe stays readable for the next poller too.
  pollfd fd{interrupt_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&fd, 1, 0), 1);
  // A second signal does not overwrite the first.
  ASSERT_EQ(std::raise(SIGINT), 0);
  EXPECT_EQ(interrupt_signal(), SIGTERM);
}

} // namespace
} // namespace kiln
