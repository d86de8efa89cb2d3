#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "util/loopback.h"

namespace kiln::testing {

/// A real registry (Debian's `docker-registry`, the CNCF distribution server) on a free
/// loopback port, storing under `dir`, for as long as this object lives. Plain HTTP: clients
/// push with `--tls-verify=false`.
class LocalRegistry {
public:
  explicit LocalRegistry(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir / "data");
    m_port = free_loopback_port();
    std::ofstream(dir / "config.yml")
        << "version: 0.1\n"
        << "log:\n  level: warn\n"
        << "storage:\n  filesystem:\n    rootdirectory: " << (dir / "data").string() << "\n"
        << "http:\n  addr: 127.0.0.1:" << m_port << "\n";
    std::string config = (dir / "config.yml").string();
    std::string log = (dir / "registry.log").string();
    m_pid = ::fork();
    if (m_pid == 0) {
      FILE* out = std::freopen(log.c_str(), "w", stdout);
      if (out != nullptr && ::dup2(::fileno(stdout), 2) == 2) {
        ::execlp("docker-registry", "docker-registry", "serve", config.c_str(), nullptr);
      }
      ::_exit(127);
    }
    // Ready once it accepts a connection; it answers within a second on an idle host.
    for (int tries = 0; tries < 200 && !m_ready; ++tries) {
      m_ready = loopback_accepts(m_port);
      if (!m_ready) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    EXPECT_TRUE(m_ready) << "docker-registry did not listen on 127.0.0.1:" << m_port
                         << " (is Debian's docker-registry installed?); its log: " << log;
  }

  ~LocalRegistry() {
    if (m_pid > 0) {
      ::kill(m_pid, SIGTERM);
      ::waitpid(m_pid, nullptr, 0);
    }
  }

  LocalRegistry(const LocalRegistry&) = delete;
  LocalRegistry& operator=(const LocalRegistry&) = delete;

  bool ready() const { return m_ready; }
  /// `127.0.0.1:<port>`, the host part of a reference in it.
  std::string host() const { return "127.0.0.1:" + std::to_string(m_port); }

private:
  int m_port = 0;
  pid_t m_pid = -1;
  bool m_ready = false;
};

} // namespace kiln::testing
