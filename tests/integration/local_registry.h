#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
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

  /// The bytes the registry serves for `repository`'s manifest `reference` (a tag or digest),
  /// "" when it serves none: the distribution API, read here without any client of kiln's.
  std::string manifest(const std::string& repository, const std::string& reference) const {
    return get("/v2/" + repository + "/manifests/" + reference);
  }

  /// A blob of `repository` by its digest; "" when there is none.
  std::string blob(const std::string& repository, const std::string& digest) const {
    return get("/v2/" + repository + "/blobs/" + digest);
  }

  /// Put `bytes` as `repository`'s manifest `tag`: what a tampering hand does to an index.
  bool put_manifest(const std::string& repository, const std::string& tag, const std::string& bytes,
                    const std::string& media_type) const {
    std::string response = exchange(
        "PUT /v2/" + repository + "/manifests/" + tag + " HTTP/1.1\r\nHost: " + host() +
        "\r\nContent-Type: " + media_type + "\r\nContent-Length: " + std::to_string(bytes.size()) +
        "\r\nConnection: close\r\n\r\n" + bytes);
    return response.starts_with("HTTP/1.1 201");
  }
  /// `127.0.0.1:<port>`, the host part of a reference in it.
  std::string host() const { return "127.0.0.1:" + std::to_string(m_port); }

private:
  std::string get(const std::string& path) const {
    std::string response =
        exchange("GET " + path + " HTTP/1.1\r\nHost: " + host() +
                 "\r\nAccept: application/vnd.oci.image.index.v1+json, "
                 "application/vnd.oci.image.manifest.v1+json, */*\r\nConnection: close\r\n\r\n");
    if (!response.starts_with("HTTP/1.1 200")) {
      return {};
    }
    size_t body = response.find("\r\n\r\n");
    return body == std::string::npos ? std::string() : response.substr(body + 4);
  }

  /// One HTTP/1.1 request and the whole response, the connection closed by the server.
  std::string exchange(const std::string& request) const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(m_port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string response;
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
        ::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
      char buffer[65536];
      for (ssize_t got; (got = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) {
        response.append(buffer, static_cast<size_t>(got));
      }
    }
    if (fd >= 0) {
      ::close(fd);
    }
    return response;
  }

  int m_port = 0;
  pid_t m_pid = -1;
  bool m_ready = false;
};

} // namespace kiln::testing
