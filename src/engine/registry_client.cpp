#include "engine/registry_client.h"

#include <fmt/format.h>

#include "engine/engine.h"
#include "engine/image_config.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/strings.h"

namespace kiln {

std::vector<std::string> RegistryClient::tls(const char* flag) const {
  return {fmt::format("--{}={}", flag, m_options.tls_verify ? "true" : "false")};
}

tl::expected<void, std::string> RegistryClient::run(std::vector<std::string> argv,
                                                    const std::filesystem::path& stdout_file) {
  const std::string shown = quoted_command(argv);
  if (m_options.log) {
    m_options.log("$ " + shown + "\n");
  }
  std::string output;
  ProcessSpec spec{std::move(argv)};
  spec.cancel = m_options.cancel;
  spec.stall_timeout = m_options.stall_timeout;
  spec.stdout_file = stdout_file;
  ProcessExit exit = run_process(spec, [&](std::string_view chunk) {
    output.append(chunk);
    if (m_options.log) {
      m_options.log(chunk);
    }
  });
  m_interrupted = exit.interrupted;
  if (exit.ok()) {
    return {};
  }
  m_tail.clear();
  for (const auto& line : split(output, '\n')) {
    if (!line.empty()) {
      m_tail.push_back(line);
    }
  }
  if (m_tail.size() > k_failure_tail_lines) {
    m_tail.erase(m_tail.begin(), m_tail.end() - static_cast<long>(k_failure_tail_lines));
  }
  return tl::unexpected(fmt::format("`{}` failed: {}", shown, CapturedRun{exit, output}.failure()));
}

tl::expected<void, std::string> RegistryClient::push(const std::filesystem::path& layout,
                                                     const std::string& name,
                                                     const std::string& destination) {
  std::vector<std::string> argv = {"skopeo", "copy", "--all", "--preserve-digests", "--quiet"};
  auto verify = tls("dest-tls-verify");
  argv.insert(argv.end(), verify.begin(), verify.end());
  argv.insert(argv.end(), {"--", "oci:" + layout.string() + ":" + name, "docker://" + destination});
  return run(std::move(argv));
}

tl::expected<std::string, std::string> RegistryClient::manifest(const std::string& reference) {
  std::filesystem::path answer = m_options.scratch / "manifest.raw";
  std::vector<std::string> argv = {"skopeo", "inspect", "--raw"};
  auto verify = tls("tls-verify");
  argv.insert(argv.end(), verify.begin(), verify.end());
  argv.insert(argv.end(), {"--", "docker://" + reference});
  if (auto ran = run(std::move(argv), answer); !ran) {
    return tl::unexpected(ran.error());
  }
  auto text = read_file(answer, k_image_json_limit);
  std::error_code ignored;
  std::filesystem::remove(answer, ignored);
  return text;
}

tl::expected<void, std::string> RegistryClient::copy(const std::string& from,
                                                     const std::string& to) {
  std::vector<std::string> argv = {"skopeo", "copy", "--all", "--preserve-digests", "--quiet"};
  for (const char* flag : {"src-tls-verify", "dest-tls-verify"}) {
    auto verify = tls(flag);
    argv.insert(argv.end(), verify.begin(), verify.end());
  }
  argv.insert(argv.end(), {"--", "docker://" + from, "docker://" + to});
  return run(std::move(argv));
}

tl::expected<void, std::string> RegistryClient::fetch(const std::string& reference,
                                                      const std::filesystem::path& layout,
                                                      const std::string& name) {
  std::vector<std::string> argv = {"skopeo", "copy", "--preserve-digests", "--quiet"};
  auto verify = tls("src-tls-verify");
  argv.insert(argv.end(), verify.begin(), verify.end());
  argv.insert(argv.end(), {"--", "docker://" + reference, "oci:" + layout.string() + ":" + name});
  return run(std::move(argv));
}

} // namespace kiln
