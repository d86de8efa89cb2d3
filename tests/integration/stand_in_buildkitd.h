#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kiln::testing {

/// No buildkitd runs on test hosts, and the fake buildctl answers in its place; what kiln asks
/// the daemon itself, where it keeps its store, it learns from the process behind the socket.
/// This is that process: it listens on `socket` with a command line reading `buildkitd ...
/// <args>` (a shell run under that name, blocked on reading a pipe held here, so it lives as
/// long as this object).
class StandInBuildkitd {
public:
  /// `name` is the process's argv[0]: another name stands for another listener (systemd's
  /// socket activation, a proxy).
  StandInBuildkitd(const std::filesystem::path& socket, const std::vector<std::string>& args,
                   const std::string& name = "buildkitd") {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string path = socket.string();
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    std::vector<std::string> argv = {name, "-c", "read line", "buildkitd"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (std::string& arg : argv) {
      raw.push_back(arg.data());
    }
    raw.push_back(nullptr);
    // Both pipes close on exec: the shell's stdin is a dup2 of one, and `ready` reads end of
    // file once the exec succeeded, which is when the socket listens under the new name.
    int feed[2];
    int ready[2];
    EXPECT_EQ(::pipe2(feed, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(ready, O_CLOEXEC), 0);
    m_pid = ::fork();
    if (m_pid == 0) {
      // Only async-signal-safe calls between fork and exec. The socket listens in this
      // process, so its peer credentials name the pid the shell then runs as.
      int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      if (fd >= 0 && ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 &&
          ::listen(fd, 128) == 0 && ::dup2(feed[0], 0) == 0) {
        ::execv("/bin/sh", raw.data());
      }
      [[maybe_unused]] ssize_t n = ::write(ready[1], "x", 1);
      ::_exit(127);
    }
    ::close(feed[0]);
    ::close(ready[1]);
    m_feed = feed[1];
    char failed = 0;
    EXPECT_EQ(::read(ready[0], &failed, 1), 0) << "the stand-in buildkitd did not start";
    ::close(ready[0]);
  }
  StandInBuildkitd(const StandInBuildkitd&) = delete;
  StandInBuildkitd& operator=(const StandInBuildkitd&) = delete;
  ~StandInBuildkitd() {
    ::close(m_feed);
    int status = 0;
    ::waitpid(m_pid, &status, 0);
  }

  pid_t pid() const { return m_pid; }

private:
  pid_t m_pid = -1;
  int m_feed = -1;
};

} // namespace kiln::testing
