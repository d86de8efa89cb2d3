// What ships is what was checked, against real buildah and Debian's docker-registry: a chain of
// two lanes (amd64, arm64) whose final images are built from files only, published as one
// index with an attestation manifest per platform, signed with openssl by the chain's hooks.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "html_elements.h"
#include "kiln_harness.h"
#include "local_registry.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/sha256.h"
#include "util/strings.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

const std::filesystem::path k_fixtures = KILN_TEST_FIXTURES;

/// (name, arch, version) of every package dpkg-query says is installed per the status file in
/// `admin_dir`: the reference an SBOM's dpkg packages are held against.
std::set<std::string> dpkg_query_installed(const std::filesystem::path& admin_dir) {
  auto listed = capture_output({"dpkg-query", "--admindir=" + admin_dir.string(), "-W", "-f",
                                "${db:Status-Status}\t${Package}\t${Architecture}\t${Version}\n"});
  EXPECT_TRUE(listed) << (listed ? "" : listed.error());
  std::set<std::string> installed;
  for (const auto& line : split(listed ? *listed : "", '\n')) {
    if (line.starts_with("installed\t")) {
      installed.insert(line.substr(std::string("installed\t").size()));
    }
  }
  return installed;
}

/// The chain: `base` copies the lane's tool (an ELF of the lane's machine), a dpkg status file
/// and an os-release; `final` builds on it with a command of its own; `smoke` runs its check
/// with a busybox of its own (the host's, which runs in either lane's build). The index goes
/// to `registry`, signed and verified with an openssl key pair by `[publish] sign` / `verify`.
struct PublishedChain {
  /// `host`: where the chain pushes, the registry's own address unless a proxy stands before it.
  PublishedChain(const ChainDir& dir, const LocalRegistry& registry, const std::string& host = "")
      : dir(dir), registry(registry), repository("pub" + dir.nonce() + "/app"),
        index((host.empty() ? registry.host() : host) + "/" + repository + ":1.0") {
    std::filesystem::copy_file("/bin/busybox", dir.path() / "tool-amd64");
    std::filesystem::copy_file(k_fixtures / "elf" / "aarch64.head", dir.path() / "tool-arm64");
    std::filesystem::copy_file("/var/lib/dpkg/status", dir.path() / "status");
    dir.write("os-release", "ID=debian\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Debian GNU/Linux 12\"\n");
    dir.write("base.Dockerfile", "FROM scratch\nARG TOOL\nCOPY ${TOOL} /usr/bin/tool\n"
                                 "COPY status /var/lib/dpkg/status\n"
                                 "COPY os-release /etc/os-release\n");
    dir.write("final.Dockerfile", "FROM base\nCMD [\"/usr/bin/tool\"]\n");
    smoke("1 passed, 0 failed, 0 skipped", 0);
    EXPECT_EQ(run_captured({"openssl", "genpkey", "-algorithm", "ed25519", "-out",
                            (dir.path() / "signing.key").string()})
                  .exit.status_code(),
              0);
    EXPECT_EQ(run_captured({"openssl", "pkey", "-in", (dir.path() / "signing.key").string(),
                            "-pubout", "-out", (dir.path() / "signing.pub").string()})
                  .exit.status_code(),
              0);
    // The signature is of the published reference by digest, what a consumer checks.
    dir.write("sign.sh", "#!/bin/sh\nset -e\nprintf %s \"$1\" > signed.txt\n"
                         "openssl pkeyutl -sign -inkey signing.key -rawin -in signed.txt -out "
                         "signature.bin\n");
    dir.write("verify.sh", "#!/bin/sh\nset -e\nprintf %s \"$1\" > verified.txt\n"
                           "openssl pkeyutl -verify -pubin -inkey signing.pub -rawin -in "
                           "verified.txt -sigfile signature.bin\n");
    dir.write("chain.toml", "[chain]\nname = \"pub" + dir.nonce() +
                                "\"\nfinal = \"final\"\n\n"
                                "[defaults]\ncooldown_s = 0\nattempts = 2\n\n"
                                "[publish]\nindex = \"" +
                                index +
                                "\"\ntls_verify = false\n"
                                "sign = [\"sh\", \"sign.sh\", \"{ref}@{digest}\"]\n"
                                "verify = [\"sh\", \"verify.sh\", \"{ref}@{digest}\"]\n\n"
                                "[[lane]]\nname = \"amd64\"\nplatform = \"linux/amd64\"\n"
                                "build_args = { TOOL = \"tool-amd64\" }\n\n"
                                "[[lane]]\nname = \"arm64\"\nplatform = \"linux/arm64\"\n"
                                "build_args = { TOOL = \"tool-arm64\" }\n\n"
                                "[[stage]]\nname = \"base\"\ndockerfile = \"base.Dockerfile\"\n\n"
                                "[[stage]]\nname = \"final\"\ndockerfile = \"final.Dockerfile\"\n"
                                "needs = [\"base\"]\n\n"
                                "[[stage]]\nname = \"smoke\"\nkind = \"smoke\"\n"
                                "dockerfile = \"smoke.Dockerfile\"\nneeds = [\"final\"]\n");
  }

  /// The smoke stage prints `summary` and exits with `status`.
  void smoke(const std::string& summary, int status) const {
    dir.write("smoke.Dockerfile",
              "FROM final\nCOPY busybox /smoke/busybox\n"
              "RUN [\"/smoke/busybox\", \"sh\", \"-c\", \"test -s /var/lib/dpkg/status && echo '" +
                  summary + "' && exit " + std::to_string(status) + "\"]\n");
  }

  KilnResult run(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {"run", "chain.toml"};
    args.insert(args.end(), extra.begin(), extra.end());
    return dir.kiln(args);
  }

  json served(const std::string& reference) const {
    std::string text = registry.manifest(repository, reference);
    return text.empty() ? json() : json::parse(text);
  }

  json statement(const std::string& attestation, const std::string& predicate_type) const {
    json manifest = served(attestation);
    for (const auto& layer : manifest["layers"]) {
      if (layer["annotations"]["in-toto.io/predicate-type"] == predicate_type) {
        return json::parse(registry.blob(repository, layer["digest"]));
      }
    }
    return json();
  }

  const ChainDir& dir;
  const LocalRegistry& registry;
  std::string repository, index;
};

const json* stage_named(const json& manifest, const std::string& name) {
  for (const auto& stage : manifest["stages"]) {
    if (stage["name"] == name) {
      return &stage;
    }
  }
  return nullptr;
}

TEST(Publish, TwoLanesArePublishedAsTheImagesTheirGatesReadWithProvenanceSbomAndSignature) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  PublishedChain chain(dir, registry);
  KilnResult run = chain.run();
  ASSERT_EQ(run.exit_code, 0) << run.output;
  json manifest = dir.latest_manifest();
  ASSERT_EQ(manifest["publish"].size(), 1u);
  const json& published = manifest["publish"][0];
  EXPECT_EQ(published["status"], "published") << published.dump(2);
  EXPECT_EQ(published["done"], json({"push", "read-back", "sign", "tag"}));
  std::string digest = published["digest"];

  // The tag names that index, byte for byte, and it lists each lane's image and attestations.
  json index = chain.served("1.0");
  ASSERT_TRUE(index.is_object()) << run.output;
  EXPECT_EQ(sha256_digest(registry.manifest(chain.repository, "1.0")), digest);
  EXPECT_EQ(index["manifests"].size(), 4u) << index.dump(2);

  std::filesystem::create_directories(dir.path() / "dpkg-admin");
  std::filesystem::copy_file(dir.path() / "status", dir.path() / "dpkg-admin" / "status");
  std::set<std::string> installed = dpkg_query_installed(dir.path() / "dpkg-admin");
  ASSERT_GT(installed.size(), 10u);

  for (const auto& lane : published["lanes"]) {
    std::string name = lane["lane"];
    const json* final_stage = stage_named(manifest, name + "/final");
    const json* base = stage_named(manifest, name + "/base");
    ASSERT_NE(final_stage, nullptr);
    // The image the gates read: buildah's id is its config's digest, and the platform image
    // the registry serves has that very config.
    EXPECT_EQ(lane["identity"], (*final_stage)["image_id"]);
    json platform_manifest = chain.served(lane["digest"]);
    EXPECT_EQ(platform_manifest["config"]["digest"],
              "sha256:" + (*final_stage)["image_id"].get<std::string>())
        << name;
    // Every gate of the final image passed, the arch gate among them (arm64's tool is AArch64).
    for (const auto& gate : (*final_stage)["gates"]) {
      EXPECT_EQ(gate["verdict"], "pass") << gate.dump();
    }
    EXPECT_TRUE((*final_stage)["tag_moved"]) << "its smoke stage passed";

    json provenance = chain.statement(lane["attestation"], "https://slsa.dev/provenance/v1");
    ASSERT_TRUE(provenance.is_object()) << lane.dump();
    EXPECT_EQ("sha256:" + provenance["subject"][0]["digest"]["sha256"].get<std::string>(),
              lane["digest"]);
    bool names_base = false;
    for (const auto& dependency :
         provenance["predicate"]["buildDefinition"]["resolvedDependencies"]) {
      if (dependency["name"] == "stage " + name + "/base") {
        names_base = true;
        EXPECT_EQ(dependency["digest"]["sha256"], (*base)["image_id"]);
        EXPECT_EQ(dependency["mediaType"], "application/vnd.oci.image.config.v1+json");
      }
    }
    EXPECT_TRUE(names_base) << provenance.dump(2);
    // The build args of every stage it is built on: base's TOOL made this image what it is.
    const json& parents =
        provenance["predicate"]["buildDefinition"]["externalParameters"]["parents"];
    ASSERT_EQ(parents.size(), 1u) << provenance.dump(2);
    EXPECT_EQ(parents[0]["stage"], name + "/base");
    EXPECT_EQ(parents[0]["buildArgs"]["TOOL"], "tool-" + name);

    // The SBOM lists what dpkg-query says the status file holds, package for package.
    json sbom = chain.statement(lane["attestation"], "https://spdx.dev/Document");
    ASSERT_TRUE(sbom.is_object()) << lane.dump();
    EXPECT_EQ(sbom["predicate"]["spdxVersion"], "SPDX-2.3");
    std::set<std::string> listed;
    for (const auto& package : sbom["predicate"]["packages"]) {
      if (package.value("primaryPackagePurpose", "") == "CONTAINER") {
        continue;
      }
      std::string arch;
      for (const auto& ref : package["externalRefs"]) {
        std::string purl = ref["referenceLocator"];
        auto at = purl.find("arch=");
        arch = at == std::string::npos ? "" : purl.substr(at + 5, purl.find('&', at) - at - 5);
      }
      listed.insert(package["name"].get<std::string>() + "\t" + arch + "\t" +
                    package["versionInfo"].get<std::string>());
    }
    EXPECT_EQ(listed, installed) << name;
    EXPECT_EQ(lane["packages"], static_cast<int>(installed.size()));
  }

  // Signed before the tag moved, and the signature is of the index by digest.
  EXPECT_EQ(dir.read("signed.txt"), registry.host() + "/" + chain.repository + "@" + digest);
  EXPECT_EQ(dir.read("verified.txt"), dir.read("signed.txt"));
  KilnResult verified = dir.kiln({"attest", "verify", chain.index, "--tls-verify=false"});
  EXPECT_EQ(verified.exit_code, 0) << verified.output;
  // Nothing staged outlives the run.
  const char* tmp = std::getenv("TMPDIR");
  for (const auto& entry :
       std::filesystem::directory_iterator(tmp != nullptr && *tmp != '\0' ? tmp : "/var/tmp")) {
    EXPECT_EQ(entry.path().filename().string().find(manifest["run_id"].get<std::string>()),
              std::string::npos)
        << entry.path();
  }
}

/// A TCP relay to the registry that drops the connection carrying the first blob upload's
/// PATCH, without an answer: what a registry behind a flaky balancer does mid-push.
class DroppingProxy {
public:
  explicit DroppingProxy(int upstream) : m_upstream(upstream) {
    m_listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = loopback(0);
    int on = 1;
    ::setsockopt(m_listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    ::bind(m_listener, reinterpret_cast<sockaddr*>(&address), sizeof address);
    socklen_t size = sizeof address;
    ::getsockname(m_listener, reinterpret_cast<sockaddr*>(&address), &size);
    m_port = ntohs(address.sin_port);
    ::listen(m_listener, 16);
    m_accepting = std::thread([this] { accept_loop(); });
  }
  ~DroppingProxy() {
    m_stop = true;
    ::shutdown(m_listener, SHUT_RDWR);
    ::close(m_listener);
    m_accepting.join();
    for (auto& relay : m_relays) {
      relay.join();
    }
  }
  DroppingProxy(const DroppingProxy&) = delete;
  DroppingProxy& operator=(const DroppingProxy&) = delete;

  std::string host() const { return "127.0.0.1:" + std::to_string(m_port); }
  int dropped() const { return m_dropped; }

private:
  static sockaddr_in loopback(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return address;
  }

  void accept_loop() {
    while (!m_stop) {
      int client = ::accept(m_listener, nullptr, nullptr);
      if (client < 0) {
        return;
      }
      m_relays.emplace_back([this, client] { relay(client); });
    }
  }

  void relay(int client) {
    int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = loopback(m_upstream);
    if (::connect(server, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      ::close(client);
      ::close(server);
      return;
    }
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    char buffer[65536];
    while (::poll(fds, 2, 200) >= 0 && !m_stop) {
      bool done = false;
      for (int i = 0; i < 2 && !done; ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
          continue;
        }
        ssize_t got = ::recv(fds[i].fd, buffer, sizeof buffer, 0);
        if (got <= 0) {
          done = true;
          break;
        }
        if (i == 0 && m_dropped == 0 &&
            std::string_view(buffer, static_cast<size_t>(got)).find("PATCH /v2/") !=
                std::string_view::npos) {
          ++m_dropped; // the request is read and never answered: the client sees EOF
          done = true;
          break;
        }
        ::send(fds[1 - i].fd, buffer, static_cast<size_t>(got), MSG_NOSIGNAL);
      }
      if (done) {
        break;
      }
    }
    ::close(client);
    ::close(server);
  }

  int m_upstream;
  int m_listener = -1;
  int m_port = 0;
  std::atomic<bool> m_stop{false};
  std::atomic<int> m_dropped{0};
  std::thread m_accepting;
  std::vector<std::thread> m_relays;
};

TEST(Publish, AConnectionDroppedMidPushIsAFlakeRetriedAfterTheCooldown) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  DroppingProxy proxy(std::stoi(registry.host().substr(registry.host().find(':') + 1)));
  PublishedChain chain(dir, registry, proxy.host());
  KilnResult both = chain.run();
  ASSERT_EQ(both.exit_code, 0) << both.output;
  EXPECT_EQ(proxy.dropped(), 1);
  json manifest = dir.latest_manifest();
  const json& published = manifest["publish"][0];
  EXPECT_EQ(published["status"], "published") << published.dump(2);
  EXPECT_EQ(published["attempts"], 2);
  std::string log = dir.read("records/latest/" + published["log"].get<std::string>());
  EXPECT_NE(log.find("[kiln] publish attempt 2/2"), std::string::npos) << log;
  std::string driver = dir.read("records/latest/driver.log");
  auto failed = driver.find("attempt 1/2 failed: ");
  ASSERT_NE(failed, std::string::npos) << driver;
  EXPECT_NE(driver.find("writing blob: Patch", failed), std::string::npos) << driver;
  EXPECT_NE(driver.find("class registry-network", failed), std::string::npos) << driver;
  EXPECT_FALSE(chain.served("1.0").is_null());
}

TEST(Publish, ASmokeStageThatFailsLeavesTheRegistryWithoutTheTagAndTheStableNameWhereItWas) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  PublishedChain chain(dir, registry);
  chain.smoke("0 passed, 1 failed, 0 skipped", 1);
  KilnResult run = chain.run();
  EXPECT_EQ(run.exit_code, 1) << run.output;
  json manifest = dir.latest_manifest();
  std::string status = manifest["status"];
  EXPECT_TRUE(status == "failed:amd64/smoke,arm64/smoke" ||
              status == "failed:arm64/smoke,amd64/smoke")
      << status;
  const json& published = manifest["publish"][0];
  EXPECT_EQ(published["status"], "blocked");
  EXPECT_EQ(published["gates_not_run"],
            json({"smoke", "coherence", "push", "read-back", "sign", "tag"}));
  EXPECT_TRUE(chain.served("1.0").is_null()) << "no tag";
  // No index at all: the registry holds nothing of it, by tag or by digest.
  EXPECT_EQ(
      run_captured({"skopeo", "inspect", "--raw", "--tls-verify=false", "docker://" + chain.index})
              .exit.status_code() == 0,
      false);
  // The final images built and passed their own gates, and no stable name moved to them.
  for (const char* lane : {"amd64", "arm64"}) {
    const json* final_stage = stage_named(manifest, std::string(lane) + "/final");
    EXPECT_EQ((*final_stage)["status"], "ok");
    EXPECT_FALSE((*final_stage)["tag_moved"]);
    EXPECT_NE((*final_stage)["tag_held"].get<std::string>().find("smoke ended failed"),
              std::string::npos)
        << final_stage->dump();
    auto inspected = run_captured(
        {"buildah", "inspect", "--type", "image", "--", (*final_stage)["tag"].get<std::string>()});
    EXPECT_NE(inspected.exit.status_code(), 0) << "the stable name names nothing yet";
  }
}

TEST(Publish, AFailedSignatureKeepsTheTagFromMovingAndSaysWhatTheSignerSaid) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  PublishedChain chain(dir, registry);
  dir.write("sign.sh", "#!/bin/sh\necho 'signer: no key for this registry' >&2\nexit 3\n");
  KilnResult run = chain.run();
  EXPECT_EQ(run.exit_code, 1) << run.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "failed:publish");
  const json& published = manifest["publish"][0];
  EXPECT_EQ(published["status"], "failed");
  EXPECT_EQ(published["done"], json({"push", "read-back"}));
  EXPECT_NE(published["failure"].get<std::string>().find("signer: no key for this registry"),
            std::string::npos)
      << published.dump(2);
  EXPECT_TRUE(chain.served("1.0").is_null()) << "the tag did not move";
  // The index is in the registry by digest only, where nothing names it.
  EXPECT_TRUE(chain.served(published["digest"]).is_object());

  // The log analysis names the failed publish with the signer's words.
  KilnResult analysed = dir.kiln({"logs", "analyze", "latest", "--format", "json"});
  ASSERT_EQ(analysed.exit_code, 0) << analysed.output;
  json analysis = json::parse(analysed.output.substr(analysed.output.find('{')));
  ASSERT_FALSE(analysis["errors"].empty()) << analysis["errors"].dump(2);
  const json& error = analysis["errors"].back();
  EXPECT_EQ(error["stage"], "publish");
  EXPECT_NE(error["lines"][0].get<std::string>().find("signer: no key for this registry"),
            std::string::npos);

  // The two-lane run with its failed publish, as headless Chromium draws its report.
  if (!std::filesystem::exists(k_chromium)) {
    GTEST_SKIP() << k_chromium << " is not installed (scripts/install-deps installs it)";
  }
  ASSERT_EQ(dir.kiln({"report", "latest", "-o", "report.html"}).exit_code, 0);
  std::string dom = rendered_dom(dir, dir.path() / "report.html");
  ASSERT_NE(dom.find("</html>"), std::string::npos) << "Chromium printed no DOM:\n" << dom;
  // One schema: the report reads the manifest kiln writes.
  EXPECT_EQ(dom.find("This manifest has schema"), std::string::npos);
  // A bar per stage of both lanes, and the publish on a row of its own after them, ending
  // where the run ended.
  auto bars = html_elements(dom, "rect", "bar");
  EXPECT_EQ(bars.size(), manifest["stages"].size());
  std::set<std::string> lanes;
  for (const auto& bar : bars) {
    lanes.insert(bar.attribute("data-lane"));
  }
  EXPECT_EQ(lanes, (std::set<std::string>{"amd64", "arm64"}));
  auto publishes = html_elements(dom, "rect", "publish-bar");
  ASSERT_EQ(publishes.size(), 1u);
  EXPECT_EQ(publishes[0].attribute("data-status"), "failed");
  EXPECT_NEAR(std::stod(publishes[0].attribute("data-start")) +
                  std::stod(publishes[0].attribute("data-seconds")),
              manifest["wall_seconds"].get<double>(), 1.5);
  // No label runs into a bar: each is after its bar with room, inside it, or left out.
  EXPECT_EQ(labels_running_into_bars(dom), std::vector<std::string>{});
  // Each lane's rows in the slowest steps name the lane.
  auto slowest = html_elements(dom, "table", "slowest-steps");
  ASSERT_EQ(slowest.size(), 1u);
  size_t table_end = dom.find("</table>", slowest[0].offset);
  std::string table = dom.substr(slowest[0].offset, table_end - slowest[0].offset);
  EXPECT_NE(table.find("<th>lane</th>"), std::string::npos) << table;
  EXPECT_NE(table.find("<td class=\"lane\">amd64</td>"), std::string::npos) << table;
}

TEST(Publish, OnlyTheFinalStageHoldsThePublishBackUntilItsSmokeStageRuns) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  PublishedChain chain(dir, registry);
  ASSERT_EQ(chain.run({"--only", "base"}).exit_code, 0);
  KilnResult run = chain.run({"--only", "final"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  json manifest = dir.latest_manifest();
  const json& published = manifest["publish"][0];
  EXPECT_EQ(published["status"], "held");
  EXPECT_NE(published["failure"].get<std::string>().find(
                "smoke stage amd64/smoke did not run in this run"),
            std::string::npos)
      << published.dump(2);
  EXPECT_TRUE(chain.served("1.0").is_null());
  EXPECT_NE(run.output.find("publish " + chain.index + ": held"), std::string::npos) << run.output;
}

TEST(Publish, WhatAKilledRunStagedIsRemovedByTheNextRunOfTheRecordsFolder) {
  ChainDir dir;
  dir.copy_unique_demo();
  const std::string key = sha256_digest((dir.path() / "records").string()).substr(7, 8);
  // Where kiln stages: beside buildah's temporary images.
  const char* tmp = std::getenv("TMPDIR");
  const std::filesystem::path root = tmp != nullptr && *tmp != '\0' ? tmp : "/var/tmp";
  const std::filesystem::path left = root / ("kiln-publish-" + key + "-20261201-000000-dead");
  const std::filesystem::path others =
      root / ("kiln-publish-0000" + key.substr(4) + "-x" + dir.nonce());
  std::filesystem::create_directories(left / "0123456789ab" / "blobs");
  std::filesystem::create_directories(others);
  KilnResult run = dir.kiln({"run", "chain.toml", "--only", "base"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(std::filesystem::exists(left));
  EXPECT_NE(run.output.find("removed " + left.string()), std::string::npos) << run.output;
  EXPECT_TRUE(std::filesystem::exists(others)) << "another records folder's is not this run's";
  std::filesystem::remove_all(others);
}

/// Ctrl-C while the signer runs: the signer is stopped, the tag never moves, the staged layout
/// is removed at once and the record says interrupted, not running.
TEST(Publish, CtrlCWhileSigningStopsTheSignerLeavesNoTagAndNoStagedLayout) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  PublishedChain chain(dir, registry);
  const std::string sleep = "sleep 7" + dir.nonce().substr(0, 3);
  dir.write("sign.sh", "#!/bin/sh\ntouch signing\nexec " + sleep + "\n");
  CancelToken ctrl_c;
  std::thread interrupter([&] {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
    while (processes_matching(sleep).empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ctrl_c.cancel();
  });
  KilnResult run = dir.kiln({"run", "chain.toml"}, &ctrl_c);
  interrupter.join();
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "signing")) << run.output;
  EXPECT_EQ(run.exit_code, 130) << run.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "interrupted");
  const json& published = manifest["publish"][0];
  EXPECT_EQ(published["status"], "interrupted") << published.dump(2);
  EXPECT_EQ(published["done"], json({"push", "read-back"}));
  // Pushed by digest, never tagged.
  EXPECT_TRUE(chain.served("1.0").is_null());
  EXPECT_FALSE(chain.served(published["digest"].get<std::string>()).is_null());
  const std::string key = sha256_digest((dir.path() / "records").string()).substr(7, 8);
  const char* tmp = std::getenv("TMPDIR");
  const std::filesystem::path root = tmp != nullptr && *tmp != '\0' ? tmp : "/var/tmp";
  EXPECT_FALSE(std::filesystem::exists(
      root / ("kiln-publish-" + key + "-" + manifest["run_id"].get<std::string>())));
  EXPECT_TRUE(processes_matching(sleep).empty()) << "the signer outlived kiln";
}

TEST(ArchGate, AnImageWithABinaryOfAnotherMachineIsRefusedNamingItsPathAndLayer) {
  ChainDir dir;
  LocalRegistry registry(dir.path() / "registry");
  ASSERT_TRUE(registry.ready());
  PublishedChain chain(dir, registry);
  // The amd64 lane's image gets arm64's tool beside its own.
  dir.write("final.Dockerfile",
            "FROM base\nCOPY tool-arm64 /opt/stray/tool\nCMD [\"/usr/bin/tool\"]\n");
  KilnResult run = chain.run({"--lane", "amd64"});
  EXPECT_EQ(run.exit_code, 3) << run.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "refused:arch:amd64/final");
  const json* final_stage = stage_named(manifest, "amd64/final");
  const json* arch = nullptr;
  for (const auto& gate : (*final_stage)["gates"]) {
    if (gate["gate"] == "arch") {
      arch = &gate;
    }
  }
  ASSERT_NE(arch, nullptr) << final_stage->dump();
  ASSERT_EQ((*arch)["findings"].size(), 1u) << arch->dump();
  EXPECT_NE((*arch)["findings"][0].get<std::string>().find(
                "/opt/stray/tool: ELF 64-bit LSB ARM aarch64, added in layer 4 of 4, in a "
                "linux/amd64 image"),
            std::string::npos)
      << arch->dump();
  EXPECT_NE(run.output.find("/opt/stray/tool"), std::string::npos) << run.output;
  // Refused: its work name is gone, so no later run is handed it.
  auto inspected = run_captured({"buildah", "inspect", "--type", "image", "--",
                                 (*final_stage)["work_tag"].get<std::string>()});
  EXPECT_NE(inspected.exit.status_code(), 0) << inspected.output;
}

} // namespace
} // namespace kiln::testing
