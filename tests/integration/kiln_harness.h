#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/process.h"

namespace kiln::testing {

struct KilnResult {
  int exit_code = -1;
  std::string output; // stdout and stderr, interleaved as written
};

/// A scratch folder holding a chain: busybox copied in (the demo's only binary), images tagged
/// with a name unique to this test so runs never share tags, and every tag removed at the end.
class ChainDir {
public:
  ChainDir();
  ~ChainDir();
  ChainDir(const ChainDir&) = delete;
  ChainDir& operator=(const ChainDir&) = delete;

  const std::filesystem::path& path() const { return m_path; }
  /// Unique per test: use it in chain names and anywhere a value must not repeat across runs.
  const std::string& nonce() const { return m_nonce; }

  /// Copy in the demo chain (examples/hello) as it is in the source tree.
  void copy_demo() const;
  /// The demo chain under a chain name and base release of this test's own: its tags and layer
  /// cache keys are nobody else's, so its first run builds every stage.
  void copy_unique_demo() const;
  /// The demo chain for builds that replay recorded output (tests/fake_buildctl): its smoke
  /// stage made a build stage (a recording prints no test summary, so the smoke gate would
  /// refuse it, and `[publish] require_smoke = false` says the chain has none) and its
  /// artifacts and layer ceilings dropped (the fake's images have no layers to hold them).
  void copy_demo_for_replay() const;

  void write(const std::string& relative, const std::string& content) const;
  std::string read(const std::string& relative) const;

  /// Run the real kiln binary with `args`, from this folder, `env` added to the environment;
  /// `ctrl_c` (when given) sends it SIGINT once cancelled.
  KilnResult kiln(const std::vector<std::string>& args, const CancelToken* ctrl_c = nullptr,
                  const std::vector<std::pair<std::string, std::string>>& env = {}) const;

  /// A buildah store of this test's own (graphroot and runroot in this folder), as the value
  /// for CONTAINERS_STORAGE_CONF: with it in the environment, kiln run, kiln's levers and the
  /// test's own buildah commands share that store, and a removal reaches no one else's images.
  std::string private_buildah_store() const;

  /// Build `dockerfile` (written into this folder, the build context) with buildah as `tag`, one
  /// layer per step as kiln builds; the test fails when the build does.
  void build_image(const std::string& dockerfile, const std::string& tag) const;
  /// Remove the image tagged `tag`, if there is one.
  static void remove_image(const std::string& tag);

  /// The manifest of the newest run, through the `latest` link.
  nlohmann::json latest_manifest() const;

  /// Remove every image the runs recorded under records/ tagged (the destructor does it too):
  /// for a test whose records live on a filesystem it unmounts first.
  void remove_images() const;
  /// The same for the runs recorded in another records folder (a chain in a subfolder).
  void remove_images(const std::filesystem::path& records) const;

private:
  std::filesystem::path m_path;
  std::string m_nonce;
  CancelToken m_never; // what a run without `ctrl_c` watches: a test's own Ctrl-C stays its own
};

/// A chain of a busybox base and one stage `work` whose Dockerfile is `body` after `FROM base`;
/// `extra` goes at the end of the chain's [defaults] table.
void write_two_stage_chain(const ChainDir& dir, const std::string& body, int attempts = 3,
                           const std::string& extra = "");

/// A Dockerfile stage that every test chain starts from: FROM scratch plus busybox.
inline const char* k_base_dockerfile = "FROM scratch\n"
                                       "COPY busybox /bin/busybox\n"
                                       "RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n";

/// The fake buildctl (tests/fake_buildctl) first on PATH for a test's kiln runs, its
/// invocations logged and its cases planned in files of `dir`.
class FakeBuildkit {
public:
  using Env = std::vector<std::pair<std::string, std::string>>;

  /// Every build replays `auto` until plan() says otherwise.
  explicit FakeBuildkit(const ChainDir& dir);

  /// The environment of a kiln run that reaches the fake, with `extra` after it.
  Env env(Env extra = {}) const;
  /// The fake's plan file (its README: `<key> <case>...` per line).
  void plan(const std::string& text) const;
  /// Every build invocation the fake saw, in order, as its log line has it (`argv`, `addr`,
  /// `started_ns`, `ended_ns`, ...).
  std::vector<nlohmann::json> builds() const;

  const ChainDir& dir;
};

/// Where Debian's headless Chromium is (scripts/install-deps installs it).
inline const char* k_chromium = "/usr/bin/chromium";

/// The DOM headless Chromium built from the HTML file `page` once it loaded, serialized; its
/// profile and its own stderr live in `dir`. The test fails when Chromium does.
std::string rendered_dom(const ChainDir& dir, const std::filesystem::path& page);

/// Pids of processes whose command line contains `needle`.
std::vector<int> processes_matching(const std::string& needle);

/// Wait (up to 120 s) until a process whose command line contains `needle` runs; false when none
/// did.
bool wait_for_process(const std::string& needle);

/// Wait (up to 30 s) until no process whose command line contains `needle` is left: a process
/// killed at once takes a moment to leave the table. True when none is left.
bool wait_for_no_process(const std::string& needle);

} // namespace kiln::testing
