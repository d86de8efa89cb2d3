// `kiln gate image-env` on real images: built by buildah (its config read with buildah
// inspect), and an OCI image layout on disk.
#include <fstream>

#include <gtest/gtest.h>

#include "kiln_harness.h"

namespace kiln::testing {
namespace {

/// Build `dockerfile` with buildah as `tag`; the harness folder holds busybox.
void build(const ChainDir& dir, const std::string& dockerfile, const std::string& tag) {
  dir.write("gate.Dockerfile", dockerfile);
  std::string output;
  ProcessExit exit =
      run_process({{"buildah", "build", "--isolation", "chroot", "--layers", "--force-rm", "--file",
                    (dir.path() / "gate.Dockerfile").string(), "--tag", tag, dir.path().string()},
                   {},
                   {}},
                  [&](std::string_view chunk) { output += chunk; });
  ASSERT_TRUE(exit.ok()) << output;
}

TEST(ImageEnvGate, RefusesABuiltImageThatCarriesTheBuildHost) {
  ChainDir dir;
  std::string leak = "localhost/gate-" + dir.nonce() + ":leak";
  std::string clean = "localhost/gate-" + dir.nonce() + ":clean";
  build(dir,
        "FROM scratch\nCOPY busybox /bin/busybox\n"
        "ENV SCCACHE_DIR=/var/cache/sccache \\\n"
        "    SCCACHE_WEBDAV_ENDPOINT=http://192.168.1.5:8080 \\\n"
        "    CACHE_URL=https://10.20.30.40/cache \\\n"
        "    CUDA_CURAND_VERSION=10.4.4.72\n",
        leak);
  build(dir,
        "FROM scratch\nCOPY busybox /bin/busybox\n"
        "ENV SCCACHE_DIR=/var/cache/sccache CUDA_CURAND_VERSION=10.4.4.72\n",
        clean);

  KilnResult refused = dir.kiln({"gate", "image-env", leak});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("leak-env-name: SCCACHE_WEBDAV_ENDPOINT"), std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("10.20.30.40"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("never ENV"), std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find("CUDA_CURAND_VERSION"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("2 build-host setting(s)"), std::string::npos) << refused.output;

  KilnResult passes = dir.kiln({"gate", "image-env", clean});
  EXPECT_EQ(passes.exit_code, 0) << passes.output;
  EXPECT_NE(passes.output.find("passes"), std::string::npos) << passes.output;

  // A chain may name its own build-host variables.
  KilnResult extra = dir.kiln({"gate", "image-env", clean, "--name", "CUDA_CURAND_*"});
  EXPECT_EQ(extra.exit_code, 1) << extra.output;

  for (const auto& tag : {leak, clean}) {
    run_process({{"buildah", "rmi", tag}, {}, {}}, [](std::string_view) {});
  }
}

TEST(ImageEnvGate, ReadsAnOciLayoutAndSaysWhenItCannot) {
  ChainDir dir;
  // A layout as an exporter writes it: index -> manifest -> config, blobs named by digest
  // (the names only need to match the descriptors for kiln to follow them).
  dir.write("layout/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");
  dir.write("layout/index.json",
            "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image."
            "manifest.v1+json\",\"digest\":\"sha256:aaaa\",\"size\":1}]}");
  dir.write("layout/blobs/sha256/aaaa",
            "{\"schemaVersion\":2,\"config\":{\"mediaType\":\"application/vnd.oci.image.config."
            "v1+json\",\"digest\":\"sha256:bbbb\",\"size\":1},\"layers\":[]}");
  dir.write("layout/blobs/sha256/bbbb",
            "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/bin\","
            "\"BUILD_CACHE=\\\\\\\\10.0.0.5\\\\share\"]}}");
  KilnResult refused = dir.kiln({"gate", "image-env", (dir.path() / "layout").string()});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("BUILD_CACHE"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("10.0.0.5"), std::string::npos) << refused.output;

  std::filesystem::remove(dir.path() / "layout/blobs/sha256/bbbb");
  KilnResult broken = dir.kiln({"gate", "image-env", (dir.path() / "layout").string()});
  EXPECT_EQ(broken.exit_code, 2) << broken.output;
  EXPECT_NE(broken.output.find("bbbb"), std::string::npos) << broken.output;

  KilnResult missing = dir.kiln({"gate", "image-env", "localhost/no-such-image-" + dir.nonce()});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("cannot inspect image"), std::string::npos) << missing.output;
}

} // namespace
} // namespace kiln::testing
