// BuildKit's store levers on the real v0.11.6 `du`/`prune` recordings, where a buildkitd keeps
// its store by its command line and config, and the structural rule behind them: kiln never
// sends a prune that could reach a compile-cache mount.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "disk/buildkit_daemon.h"
#include "disk/buildkit_store.h"
#include "util/strings.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path k_recordings = fs::path(KILN_TEST_FIXTURES) / "buildkit-v0.11.6";

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<DuRecord> recording(const std::string& name) {
  std::string text = slurp(k_recordings / name);
  EXPECT_FALSE(text.empty()) << name;
  return parse_du_verbose(text);
}

std::map<std::string, int> count_by_type(const std::vector<DuRecord>& records) {
  std::map<std::string, int> counts;
  for (const DuRecord& record : records) {
    counts[record.type] += 1;
  }
  return counts;
}

uint64_t sum_bytes(const std::vector<DuRecord>& records) {
  uint64_t bytes = 0;
  for (const DuRecord& record : records) {
    bytes += record.bytes;
  }
  return bytes;
}

/// The value of a summary line such as `Total:\t\t5.18MB`.
uint64_t summary_value(const std::string& text, const std::string& key) {
  for (const std::string& line : split(text, '\n')) {
    if (line.starts_with(key + ":\t")) {
      return parse_human_size(line.substr(key.size() + 1));
    }
  }
  ADD_FAILURE() << "no " << key << " line";
  return 0;
}

/// buildctl prints `%.2f` of the unit it picks, so a printed size is off by at most half of
/// the last digit: 5 kB for `5.18MB`, 5 B for `28.11kB`.
double half_digit(uint64_t bytes) {
  double unit = 1;
  while (static_cast<double>(bytes) >= unit * 1000) {
    unit *= 1000;
  }
  return unit == 1 ? 0.5 : unit * 0.005;
}

/// A sum of printed sizes matches a printed total if it lies within their rounding together.
void expect_total_matches(const std::vector<DuRecord>& records, uint64_t total) {
  double slack = half_digit(total);
  for (const DuRecord& record : records) {
    slack += half_digit(record.bytes);
  }
  EXPECT_LE(std::fabs(static_cast<double>(sum_bytes(records)) - static_cast<double>(total)), slack);
}

// ---------------------------------------------------------------------------------------------

TEST(BuildkitStore, ParsesHumanSizesAsBuildctlPrintsThem) {
  EXPECT_EQ(parse_human_size("3.05MB"), 3'050'000u);
  EXPECT_EQ(parse_human_size("28.11kB"), 28'110u);
  EXPECT_EQ(parse_human_size("4.10kB"), 4'100u);
  EXPECT_EQ(parse_human_size("123B"), 123u); // below 1 kB tonistiigi/units prints whole bytes
  EXPECT_EQ(parse_human_size("0B"), 0u);
  EXPECT_EQ(parse_human_size("196.00GB"), 196'000'000'000u);
  EXPECT_EQ(parse_human_size("1.20TB"), 1'200'000'000'000u);
  EXPECT_EQ(parse_human_size("8.19kB*"), 8'190u);       // the table's shared mark
  EXPECT_EQ(parse_human_size(" 2.13 MB "), 2'130'000u); // buildah's spelling
  EXPECT_EQ(parse_human_size("1.5GiB"), 1'610'612'736u);
  EXPECT_EQ(parse_human_size("1e+03 MB"), 1'000'000'000u); // buildah's %.3g at the unit edge
  EXPECT_EQ(parse_human_size(""), 0u);
  EXPECT_EQ(parse_human_size("true"), 0u);
  EXPECT_EQ(parse_human_size("1e300 EB"), 0u) << "no disk holds it";
  EXPECT_EQ(parse_human_size("5XB"), 0u);
}

TEST(BuildkitStore, ParsesEveryDuVerboseRecordByType) {
  std::vector<DuRecord> records = recording("du-verbose.txt");
  ASSERT_EQ(records.size(), 19u);
  EXPECT_EQ(
      count_by_type(records),
      (std::map<std::string, int>{{"regular", 14}, {"source.local", 3}, {"exec.cachemount", 2}}));

  const DuRecord& first = records.front();
  EXPECT_EQ(first.id, "i8i1fwxzbx3strr7ftp8c0snw");
  EXPECT_EQ(first.type, "regular");
  EXPECT_EQ(first.bytes, 3'050'000u);
  EXPECT_TRUE(first.reclaimable);
  EXPECT_FALSE(first.shared);
  EXPECT_EQ(first.description, "[base 1/2] COPY busybox /bin/busybox");

  // A record with a Parents line, and the last one before the summary.
  EXPECT_EQ(records[2].id, "hxn8wexoxug0xo0tokkdan54o");
  EXPECT_EQ(records[2].bytes, 28'110u);
  EXPECT_EQ(records.back().id, "m1l957928y304u3nuewweaxt0");
  EXPECT_EQ(records.back().type, "source.local");
  EXPECT_EQ(records.back().bytes, 4'100u);

  // The summary (`Reclaimable:`, `Total:`) is no record, and its Reclaimable line does not leak
  // into the last record.
  for (const DuRecord& record : records) {
    EXPECT_FALSE(record.id.empty());
    EXPECT_FALSE(record.type.empty()) << record.id;
    EXPECT_GT(record.bytes, 0u) << record.id;
  }
}

TEST(BuildkitStore, DuVerboseMatchesTheTableRecordForRecord) {
  std::vector<DuRecord> records = recording("du-verbose.txt");
  std::string table = slurp(k_recordings / "du-table.txt");
  std::map<std::string, uint64_t> table_sizes;
  for (const std::string& line : split(table, '\n')) {
    std::vector<std::string> cells = split(line, '\t');
    // "<id>[*]<padding>\t<reclaimable>\t<size>\t": the header and the summary have other shapes.
    if (cells.size() != 4 || trim(cells[0]) == "ID") {
      continue;
    }
    std::string id(trim(cells[0]));
    if (id.ends_with('*')) {
      id.pop_back(); // mutable
    }
    table_sizes[id] = parse_human_size(cells[2]);
  }
  ASSERT_EQ(table_sizes.size(), records.size());
  for (const DuRecord& record : records) {
    ASSERT_TRUE(table_sizes.contains(record.id)) << record.id;
    EXPECT_EQ(table_sizes[record.id], record.bytes) << record.id;
  }

  uint64_t total = summary_value(table, "Total");
  EXPECT_EQ(total, 5'180'000u);
  expect_total_matches(records, total);
  EXPECT_EQ(summary_value(slurp(k_recordings / "du-verbose.txt"), "Total"), total);
}

TEST(BuildkitStore, ParsesTheCacheMountListing) {
  std::vector<DuRecord> records = recording("du-cachemount-verbose.txt");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].id, "mxom5j8fbb3z7fby0s651bq9k");
  EXPECT_EQ(records[1].id, "mdufezloxvzgs8mwfegx8c8x5");
  for (const DuRecord& record : records) {
    EXPECT_EQ(record.type, "exec.cachemount");
    EXPECT_EQ(record.bytes, 8'190u);
    EXPECT_TRUE(record.description.starts_with("cached mount /cache from exec")) << record.id;
  }
  // The same two records the full listing holds.
  std::set<std::string> in_full;
  for (const DuRecord& record : recording("du-verbose.txt")) {
    if (record.type == "exec.cachemount") {
      in_full.insert(record.id);
    }
  }
  EXPECT_EQ(in_full, (std::set<std::string>{records[0].id, records[1].id}));
}

TEST(BuildkitStore, ParsesTheListingAfterThePrune) {
  std::string text = slurp(k_recordings / "du-verbose-after-prune.txt");
  std::vector<DuRecord> records = parse_du_verbose(text);
  ASSERT_EQ(records.size(), 5u);
  EXPECT_EQ(count_by_type(records),
            (std::map<std::string, int>{{"source.local", 3}, {"exec.cachemount", 2}}));
  expect_total_matches(records, summary_value(text, "Total"));
}

TEST(BuildkitStore, PruneListingHasNoTypeAndHoldsExactlyTheRegularRecords) {
  // v0.11's prune streams records back without their type: every one parses with type "",
  // which BuildKit's own prune reads as `regular`.
  std::string text = slurp(k_recordings / "prune-regular-keep1.txt");
  std::vector<DuRecord> pruned = parse_du_verbose(text);
  ASSERT_EQ(pruned.size(), 14u);
  std::set<std::string> pruned_ids;
  for (const DuRecord& record : pruned) {
    EXPECT_EQ(record.type, "") << record.id;
    EXPECT_EQ(effective_type(record), "regular") << record.id;
    pruned_ids.insert(record.id);
  }
  std::set<std::string> regular_ids;
  for (const DuRecord& record : recording("du-verbose.txt")) {
    if (record.type == "regular") {
      regular_ids.insert(record.id);
    }
  }
  EXPECT_EQ(pruned_ids, regular_ids);
  uint64_t total = summary_value(text, "Total");
  EXPECT_EQ(total, 3'160'000u);
  expect_total_matches(pruned, total);
}

TEST(BuildkitStore, UsageGroupsTheRecordsByType) {
  StoreUsage usage = usage_from_records(recording("du-verbose.txt"));
  EXPECT_EQ(
      usage.records_by_type,
      (std::map<std::string, int>{{"regular", 14}, {"source.local", 3}, {"exec.cachemount", 2}}));
  EXPECT_EQ(usage.bytes_by_type["regular"], 3'160'030u);
  EXPECT_EQ(usage.bytes_by_type["source.local"], 2'002'290u);
  EXPECT_EQ(usage.bytes_by_type["exec.cachemount"], 16'380u);
  EXPECT_EQ(usage.total_bytes, 5'178'700u);
  // Only what the layer lever can free: idle cache mounts are not.
  EXPECT_EQ(usage.reclaimable_bytes, 3'160'030u);
}

TEST(BuildkitStore, KeepAddsWhatTheFilterCannotFree) {
  std::vector<DuRecord> records = recording("du-verbose.txt");
  // 2,002,290 B of source.local + 16,380 B of exec.cachemount = 2,018,670 B: 3 MB rounded up.
  EXPECT_EQ(regular_keep_mb(120, records), 120'003u);
  EXPECT_EQ(regular_keep_mb(1, records), 1'003u);
  EXPECT_EQ(regular_keep_mb(0.5, records), 503u);
  // 0 is "reclaim every regenerable layer", BuildKit's no-limit: adding anything would make it a
  // limit again.
  EXPECT_EQ(regular_keep_mb(0, records), 0u);
  EXPECT_EQ(regular_keep_mb(-1, records), 0u);
  // After the prune only unfreeable records are left: the same 3 MB.
  EXPECT_EQ(regular_keep_mb(120, recording("du-verbose-after-prune.txt")), 120'003u);
  // Nothing but layers: the keep is the keep.
  EXPECT_EQ(regular_keep_mb(120, recording("prune-regular-keep1.txt")), 120'000u);
  EXPECT_EQ(regular_keep_mb(120, {}), 120'000u);
}

TEST(BuildkitStore, KeepOfTheFieldNotes) {
  // 196 GB of cache mounts: a bare 120000 would be below the store size before a single layer
  // counted, so BuildKit would delete every idle layer.
  std::vector<DuRecord> records = {
      {"ccache", "exec.cachemount", 150'000'000'000, true, false, "cached mount /ccache"},
      {"cargo", "exec.cachemount", 46'000'000'000, true, false, "cached mount /cargo"},
      {"layer", "regular", 90'000'000'000, true, false, "mount / from exec make"},
      {"untyped", "", 1'000'000'000, true, false, "counted as regular, like BuildKit does"},
      {"ctx", "source.local", 1'500'001, true, false, "local source for context"},
      // Left out of BuildKit's store size (cache/manager.go), so not added either.
      {"shared", "exec.cachemount", 7'000'000'000, true, true, "cached mount /shared"},
  };
  EXPECT_EQ(regular_keep_mb(120, records), 120'000u + 196'000u + 2u);
}

TEST(BuildkitStore, PruneArgvIsExact) {
  BuildkitStore local(BuildkitAddress{"", "buildctl's default"});
  EXPECT_EQ(local.prune_argv(120'003),
            (std::vector<std::string>{"buildctl", "prune", "--filter", "type==regular",
                                      "--keep-storage", "120003", "--verbose"}));
  EXPECT_EQ(local.prune_argv(0),
            (std::vector<std::string>{"buildctl", "prune", "--filter", "type==regular",
                                      "--keep-storage", "0", "--verbose"}));
  BuildkitStore remote(BuildkitAddress{"tcp://10.0.0.5:1234", "BUILDKIT_HOST"});
  EXPECT_EQ(
      remote.prune_argv(1'003),
      (std::vector<std::string>{"buildctl", "--addr", "tcp://10.0.0.5:1234", "prune", "--filter",
                                "type==regular", "--keep-storage", "1003", "--verbose"}));
}

TEST(BuildkitStore, HasNoImageStoreToList) {
  BuildkitStore store(BuildkitAddress{"", "buildctl's default"});
  EXPECT_EQ(store.engine(), "buildkit");
  EXPECT_TRUE(store.stale_images().empty());
  EXPECT_TRUE(store.tagged_images().empty());
  EXPECT_FALSE(store.remove_image("localhost/anything:tag"));
}

// ---------------------------------------------------------------------------------------------
// Where a buildkitd keeps its store: BuildKit's API does not say, so kiln asks the process.

/// Files as a daemon would see them, by path.
auto files(std::map<fs::path, std::string> content) {
  return [content](const fs::path& path) -> tl::expected<std::string, std::string> {
    auto it = content.find(path);
    if (it == content.end()) {
      return tl::unexpected("cannot open " + path.string() + ": No such file or directory");
    }
    return it->second;
  };
}

TEST(BuildkitdRoot, TheRootFlagWinsInEveryForm) {
  std::string how;
  BuildkitdProcess daemon{
      {"buildkitd", "--addr", "unix:///run/b.sock", "--root", "/srv/bk"}, {}, false};
  EXPECT_EQ(buildkitd_root(daemon, files({}), &how).value(), fs::path("/srv/bk"));
  EXPECT_EQ(how, "its --root");
  daemon.argv = {"buildkitd", "--root=/srv/eq"};
  EXPECT_EQ(buildkitd_root(daemon, files({}), &how).value(), fs::path("/srv/eq"));
  daemon.argv = {"buildkitd", "-root", "/srv/go"};
  EXPECT_EQ(buildkitd_root(daemon, files({}), &how).value(), fs::path("/srv/go"));
  // Go's flag package keeps the last value; and a config's root loses to the flag.
  daemon.argv = {"buildkitd", "--root", "/a", "--config", "/c.toml", "--root", "/b"};
  EXPECT_EQ(buildkitd_root(daemon, files({{"/c.toml", "root = \"/cfg\"\n"}}), &how).value(),
            fs::path("/b"));
}

TEST(BuildkitdRoot, ThenTheConfigFilesRoot) {
  std::string how;
  BuildkitdProcess daemon{{"buildkitd", "--config", "/etc/bk.toml"}, {}, false};
  auto read = files({{"/etc/bk.toml", "debug = true\nroot = \"/data/buildkit\"\n[worker.oci]\n"
                                      "  enabled = true\n"}});
  EXPECT_EQ(buildkitd_root(daemon, read, &how).value(), fs::path("/data/buildkit"));
  EXPECT_EQ(how, "root in /etc/bk.toml");

  // Without --config, the default file, when it exists.
  daemon.argv = {"buildkitd"};
  EXPECT_EQ(buildkitd_root(
                daemon, files({{"/etc/buildkit/buildkitd.toml", "root = \"/big/disk\"\n"}}), &how)
                .value(),
            fs::path("/big/disk"));
  EXPECT_EQ(how, "root in /etc/buildkit/buildkitd.toml");

  // A named config that cannot be read or parsed leaves the root unknown.
  daemon.argv = {"buildkitd", "--config=/missing.toml"};
  EXPECT_NE(buildkitd_root(daemon, files({}), &how).error().find("cannot read its config file"),
            std::string::npos);
  daemon.argv = {"buildkitd", "--config", "/bad.toml"};
  EXPECT_NE(buildkitd_root(daemon, files({{"/bad.toml", "root = [\n"}}), &how)
                .error()
                .find("cannot read its config file /bad.toml"),
            std::string::npos);
}

TEST(BuildkitdRoot, ThenBuildkitsDefaultsRootfulAndRootless) {
  std::string how;
  BuildkitdProcess rootful{{"/usr/bin/buildkitd"}, {}, false};
  EXPECT_EQ(buildkitd_root(rootful, files({}), &how).value(), fs::path("/var/lib/buildkit"));
  EXPECT_EQ(how, "BuildKit's default");

  BuildkitdProcess rootless{{"buildkitd"}, {{"USER", "ci"}, {"HOME", "/home/ci"}}, true};
  EXPECT_EQ(buildkitd_root(rootless, files({}), &how).value(),
            fs::path("/home/ci/.local/share/buildkit"));
  rootless.env["XDG_DATA_HOME"] = "/data/ci";
  EXPECT_EQ(buildkitd_root(rootless, files({}), &how).value(), fs::path("/data/ci/buildkit"));
  // In a user namespace the config is the user's own.
  EXPECT_EQ(buildkitd_root(rootless,
                           files({{"/home/ci/.config/buildkit/buildkitd.toml", "root = \"/r\"\n"}}),
                           &how)
                .value(),
            fs::path("/r"));

  // Mapped root in a user namespace keeps the rootful defaults (buildkitd's own rule).
  BuildkitdProcess mapped_root{{"buildkitd"}, {{"USER", "root"}, {"HOME", "/root"}}, true};
  EXPECT_EQ(buildkitd_root(mapped_root, files({}), &how).value(), fs::path("/var/lib/buildkit"));
}

// ---------------------------------------------------------------------------------------------
// StoreSafety: structural. A prune without a filter threw away 4.9 GB of compile cache once;
// these keep any such command from being written anywhere in kiln.

/// The repository root: KILN_TEST_FIXTURES is <root>/tests/fixtures.
fs::path repo_root() {
  return fs::path(KILN_TEST_FIXTURES).parent_path().parent_path();
}

struct Finding {
  std::string file;
  std::string what;
  std::string excerpt;
};

std::vector<Finding> scan(const fs::path& file, const std::string& text) {
  std::vector<Finding> findings;
  std::string name = file.lexically_relative(repo_root()).generic_string();
  auto excerpt = [&](size_t at) {
    size_t from = at < 40 ? 0 : at - 40;
    std::string shown = text.substr(from, 120);
    std::replace(shown.begin(), shown.end(), '\n', ' ');
    return shown;
  };
  // Anywhere, code or comment: commands that prune without a filter, BuildKit's or buildah's,
  // and the store-wide image removal.
  static const std::vector<std::pair<std::regex, std::string>> k_banned = {
      {std::regex(R"(system\s+prune)", std::regex::icase), "system prune"},
      {std::regex(R"(builder\s+prune)", std::regex::icase), "builder prune"},
      {std::regex(R"(buildah\s+prune)", std::regex::icase), "buildah prune"},
      {std::regex(R"(\brmi\s+(-a\b|--all\b))"), "rmi -a / rmi --all"},
      {std::regex(R"re(\brmi\b[^;]{0,80}"(--all|-a)")re"), "\"--all\" near rmi"},
      {std::regex(R"re("(--all|-a)"[^;]{0,80}\brmi\b)re"), "\"--all\" near rmi"},
  };
  for (const auto& [pattern, what] : k_banned) {
    for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern);
         it != std::sregex_iterator(); ++it) {
      findings.push_back({name, what, excerpt(static_cast<size_t>(it->position()))});
    }
  }
  // The literal "prune" builds a prune command: only BuildkitStore::prune_argv may. `kiln
  // history prune` and `kiln records prune` are kiln's own subcommands: they forget rows of
  // history.db and remove run folders, no engine's cache.
  if (name != "src/disk/buildkit_store.cpp" && name != "src/cli/history_command.cpp" &&
      name != "src/cli/records_command.cpp") {
    for (size_t at = text.find("\"prune\""); at != std::string::npos;
         at = text.find("\"prune\"", at + 1)) {
      findings.push_back({name, "the literal \"prune\"", excerpt(at)});
    }
  }
  return findings;
}

TEST(StoreSafety, NoSourceFileCanPruneCompileCaches) {
  fs::path src = repo_root() / "src";
  ASSERT_TRUE(fs::is_directory(src)) << src;
  ASSERT_TRUE(fs::exists(src / "disk" / "buildkit_store.cpp"))
      << "the scan looks at the wrong tree";
  int scanned = 0;
  std::vector<Finding> findings;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) {
      continue;
    }
    ++scanned;
    for (Finding& finding : scan(entry.path(), slurp(entry.path()))) {
      findings.push_back(std::move(finding));
    }
  }
  EXPECT_GT(scanned, 10);
  for (const Finding& finding : findings) {
    ADD_FAILURE() << finding.file << ": " << finding.what << ": ..." << finding.excerpt << "...";
  }
}

TEST(StoreSafety, TheScanCatchesWhatItMustCatch) {
  // The scan itself, on text that must trip it, so a broken pattern cannot pass silently.
  fs::path fake = repo_root() / "src" / "engine" / "example.cpp";
  EXPECT_EQ(scan(fake, "run({\"nerdctl\", \"system\", \"prune\"});").size(), 1u);
  EXPECT_EQ(scan(fake, "// then nerdctl system prune -f").size(), 1u);
  EXPECT_EQ(scan(fake, "// docker builder  prune").size(), 1u);
  EXPECT_EQ(scan(fake, "// buildah prune clears it").size(), 1u);
  EXPECT_EQ(scan(fake, "// buildah rmi -a").size(), 1u);
  EXPECT_EQ(scan(fake, "argv = {\"buildah\", \"rmi\", \"--all\"};").size(), 1u);
  EXPECT_EQ(scan(fake, "argv = {\"buildah\", \"rmi\", \"-a\", \"-f\"};").size(), 1u);
  EXPECT_EQ(scan(fake, "argv = {\"buildah\", \"images\", \"--all\"};").size(), 0u);
  EXPECT_EQ(scan(fake, "std::string terminal = \"--all\";").size(), 0u);
  EXPECT_EQ(scan(fake, "argv = {\"buildah\", \"rmi\", id};").size(), 0u);
  fs::path own = repo_root() / "src" / "disk" / "buildkit_store.cpp";
  EXPECT_EQ(scan(own, "command({\"prune\", \"--filter\"})").size(), 0u);
}

TEST(StoreSafety, PruneArgvAlwaysFiltersToRegular) {
  for (const std::string& address : {std::string(), std::string("unix:///run/buildkit/x.sock"),
                                     std::string("tcp://buildkitd:1234")}) {
    BuildkitStore store(BuildkitAddress{address, "test"});
    for (uint64_t keep : {0ull, 1ull, 1003ull, 120'003ull, 316'002ull}) {
      std::vector<std::string> argv = store.prune_argv(keep);
      auto filter = std::find(argv.begin(), argv.end(), "--filter");
      ASSERT_NE(filter, argv.end()) << join(argv, " ");
      ASSERT_NE(filter + 1, argv.end()) << join(argv, " ");
      EXPECT_EQ(*(filter + 1), "type==regular") << join(argv, " ");
      EXPECT_EQ(std::count(argv.begin(), argv.end(), "--filter"), 1) << join(argv, " ");
      EXPECT_EQ(std::count(argv.begin(), argv.end(), "--all"), 0) << join(argv, " ");
      auto keep_flag = std::find(argv.begin(), argv.end(), "--keep-storage");
      ASSERT_NE(keep_flag, argv.end());
      EXPECT_EQ(*(keep_flag + 1), std::to_string(keep));
    }
  }
}

} // namespace
} // namespace kiln
