// `kiln gate image-env` on real images: built by buildah (its config read with buildah
// inspect), and an OCI image layout on disk.
#include <filesystem>
#include <fstream>
#include <iterator>

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "kiln_harness.h"

namespace kiln::testing {
namespace {

TEST(ImageEnvGate, RefusesABuiltImageThatCarriesTheBuildHost) {
  ChainDir dir;
  std::string leak = "localhost/gate-" + dir.nonce() + ":leak";
  std::string clean = "localhost/gate-" + dir.nonce() + ":clean";
  dir.build_image("FROM scratch\nCOPY busybox /bin/busybox\n"
                  "ENV SCCACHE_DIR=/var/cache/sccache \\\n"
                  "    SCCACHE_WEBDAV_ENDPOINT=http://192.168.1.5:8080 \\\n"
                  "    CACHE_URL=https://10.20.30.40/cache \\\n"
                  "    CUDA_CURAND_VERSION=10.4.4.72\n",
                  leak);
  dir.build_image("FROM scratch\nCOPY busybox /bin/busybox\n"
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
    ChainDir::remove_image(tag);
  }
}

TEST(ImageEnvGate, ReadsAnOciLayoutAndSaysWhenItCannot) {
  ChainDir dir;
  // A layout as an exporter writes it: index -> manifest -> config, blobs named by digest
  // (the names need only be digests that match the descriptors for kiln to follow them).
  const std::string a(64, 'a');
  const std::string b(64, 'b');
  dir.write("layout/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");
  dir.write("layout/index.json",
            "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image."
            "manifest.v1+json\",\"digest\":\"sha256:" +
                a + "\",\"size\":1}]}");
  dir.write("layout/blobs/sha256/" + a,
            "{\"schemaVersion\":2,\"config\":{\"mediaType\":\"application/vnd.oci.image.config."
            "v1+json\",\"digest\":\"sha256:" +
                b + "\",\"size\":1},\"layers\":[]}");
  dir.write("layout/blobs/sha256/" + b,
            "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/bin\","
            "\"BUILD_CACHE=\\\\\\\\10.0.0.5\\\\share\"]}}");
  KilnResult refused = dir.kiln({"gate", "image-env", (dir.path() / "layout").string()});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("BUILD_CACHE"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("10.0.0.5"), std::string::npos) << refused.output;

  std::filesystem::remove(dir.path() / "layout/blobs/sha256" / b);
  KilnResult broken = dir.kiln({"gate", "image-env", (dir.path() / "layout").string()});
  EXPECT_EQ(broken.exit_code, 2) << broken.output;
  EXPECT_NE(broken.output.find(b), std::string::npos) << broken.output;

  KilnResult missing = dir.kiln({"gate", "image-env", "localhost/no-such-image-" + dir.nonce()});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("cannot inspect image"), std::string::npos) << missing.output;
}

TEST(ImageEnvGate, EveryPlatformOfAMultiPlatformLayoutIsGradedAndNamed) {
  // Recorded: an index of amd64 (clean) and arm64, whose Env points at a LAN cache. Reading the
  // first manifest only, the gate passed it.
  ChainDir dir;
  std::string multi = std::string(KILN_TEST_FIXTURES) + "/oci-layout/multi";
  KilnResult result = dir.kiln({"gate", "image-env", multi});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("kiln: refused: linux/arm64: leak-address: CACHE_URL points at "
                               "10.20.30.40"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("(2 platforms: linux/amd64, linux/arm64) refused; 1 build-host"),
            std::string::npos)
      << result.output;
}

// A layout's files are named by what it says: kiln must not follow a name out of the layout,
// block on a FIFO, or read a device or a huge file until memory runs out. The layout is a real
// one (tests/fixtures/oci-layout/leak); each case replaces one file of it.
class DeceptiveLayout : public ::testing::Test {
protected:
  static constexpr const char* k_config =
      "blobs/sha256/7fde95e908a45625faad3c332b160333aece638a9a23669252bc224dda5675c4";
  static constexpr const char* k_manifest =
      "blobs/sha256/bbd3c2d5626ab1b96ce62f910177d1d79861146ba86aebbcb4c115c4e28928f7";

  void SetUp() override {
    std::filesystem::copy(std::filesystem::path(KILN_TEST_FIXTURES) / "oci-layout/leak", layout(),
                          std::filesystem::copy_options::recursive);
  }

  std::filesystem::path layout() const { return m_dir.path() / "layout"; }

  KilnResult gate() const { return m_dir.kiln({"gate", "image-env", layout().string()}); }

  /// The recorded manifest with its config descriptor's digest replaced by `digest`.
  void point_config_at(const std::string& digest) const {
    std::ifstream in(std::filesystem::path(KILN_TEST_FIXTURES) / "oci-layout/leak" / k_manifest);
    std::string manifest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string real = std::string("sha256:") + (k_config + 13);
    ASSERT_NE(manifest.find(real), std::string::npos);
    manifest.replace(manifest.find(real), real.size(), digest);
    m_dir.write(std::string("layout/") + k_manifest, manifest);
  }

  ChainDir m_dir;
};

TEST_F(DeceptiveLayout, TheRealLayoutIsGraded) {
  KilnResult refused = gate();
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("SCCACHE_WEBDAV_ENDPOINT"), std::string::npos) << refused.output;
}

TEST_F(DeceptiveLayout, AConfigThatIsAFifoIsRefusedAtOnce) {
  std::filesystem::remove(layout() / k_config);
  ASSERT_EQ(::mkfifo((layout() / k_config).c_str(), 0644), 0);
  KilnResult result = gate(); // with no writer, an open() that waits would never return
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("not a regular file"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find(k_config), std::string::npos) << result.output;
}

TEST_F(DeceptiveLayout, AConfigLinkedToDevZeroIsRefused) {
  std::filesystem::remove(layout() / k_config);
  std::filesystem::create_symlink("/dev/zero", layout() / k_config);
  KilnResult result = gate();
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("not a regular file"), std::string::npos) << result.output;
}

TEST_F(DeceptiveLayout, AConfigLargerThanAnyImageConfigIsRefused) {
  std::filesystem::resize_file(layout() / k_config, 17 << 20);
  KilnResult result = gate();
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("more than the 16777216 allowed"), std::string::npos)
      << result.output;
}

// `sha256:../../../outside.json` leads from blobs/sha256/ to a clean config beside the layout:
// followed, the gate graded that file instead of the image and passed.
TEST_F(DeceptiveLayout, ADigestThatLeadsOutOfTheLayoutIsRefused) {
  m_dir.write("outside.json", R"({"config":{"Env":["PATH=/bin"]}})");
  point_config_at("sha256:../../../outside.json");
  KilnResult result = gate();
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("'sha256:../../../outside.json' is not sha256: and 64 lowercase "
                               "hex digits"),
            std::string::npos)
      << result.output;

  point_config_at("sha256:../../../../etc/hostname");
  result = gate();
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("../../../../etc/hostname' is not sha256:"), std::string::npos)
      << result.output;
}

} // namespace
} // namespace kiln::testing
