// util/process against real processes and signals.
#include <chrono>
#include <fstream>
#include <thread>

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "util/process.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

ProcessExit run_sh(const std::string& script, std::string& output) {
  return run_process({{"sh", "-c", script}, {}, {}},
                     [&](std::string_view chunk) { output += chunk; });
}

/// Run a script that prints "ready" once its traps are set, and interrupt it then.
ProcessExit interrupt_when_ready(const std::string& script, std::string& output,
                                 std::chrono::milliseconds grace) {
  CancelToken ctrl_c;
  ProcessSpec spec{{"sh", "-c", script}, {}, {}};
  spec.cancel = &ctrl_c;
  spec.grace = grace;
  return run_process(spec, [&](std::string_view chunk) {
    output += chunk;
    if (output.find("ready") != std::string::npos && !ctrl_c.cancelled()) {
      ctrl_c.cancel();
    }
  });
}

bool process_running(const std::string& needle) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : cmdline) {
      c = c == '\0' ? ' ' : c;
    }
    if (cmdline.find(needle) != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST(Process, MergesBothStreamsInWriteOrderAndReportsTheExitCode) {
  std::string output;
  ProcessExit exit = run_sh("echo one; echo two >&2; echo three; exit 3", output);
  EXPECT_EQ(output, "one\ntwo\nthree\n");
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_FALSE(exit.ok());
  EXPECT_EQ(exit.status_code(), 3);
}

TEST(Process, ReportsDeathBySignalLikeAShell) {
  std::string output;
  ProcessExit exit = run_sh("kill -KILL $$", output);
  EXPECT_EQ(exit.term_signal, SIGKILL);
  EXPECT_EQ(exit.status_code(), 137);
}

TEST(Process, KillsWhatTheLeaderLeftInItsGroup) {
  std::string output;
  // The background sleep keeps the output pipe open: without the group kill this would hang.
  ProcessExit exit = run_sh("sleep 4321 & echo started", output);
  EXPECT_TRUE(exit.ok());
  EXPECT_EQ(output, "started\n");
  for (int i = 0; i < 100 && process_running("sleep 4321"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(process_running("sleep 4321"));
}

TEST(Process, AnOutputHandlerThatThrowsLeavesNoChildBehind) {
  ProcessSpec spec{{"sh", "-c", "echo started; exec sleep 4322"}};
  EXPECT_THROW(run_process(spec, [](std::string_view) { throw std::runtime_error("full"); }),
               std::runtime_error);
  // Killed and reaped before the exception left run_process: nothing to wait for.
  EXPECT_FALSE(process_running("sleep 4322"));
}

TEST(Process, InterruptSendsSigintToTheGroup) {
  std::string output;
  ProcessExit exit = interrupt_when_ready("trap 'echo got-int; exit 5' INT; echo ready; "
                                          "while true; do sleep 0.1; done",
                                          output, std::chrono::seconds(10));
  EXPECT_TRUE(exit.interrupted);
  EXPECT_EQ(exit.exit_code, 5);
  EXPECT_EQ(output, "ready\ngot-int\n");
}

TEST(Process, InterruptEscalatesToSigkillAfterTheGrace) {
  std::string output;
  ProcessExit exit = interrupt_when_ready("trap '' INT; echo ready; sleep 8765", output,
                                          std::chrono::milliseconds(200));
  EXPECT_TRUE(exit.interrupted);
  EXPECT_EQ(exit.term_signal, SIGKILL);
}

TEST(Process, TimeoutStopsTheGroupLikeAnInterrupt) {
  std::string output;
  ProcessSpec spec{{"sh", "-c",
                    "trap 'echo got-int; exit 6' INT; echo started; "
                    "while true; do sleep 0.05; done"},
                   {},
                   {},
                   std::chrono::milliseconds(300)};
  ProcessExit exit = run_process(spec, [&](std::string_view chunk) { output += chunk; });
  EXPECT_TRUE(exit.timed_out);
  EXPECT_FALSE(exit.interrupted);
  EXPECT_EQ(exit.exit_code, 6);
  EXPECT_EQ(output, "started\ngot-int\n");
}

TEST(Process, PassesEnvironmentAndWorkingDirectory) {
  std::string output;
  ProcessExit exit = run_process(
      {{"sh", "-c", "echo $KILN_TEST_VALUE; pwd"}, {{"KILN_TEST_VALUE", "forty two"}}, "/tmp"},
      [&](std::string_view chunk) { output += chunk; });
  EXPECT_TRUE(exit.ok());
  EXPECT_EQ(output, "forty two\n/tmp\n");
}

TEST(Process, MissingProgramIsASpawnErrorNamingIt) {
  ProcessExit exit = run_process({{"kiln-no-such-program"}, {}, {}}, [](std::string_view) {});
  EXPECT_NE(exit.spawn_error.find("kiln-no-such-program"), std::string::npos);
  EXPECT_FALSE(exit.ok());
}

TEST(Process, CaptureOutputQuotesTheFailure) {
  auto ok = capture_output({"sh", "-c", "echo fine"});
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, "fine\n");
  auto failed = capture_output({"sh", "-c", "echo broken >&2; exit 4"});
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error(), "sh -c echo broken >&2; exit 4 exited with 4: broken");
}

TEST(Process, ASecondCancelKillsAtOnceWhatIgnoresTheFirst) {
  CancelToken ctrl_c;
  std::string output;
  ProcessSpec spec{{"sh", "-c", "trap '' INT; echo ready; sleep 8765"}, {}, {}};
  spec.cancel = &ctrl_c;
  // A grace no test would wait out: only the escalation can end this in time for ctest.
  spec.grace = std::chrono::hours(1);
  ProcessExit exit = run_process(spec, [&](std::string_view chunk) {
    output += chunk;
    if (output == "ready\n") {
      ctrl_c.cancel();
      ctrl_c.cancel();
    }
  });
  EXPECT_TRUE(exit.interrupted);
  EXPECT_EQ(exit.term_signal, SIGKILL);
}

TEST(Process, ACancelledTokenStartsNothing) {
  CancelToken ctrl_c;
  ctrl_c.cancel();
  ProcessSpec spec{{"sh", "-c", "echo ran"}, {}, {}};
  spec.cancel = &ctrl_c;
  std::string output;
  ProcessExit exit = run_process(spec, [&](std::string_view chunk) { output += chunk; });
  EXPECT_TRUE(exit.interrupted);
  EXPECT_FALSE(exit.ok());
  EXPECT_EQ(output, "");
}

TEST(Process, AStallStopsTheGroupAndSaysHowLongItWasSilent) {
  std::string output;
  ProcessSpec spec{{"sh", "-c", "trap 'exit 7' INT; echo started; sleep 30 & wait"}, {}, {}};
  spec.stall_timeout = std::chrono::milliseconds(300);
  ProcessExit exit = run_process(spec, [&](std::string_view chunk) { output += chunk; });
  EXPECT_TRUE(exit.stalled);
  EXPECT_FALSE(exit.timed_out);
  EXPECT_GE(exit.silent_for, std::chrono::milliseconds(300));
  EXPECT_EQ(output, "started\n");
}

/// In a child process, so the process-wide interrupt token of this binary stays untouched: a
/// command started without a token of its own (a pull, an inspect, a prune) stops at Ctrl-C.
TEST(Process, CtrlCReachesACommandStartedWithoutAToken) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    install_interrupt_handlers();
    std::thread ctrl_c([] {
      while (!process_running("sleep 6543")) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ::kill(::getpid(), SIGINT);
    });
    CapturedRun run = run_captured({"sh", "-c", "sleep 6543"});
    ctrl_c.join();
    ::_exit(run.exit.interrupted && !run.exit.ok() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(process_running("sleep 6543"));
}

/// A kiln killed with SIGKILL runs no cleanup; the sentinel still kills the groups it started.
TEST(Process, NothingKilnStartedOutlivesKilnKilledBySigkill) {
  int relay[2];
  ASSERT_EQ(::pipe(relay), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(relay[0]);
    // A RUN step's shape: a leader and a grandchild in the leader's group. Its output reaches
    // the parent only through run_process's reader, which starts after the group is watched:
    // that is what tells the parent the kill can come.
    run_process({{"sh", "-c", "sleep 5432 & echo started; sleep 5433; wait"}, {}, {}},
                [&](std::string_view chunk) {
                  [[maybe_unused]] ssize_t n = ::write(relay[1], chunk.data(), chunk.size());
                });
    ::_exit(0);
  }
  ::close(relay[1]);
  std::string relayed;
  char buffer[64];
  while (relayed.find("started") == std::string::npos) {
    ssize_t n = ::read(relay[0], buffer, sizeof buffer);
    ASSERT_GT(n, 0) << "the child ended before its command said it had started";
    relayed.append(buffer, static_cast<size_t>(n));
  }
  ::close(relay[0]);
  while (!process_running("sleep 5433")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  // SIGKILL lands at once, but a process takes a moment to leave the process table.
  for (int i = 0; i < 200 && (process_running("sleep 5432") || process_running("sleep 5433"));
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(process_running("sleep 5432"));
  EXPECT_FALSE(process_running("sleep 5433"));
}

TEST(LineSplitter, ALineLongerThanTheCapIsHandedOnCutAndTheNextOneWhole) {
  std::vector<std::string> lines;
  LineSplitter splitter([&](std::string_view line) { lines.emplace_back(line); }, 8);
  splitter.feed(std::string(5, 'a'));
  splitter.feed(std::string(1 << 20, 'b') + "\nnext\n");
  splitter.finish();
  EXPECT_EQ(lines, (std::vector<std::string>{"aaaaabbb", "next"}));
}

TEST(LineSplitter, JoinsChunksAndStripsCarriageReturns) {
  std::vector<std::string> lines;
  LineSplitter splitter([&](std::string_view line) { lines.emplace_back(line); });
  splitter.feed("ab");
  splitter.feed("c\r\nd\n\ne");
  splitter.finish();
  EXPECT_EQ(lines, (std::vector<std::string>{"abc", "d", "", "e"}));
}

} // namespace
} // namespace kiln
