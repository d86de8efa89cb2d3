// How a run ends when its terminal goes away or stops reading, against real buildah builds: the
// signals a closed terminal or a dead reader sends (SIGHUP, SIGQUIT, SIGPIPE) and a stdout pipe
// nobody drains.
#include <csignal>
#include <cstring>
#include <functional>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "kiln_harness.h"
#include "util/time.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

/// Run `dir`'s chain and, once `step` runs and its manifest says `ready`, send kiln `signal`.
KilnResult run_signalled(const ChainDir& dir, const std::string& step, int signal,
                         const std::function<bool(const json&)>& ready = nullptr) {
  std::thread sender([&] {
    ASSERT_TRUE(wait_for_process(step)) << "the step never ran";
    for (int tries = 0; ready && !ready(dir.latest_manifest()); ++tries) {
      ASSERT_LT(tries, 600) << "the manifest never said so: " << dir.latest_manifest().dump(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    // kiln itself, by the pid its record names: its sentinel (a fork, the same command line)
    // must outlive it, as it does when a user or the OOM killer kills kiln.
    int pid = dir.latest_manifest()["pid"];
    ASSERT_GT(pid, 0);
    ::kill(pid, signal);
  });
  KilnResult result = dir.kiln({"run", (dir.path() / "chain.toml").string()});
  sender.join();
  return result;
}

TEST(RunSignals, AClosedTerminalOrCtrlBackslashEndsTheRunRecordedWithItsSignal) {
  for (int signal : {SIGHUP, SIGQUIT}) {
    std::string name = std::string("SIG") + sigabbrev_np(signal);
    SCOPED_TRACE(name);
    ChainDir dir;
    std::string sleep = "sleep 7" + dir.nonce().substr(0, 3);
    write_two_stage_chain(dir, "RUN echo started; " + sleep + "\n");
    // Under SIGHUP a smoke stage guards both stages; under SIGQUIT none does, so base's stable
    // name moves as it ends, while work still builds.
    bool guarded = signal == SIGHUP;
    if (guarded) {
      dir.write("check.Dockerfile", "FROM work\nRUN echo 1 passed\n");
      dir.write("chain.toml", dir.read("chain.toml") +
                                  "[[stage]]\nname = \"check\"\nkind = \"smoke\"\n"
                                  "dockerfile = \"check.Dockerfile\"\nneeds = [\"work\"]\n");
    }

    KilnResult result = run_signalled(dir, sleep, signal, [&](const json& manifest) {
      return guarded || manifest["stages"][0]["tag_moved"].get<bool>();
    });
    EXPECT_EQ(result.exit_code, 130) << result.output;
    json manifest = dir.latest_manifest();
    EXPECT_EQ(manifest["status"], "interrupted");
    EXPECT_EQ(manifest["status_reason"], "interrupted by " + name);
    EXPECT_FALSE(manifest["ended"].get<std::string>().empty());
    json work = manifest["stages"][1];
    EXPECT_EQ(work["status"], "interrupted");
    EXPECT_EQ(work["attempts"][0]["verdict"], "interrupted");
    EXPECT_EQ(work["attempts"][0]["reason"],
              "interrupted by " + name + "; the engine's process group was stopped");
    std::string log = dir.read("records/latest/driver.log");
    auto interrupted = log.find("interrupted by " + name);
    EXPECT_NE(interrupted, std::string::npos);
    json done = manifest["stages"][0];
    EXPECT_EQ(done["status"], "ok");
    EXPECT_EQ(log.find("was not moved"), std::string::npos) << log;
    if (guarded) {
      // Its smoke stage never ran: the stable name stays, for a reason, not a fault.
      EXPECT_FALSE(done["tag_moved"].get<bool>());
      EXPECT_EQ(done["tag_held"], "the run was interrupted");
      EXPECT_NE(log.find("stays where it was: the run was interrupted"), std::string::npos) << log;
    } else {
      // Moved before the signal, while work built; the interrupt takes nothing back.
      EXPECT_TRUE(done["tag_moved"].get<bool>());
      EXPECT_EQ(done["tag_held"], "");
      auto moved = log.find("stage base: localhost/t" + dir.nonce() + "-base:latest now names ");
      EXPECT_LT(moved, interrupted) << log;
    }
    EXPECT_TRUE(wait_for_no_process(sleep)) << "the RUN outlived kiln";
    EXPECT_TRUE(wait_for_no_process(dir.path().string() + "/work.Dockerfile"))
        << "buildah outlived kiln";
  }
}

TEST(RunSignals, SigpipeAndAReaderThatWentAwayLeaveTheRunToEndWhole) {
  {
    ChainDir dir;
    std::string step = "echo done-" + dir.nonce();
    write_two_stage_chain(dir, "RUN echo started; sleep 3; " + step + "\n");
    KilnResult result = run_signalled(dir, step, SIGPIPE);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_EQ(dir.latest_manifest()["status"], "ok");
  }
  {
    // `kiln run | true`: the reader is gone before kiln's first line, every write fails with
    // EPIPE, and the run goes on to its end; pipefail gives kiln's own exit code.
    ChainDir dir;
    write_two_stage_chain(dir, "RUN echo " + dir.nonce() + "\n");
    ProcessSpec spec{{"bash", "-o", "pipefail", "-c", "\"$0\" run chain.toml | true", KILN_BINARY},
                     {},
                     dir.path()};
    std::string shown;
    ProcessExit exit = run_process(spec, [&](std::string_view chunk) { shown += chunk; });
    EXPECT_EQ(exit.status_code(), 0) << shown;
    json manifest = dir.latest_manifest();
    EXPECT_EQ(manifest["status"], "ok");
    EXPECT_EQ(manifest["stages"][1]["status"], "ok");
  }
}

TEST(RunSignals, WhatASigkilledRunLeftIsListedAndTheNextRunRemovesIt) {
  ChainDir dir;
  std::string sleep = "sleep 7" + dir.nonce().substr(0, 3);
  write_two_stage_chain(dir, "RUN echo started; " + sleep + "\n");
  KilnResult killed = run_signalled(dir, sleep, SIGKILL);
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL);
  // kiln's sentinel kills the build's process group; buildah had no chance to clean up.
  ASSERT_TRUE(wait_for_no_process(sleep));
  ASSERT_TRUE(wait_for_no_process(dir.path().string() + "/work.Dockerfile"));

  KilnResult status = dir.kiln({"disk", "status", "chain.toml"});
  ASSERT_EQ(status.exit_code, 0) << status.output;
  auto listed = status.output.find("leftovers of earlier runs: ");
  ASSERT_NE(listed, std::string::npos) << status.output;
  EXPECT_NE(status.output.find(
                "kiln disk reclaim removes them, and so does the next run after one that was "
                "killed or crashed",
                listed),
            std::string::npos)
      << status.output;
  EXPECT_NE(status.output.find("  buildah working container ", listed), std::string::npos)
      << status.output;
  EXPECT_NE(status.output.find("  temporary folder ", listed), std::string::npos) << status.output;

  // The next run marks the killed one abandoned and removes what it left, then builds.
  write_two_stage_chain(dir, "RUN echo " + dir.nonce() + "\n");
  KilnResult next = dir.kiln({"run", "chain.toml"});
  ASSERT_EQ(next.exit_code, 0) << next.output;
  EXPECT_NE(next.output.find("leftovers: removed buildah working container "), std::string::npos)
      << next.output;
  EXPECT_NE(next.output.find("leftovers: removed temporary folder "), std::string::npos)
      << next.output;
  KilnResult after = dir.kiln({"disk", "status", "chain.toml"});
  EXPECT_NE(after.output.find("leftovers of earlier runs: none"), std::string::npos)
      << after.output;
}

TEST(RunSignals, AStdoutNobodyReadsNeverHoldsABuild) {
  ChainDir dir;
  // A megabyte of output, then more steps than kiln's step lines fit in the pipe: with a console
  // that waits for its reader, the stage would wait with it.
  std::string body = "RUN yes 'a line of build output' | head -c 1048576\n";
  for (int i = 0; i < 48; ++i) {
    body += "ENV STEP_" + std::to_string(i) + "=" + std::string(80, 'x') + "\n";
  }
  write_two_stage_chain(dir, body);
  std::string fifo = (dir.path() / "console").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  // Opened for reading first (so kiln's open does not wait), shrunk to a page, never read.
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0) << std::strerror(errno);
  ::fcntl(reader, F_SETPIPE_SZ, 4096);

  ProcessExit exit;
  std::thread run([&] {
    ProcessSpec spec{
        {"sh", "-c", "exec \"$0\" run chain.toml >console 2>&1", KILN_BINARY}, {}, dir.path()};
    exit = run_process(spec, [](std::string_view) {});
  });
  // The run ends while nothing reads: its record says so before the reader starts.
  json manifest;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    manifest = nlohmann::json::parse(dir.read("records/latest/manifest.json"), nullptr, false);
    if (manifest.is_object() && !manifest["ended"].get<std::string>().empty()) {
      break;
    }
  }
  std::string reading_from = utc_iso8601(std::chrono::system_clock::now());
  ASSERT_TRUE(manifest.is_object() && !manifest["ended"].get<std::string>().empty())
      << "the run did not end while its output was not read";
  EXPECT_EQ(manifest["status"], "ok");
  EXPECT_LE(manifest["stages"][1]["ended"].get<std::string>(), reading_from);
  EXPECT_GE(dir.read("records/latest/stages/work.attempt-1.log").size(), 1048576u);

  // Read now: kiln writes what it held, the summary last, and exits.
  ::fcntl(reader, F_SETFL, 0);
  std::string shown;
  char buffer[65536];
  ssize_t got = 0;
  while ((got = ::read(reader, buffer, sizeof buffer)) > 0) {
    shown.append(buffer, static_cast<size_t>(got));
  }
  ::close(reader);
  run.join();
  EXPECT_EQ(exit.status_code(), 0) << shown;
  EXPECT_NE(shown.find(": ENV STEP_47="), std::string::npos) << shown;
  EXPECT_NE(shown.find("kiln: run " + manifest["run_id"].get<std::string>() + " ok"),
            std::string::npos)
      << shown;
}

} // namespace
} // namespace kiln::testing
