// The fatal path: an exception escaping a thread still records the run and exits 70.
#include "driver/crash.h"

#include <fstream>
#include <stdexcept>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "driver/run_loop.h"
#include "temp_dir.h"

namespace kiln {
namespace {

TEST(Crash, AnExceptionEscapingAThreadIsRecordedAndEndsWithTheCrashExitCode) {
  testing::TempDir dir;
  std::string record = (dir.path() / "recorded").string();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    install_crash_handler();
    set_crash_recorder(
        [&](const std::string& reason) { std::ofstream(record) << "crashed: " << reason; });
    std::thread worker([] { throw std::runtime_error("a worker's failure"); });
    worker.join();
    ::_exit(0); // not reached: the exception ends the process through std::terminate
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal: a core dump instead of a record";
  EXPECT_EQ(WEXITSTATUS(status), k_exit_crash);
  EXPECT_EQ(dir.read("recorded"), "crashed: a worker's failure");
}

TEST(Crash, WithoutARunTheReasonIsStillTheExitCode) {
  EXPECT_EQ(report_crash("nothing to record"), k_exit_crash);
}

} // namespace
} // namespace kiln
