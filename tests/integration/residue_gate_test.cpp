// The residue and artifacts gates on real images: layers buildah wrote (gzip, and zstd through
// `buildah push --compression-format zstd`), with real whiteouts for files a later step deleted.
#include <gtest/gtest.h>

#include "kiln_harness.h"

namespace kiln::testing {
namespace {

using nlohmann::json;

/// Each residue kind, written by a RUN as a careless build step would; the SSH key is removed
/// by a later step, which hides it from the final tree but not from the layer that has it.
const char* k_residue_dockerfile =
    "FROM scratch\n"
    "COPY busybox /bin/busybox\n"
    "RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n"
    "RUN mkdir -p /root/.ssh /root/.docker /root/.aws /root/.config/sccache "
    "/etc/apt/apt.conf.d /etc/ssl/private && "
    "echo '//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789' > "
    "/root/.npmrc && "
    "printf '[global]\\nindex-url = http://192.168.7.2:3141/root/pypi/+simple/\\n' > "
    "/etc/pip.conf && "
    "echo 'https://bot:ghp_0123456789abcdef0123456789abcdef0123@github.com' > "
    "/root/.git-credentials && "
    "echo '{\"auths\":{\"registry.lan:5000\":{\"auth\":\"dXNlcjpwYXNz\"}}}' > "
    "/root/.docker/config.json && "
    "echo 'Acquire::http::Proxy \"http://squid:3128\";' > /etc/apt/apt.conf.d/01proxy && "
    "printf '[cache.webdav]\\nendpoint = \"http://10.0.0.8:8080\"\\n' > "
    "/root/.config/sccache/config && "
    "echo 'remote_storage = http://cache.lan:8080|layout=bazel' > /etc/ccache.conf && "
    "echo 'machine pypi.lan login ci password hunter2' > /root/.netrc && "
    "printf '[default]\\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\\n' > /root/.aws/credentials && "
    "printf -- '-----BEGIN RSA PRIVATE KEY-----\\nMIIE\\n' > /etc/ssl/private/server.key\n"
    "RUN printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\\nb3Bl\\n' > /root/.ssh/id_ed25519\n"
    "RUN rm /root/.ssh/id_ed25519\n";

TEST(ResidueGate, RefusesEachBuildHostFileIncludingOneALaterLayerDeleted) {
  ChainDir dir;
  std::string tag = "localhost/residue-" + dir.nonce() + ":leaky";
  dir.build_image(k_residue_dockerfile, tag);

  KilnResult refused = dir.kiln({"gate", "residue", tag});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  for (const char* expected :
       {"/root/.npmrc: npm-config: `//registry.npmjs.org/:_authToken` holds npm_… (40 characters)",
        "/etc/pip.conf: pip-config: names 192.168.7.2", "/root/.git-credentials: git-credentials:",
        "/root/.docker/config.json: docker-credentials: holds the `auth` of registry "
        "registry.lan:5000",
        "/etc/apt/apt.conf.d/01proxy: apt-proxy: sets the build host's proxy, "
        "\"http://squid:3128\"",
        "/root/.config/sccache/config: sccache-config: configures the remote cache [cache.webdav]",
        "/etc/ccache.conf: ccache-config: `remote_storage` configures a remote cache",
        "/root/.netrc: netrc:", "/root/.aws/credentials: aws-credentials:",
        "/etc/ssl/private/server.key: private-key: holds a PEM private key",
        "/root/.ssh/id_ed25519: ssh-private-key: an SSH private key of the build host",
        "added in layer 4 of 5, deleted in layer 5: still published",
        "residue gate: " /* the summary */}) {
    EXPECT_NE(refused.output.find(expected), std::string::npos) << expected << "\n"
                                                                << refused.output;
  }
  EXPECT_NE(refused.output.find("refused; 11 build-host file(s) in its 5 layer(s)"),
            std::string::npos)
      << refused.output;
  // Never the secrets themselves.
  for (const char* secret : {"abcdefghijklmnopqrstuvwxyz", "0123456789abcdef0123", "hunter2"}) {
    EXPECT_EQ(refused.output.find(secret), std::string::npos) << secret;
  }

  // The same image as a zstd-compressed OCI layout: the same findings.
  std::string output;
  ProcessExit pushed = run_process({{"buildah", "push", "--quiet", "--compression-format", "zstd",
                                     tag, "oci:" + (dir.path() / "zstd").string()},
                                    {},
                                    {}},
                                   [&](std::string_view chunk) { output += chunk; });
  ASSERT_TRUE(pushed.ok()) << output;
  KilnResult layout = dir.kiln({"gate", "residue", (dir.path() / "zstd").string()});
  EXPECT_EQ(layout.exit_code, 1) << layout.output;
  EXPECT_NE(layout.output.find("refused; 11 build-host file(s) in its 5 layer(s)"),
            std::string::npos)
      << layout.output;

  // A chain's allowance lets one file ship, with its reason.
  dir.write("chain.toml", "[chain]\nname = \"r" + dir.nonce() +
                              "\"\n[gates]\nresidue_allow = [{ path = \"/etc/ssl/private/*.key\", "
                              "reason = \"the test server's throwaway key\" }]\n"
                              "[[stage]]\nname = \"s\"\ndockerfile = \"image.Dockerfile\"\n");
  KilnResult allowed = dir.kiln({"gate", "residue", tag, "--chain", "chain.toml"});
  EXPECT_EQ(allowed.exit_code, 1) << allowed.output;
  EXPECT_NE(allowed.output.find("kiln: allowed: /etc/ssl/private/server.key"), std::string::npos)
      << allowed.output;
  EXPECT_NE(allowed.output.find("10 build-host file(s) in its 5 layer(s); 1 allowed"),
            std::string::npos)
      << allowed.output;
  ChainDir::remove_image(tag);
}

/// The same credentials as a hard link to a file of another name: a tar writes the first path
/// of an inode as the file and the next as a link, and the link ships the bytes all the same.
/// Read in place from buildah's store.
TEST(ResidueGate, AHardLinkedCredentialFileIsRefused) {
  ChainDir dir;
  std::string tag = "localhost/residue-" + dir.nonce() + ":linked";
  dir.build_image("FROM scratch\nCOPY busybox /bin/busybox\n"
                  "RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n"
                  "RUN mkdir -p /a /root && "
                  "echo 'https://bot:ghp_0123456789abcdef0123456789abcdef0123@github.com' > /a/x "
                  "&& ln /a/x /root/.git-credentials\n",
                  tag);
  KilnResult refused = dir.kiln({"gate", "residue", tag});
  ChainDir::remove_image(tag);
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("/root/.git-credentials: git-credentials:"), std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("(a hard link to /a/x)"), std::string::npos) << refused.output;
}

TEST(ResidueGate, PassesACleanImageAndSaysWhatItCannotRead) {
  ChainDir dir;
  std::string tag = "localhost/residue-" + dir.nonce() + ":clean";
  dir.build_image(
      std::string(k_base_dockerfile) +
          "RUN mkdir -p /etc/apt/apt.conf.d /root/.ssh && "
          "echo 'registry=https://registry.npmjs.org/' > /root/.npmrc && "
          "echo 'ssh-ed25519 AAAAC3Nz user@host' > /root/.ssh/id_ed25519.pub && "
          "echo 'APT::Install-Recommends \"false\";' > /etc/apt/apt.conf.d/99norecommends\n",
      tag);
  KilnResult passes = dir.kiln({"gate", "residue", tag});
  EXPECT_EQ(passes.exit_code, 0) << passes.output;
  EXPECT_NE(passes.output.find("passes: no build-host file in its 3 layer(s)"), std::string::npos)
      << passes.output;
  ChainDir::remove_image(tag);

  KilnResult missing = dir.kiln({"gate", "residue", "localhost/no-such-image-" + dir.nonce()});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("buildah's store has no image localhost/no-such-image-"),
            std::string::npos)
      << missing.output;

  KilnResult no_reason = dir.kiln({"gate", "residue", tag, "--allow", "/etc/*"});
  EXPECT_EQ(no_reason.exit_code, 2) << no_reason.output;
  EXPECT_NE(no_reason.output.find("gives no reason"), std::string::npos) << no_reason.output;
}

TEST(ArtifactsGate, TheDemoChainRefusesALibrariesImageThatLostAnArtifact) {
  ChainDir dir;
  dir.copy_demo();
  std::string libs = dir.read("stages/libs.Dockerfile");
  dir.write("stages/libs.Dockerfile", libs + "RUN rm /opt/lib/farewell.o\n");
  KilnResult run = dir.kiln({"run", "chain.toml"});
  EXPECT_EQ(run.exit_code, 3) << run.output;
  EXPECT_NE(run.output.find("/opt/lib/farewell.o is missing"), std::string::npos) << run.output;
  json manifest = dir.latest_manifest();
  EXPECT_EQ(manifest["status"], "refused:artifacts:libs");
  for (const auto& stage : manifest["stages"]) {
    if (stage["name"] == "libs") {
      EXPECT_EQ(stage["outcome"], "refused");
      ASSERT_EQ(stage["gates"].size(), 1U) << stage.dump(2);
      EXPECT_EQ(stage["gates"][0]["gate"], "artifacts");
      EXPECT_EQ(stage["gates"][0]["findings"].size(), 1U) << stage.dump(2);
    }
    if (stage["name"] == "final") {
      EXPECT_EQ(stage["outcome"], "skipped:libs");
      EXPECT_EQ(stage["gates_not_run"], json({"image-env", "residue", "arch", "artifacts"}));
    }
  }
}

} // namespace
} // namespace kiln::testing
