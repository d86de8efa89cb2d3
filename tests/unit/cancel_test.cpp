// util/cancel with real signals.
#include <chrono>
#include <csignal>

#include <poll.h>

#include <gtest/gtest.h>

#include "util/cancel.h"

namespace kiln {
namespace {

TEST(Cancel, EachCancelEscalatesOneLevelAndTheFdStaysReadable) {
  CancelToken token;
  ASSERT_GE(token.fd(), 0);
  EXPECT_EQ(token.level(), CancelLevel::none);
  EXPECT_TRUE(token.sleep_for(std::chrono::milliseconds(1)));
  token.cancel();
  EXPECT_EQ(token.level(), CancelLevel::stop);
  EXPECT_FALSE(token.sleep_for(std::chrono::seconds(30)));
  pollfd fd{token.fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&fd, 1, 0), 1);
  token.cancel();
  EXPECT_EQ(token.level(), CancelLevel::kill);
  token.cancel();
  EXPECT_EQ(token.level(), CancelLevel::kill);
}

TEST(Cancel, SigtermCancelsTheInterruptTokenAndASecondSignalEscalates) {
  install_interrupt_handlers();
  CancelToken& token = interrupt_token();
  EXPECT_EQ(interrupt_signal(), 0);
  EXPECT_EQ(interrupt_signal_name(), "");
  EXPECT_TRUE(token.sleep_for(std::chrono::milliseconds(1)));

  ASSERT_EQ(std::raise(SIGTERM), 0);
  EXPECT_EQ(interrupt_signal(), SIGTERM);
  EXPECT_EQ(interrupt_signal_name(), "SIGTERM");
  EXPECT_EQ(token.level(), CancelLevel::stop);
  EXPECT_FALSE(token.sleep_for(std::chrono::seconds(30)));
  // The pipe stays readable for the next poller too.
  pollfd fd{token.fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&fd, 1, 0), 1);
  // A second signal escalates but does not overwrite which came first.
  ASSERT_EQ(std::raise(SIGINT), 0);
  EXPECT_EQ(interrupt_signal(), SIGTERM);
  EXPECT_EQ(token.level(), CancelLevel::kill);
}

} // namespace
} // namespace kiln
