#include "chain/chain_loader.h"
#include "temp_dir.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "chain/loader.h"
#include "chain/plan.h"
#include "dockerfile/source.h"
#include "lint/lint.h"
#include "util/image_ref.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path k_chains = fs::path(KILN_TEST_FIXTURES) / "chains";

std::string chain_file(const std::string& name) {
  return (k_chains / name / "chain.toml").string();
}

std::string describe(const Diagnostics& diagnostics) {
  std::string out;
  for (const auto& diagnostic : diagnostics) {
    out += format_diagnostic(diagnostic);
  }
  return out;
}

Diagnostics load_errors(const std::string& name) {
  auto chain = load_chain(chain_file(name));
  if (chain) {
    ADD_FAILURE() << name << " loaded without errors";
    return {};
  }
  return chain.error();
}

// Expects exactly one diagnostic whose message contains `message`, at `line`:`column` of
// `file`, with a hint containing `hint`.
void expect_diagnostic(const Diagnostics& diagnostics, const std::string& file, int line,
                       int column, const std::string& message, const std::string& hint = "") {
  SCOPED_TRACE(message);
  const Diagnostic* found = nullptr;
  for (const auto& diagnostic : diagnostics) {
    if (diagnostic.message.find(message) != std::string::npos) {
      ASSERT_EQ(found, nullptr) << "more than one match in\n" << describe(diagnostics);
      found = &diagnostic;
    }
  }
  ASSERT_NE(found, nullptr) << "no match in\n" << describe(diagnostics);
  EXPECT_EQ(found->pos.file, file);
  EXPECT_EQ(found->pos.line, line);
  EXPECT_EQ(found->pos.column, column);
  EXPECT_NE(found->hint.find(hint), std::string::npos) << "hint: " << found->hint;
}

TEST(LoadChain, ReadsEveryField) {
  auto chain = load_chain(chain_file("valid"));
  ASSERT_TRUE(chain) << describe(chain.error());
  const fs::path dir = k_chains / "valid";

  EXPECT_EQ(chain->file, dir / "chain.toml");
  EXPECT_EQ(chain->dir, dir);
  EXPECT_EQ(chain->name, "demo");
  EXPECT_EQ(chain->engine, "buildah");
  EXPECT_EQ(chain->buildah_isolation, "oci");
  EXPECT_EQ(chain->versions_file, dir / "versions.env");
  EXPECT_EQ(chain->records, dir / "out" / "records");
  EXPECT_EQ(chain->versions,
            (KeyValues{{"ZLIB", "1.3"}, {"OPENSSL", "3.0.13"}, {"DEBIAN", "bookworm-slim"}}));
  EXPECT_EQ(chain->defaults.attempts, 2);
  EXPECT_EQ(chain->defaults.cooldown, std::chrono::milliseconds(1500));
  EXPECT_EQ(chain->defaults.cooldown_max, std::chrono::seconds(30));

  ASSERT_EQ(chain->transient.size(), 1u);
  EXPECT_EQ(chain->transient[0].name, "mirror");
  std::vector<std::string> patterns;
  for (const Pattern& pattern : chain->transient[0].patterns) {
    patterns.push_back(pattern.source());
  }
  EXPECT_EQ(patterns, (std::vector<std::string>{"Could not resolve host", "HTTP (502|503)"}));
  EXPECT_TRUE(chain->transient[0].retry_despite_identical);

  ASSERT_EQ(chain->stages.size(), 2u);
  const Stage& base = chain->stages[0];
  EXPECT_EQ(base.name, "base");
  EXPECT_EQ(base.pos.line, 20);
  EXPECT_EQ(base.pos.column, 1);
  EXPECT_EQ(base.dockerfile, dir / "base" / "Dockerfile");
  EXPECT_EQ(base.context, dir / "base");
  EXPECT_EQ(base.target, "");
  EXPECT_EQ(base.tag, "localhost/demo-base:latest");
  EXPECT_TRUE(base.needs.empty());
  // File order, not toml++'s sorted order.
  EXPECT_EQ(base.build_args, (KeyValues{{"ZLIB", "1.2-local"}, {"DEBIAN", "bookworm"}}));
  ASSERT_EQ(base.build_args_pos.size(), 2u);
  EXPECT_EQ(base.build_args_pos[1].line, 24);
  EXPECT_EQ(base.build_args_pos[1].column, 36);
  EXPECT_EQ(base.attempts, 2);
  EXPECT_EQ(base.declared_args, (std::vector<std::string>{"DEBIAN", "ZLIB"}));

  const Stage& app = chain->stages[1];
  EXPECT_EQ(app.name, "app");
  EXPECT_EQ(app.context, dir);
  EXPECT_EQ(app.target, "runtime");
  EXPECT_EQ(app.tag, "registry.example/app:dev");
  EXPECT_EQ(app.needs, (std::vector<std::string>{"base"}));
  ASSERT_EQ(app.needs_pos.size(), 1u);
  EXPECT_EQ(app.needs_pos[0].line, 31);
  EXPECT_EQ(app.needs_pos[0].column, 10);
  EXPECT_EQ(app.attempts, 5);
  EXPECT_EQ(app.build_args, (KeyValues{{"VERSION", "1.0"}}));
  EXPECT_EQ(app.declared_args, (std::vector<std::string>{"VERSION", "OPENSSL"}));
  ASSERT_EQ(app.secrets.size(), 2u);
  EXPECT_EQ(app.secrets[0].id, "token");
  EXPECT_EQ(app.secrets[0].env, "API_TOKEN");
  EXPECT_TRUE(app.secrets[0].file.empty());
  EXPECT_EQ(app.secrets[0].pos.line, 34);
  EXPECT_EQ(app.secrets[0].pos.column, 3);
  EXPECT_EQ(app.secrets[1].id, "netrc");
  EXPECT_EQ(app.secrets[1].env, "");
  EXPECT_EQ(app.secrets[1].file, dir / "secrets" / "netrc");
}

TEST(LoadChain, AHeredocMarkerInALabelHidesNoArgFromTheVersionsPins) {
  // `<<EOF` inside a LABEL value is text: the ARG after it is declared, so its pin is passed.
  auto chain = load_chain(chain_file("label_heredoc"));
  ASSERT_TRUE(chain) << describe(chain.error());
  const Stage& app = chain->stages[0];
  EXPECT_EQ(app.declared_args, (std::vector<std::string>{"VERSION"}));
  EXPECT_EQ(stage_build_args(*chain, app, {}), (KeyValues{{"VERSION", "1.2.3"}}));
}

TEST(LoadChain, KeepsEachDockerfileParsedOnceOnItsStages) {
  auto chain = load_chain(chain_file("cache_valid"));
  ASSERT_TRUE(chain) << describe(chain.error());
  ASSERT_GE(chain->stages.size(), 2u);
  const Stage& first = chain->stages[0];
  ASSERT_NE(first.dockerfile_source, nullptr);
  EXPECT_EQ(first.dockerfile_source->path, first.dockerfile);
  EXPECT_FALSE(first.dockerfile_source->parsed.instructions.empty());
  for (const auto& stage : chain->stages) {
    if (stage.dockerfile == first.dockerfile) {
      EXPECT_EQ(stage.dockerfile_source, first.dockerfile_source) << stage.name;
    }
  }
}

TEST(LoadChain, ADockerfileThatDoesNotParseIsALoadErrorAtItsPosition) {
  Diagnostics errors = load_errors("dockerfile_parse_error");
  // Two stages build from the file: its error is reported once.
  ASSERT_EQ(errors.size(), 1u) << describe(errors);
  std::string dockerfile = (k_chains / "dockerfile_parse_error" / "Dockerfile").string();
  expect_diagnostic(
      errors, dockerfile, 3, 3, "the Dockerfile does not parse: unknown instruction: COPPY",
      "stage 'one' builds from this file (" + chain_file("dockerfile_parse_error") + ":6)");
}

TEST(LoadChain, AnEmptyCacheTargetListIsNoTargetNotTheDefaults) {
  auto none = load_chain(chain_file("gates_no_cache_targets"));
  ASSERT_TRUE(none) << describe(none.error());
  ASSERT_TRUE(none->gates.cache_mount_targets.has_value());
  EXPECT_TRUE(none->gates.cache_mount_targets->empty());
  EXPECT_TRUE(lint_options(none->gates).cache_targets.empty());

  auto unset = load_chain(chain_file("minimal"));
  ASSERT_TRUE(unset) << describe(unset.error());
  EXPECT_FALSE(unset->gates.cache_mount_targets.has_value());
  EXPECT_EQ(lint_options(unset->gates).cache_targets, LintOptions{}.cache_targets);
}

TEST(LoadChain, FillsDefaults) {
  auto chain = load_chain(chain_file("minimal"));
  ASSERT_TRUE(chain) << describe(chain.error());
  const fs::path dir = k_chains / "minimal";
  EXPECT_EQ(chain->engine, "buildah");
  EXPECT_EQ(chain->buildah_isolation, "chroot");
  EXPECT_TRUE(chain->versions_file.empty());
  EXPECT_TRUE(chain->versions.empty());
  EXPECT_EQ(chain->records, dir / "records");
  EXPECT_EQ(chain->defaults.attempts, 3);
  EXPECT_EQ(chain->defaults.cooldown, std::chrono::seconds(5));
  EXPECT_EQ(chain->defaults.cooldown_max, std::chrono::seconds(60));
  EXPECT_TRUE(chain->transient.empty());
  ASSERT_EQ(chain->stages.size(), 1u);
  EXPECT_EQ(chain->stages[0].context, dir);
  EXPECT_EQ(chain->stages[0].tag, "localhost/mini-only:latest");
  EXPECT_EQ(chain->stages[0].attempts, 3);
  EXPECT_TRUE(chain->stages[0].declared_args.empty());
}

TEST(LoadChain, ASmokeStageKeepsAStableNameOnlyWhenTheFileWritesIt) {
  testing::TempDir dir;
  dir.write("app.Dockerfile", "FROM scratch\n");
  dir.write("smoke.Dockerfile", "FROM app\n");
  auto chain_with = [&](const std::string& smoke_tag) {
    return load_chain(dir.write("chain.toml", "[chain]\nname = \"s\"\n"
                                              "[[stage]]\nname = \"app\"\n"
                                              "dockerfile = \"app.Dockerfile\"\n"
                                              "[[stage]]\nname = \"smoke\"\nkind = \"smoke\"\n"
                                              "dockerfile = \"smoke.Dockerfile\"\n"
                                              "needs = [\"app\"]\n" +
                                                  smoke_tag));
  };
  auto plain = chain_with("");
  ASSERT_TRUE(plain) << describe(plain.error());
  EXPECT_TRUE(plain->stages[0].stable_name);
  EXPECT_FALSE(plain->stages[1].stable_name);
  EXPECT_EQ(plain->stages[1].tag, "localhost/s-smoke:latest") << "the root of its work name";
  auto named = chain_with("tag = \"localhost/s-checked:latest\"\n");
  ASSERT_TRUE(named) << describe(named.error());
  EXPECT_TRUE(named->stages[1].stable_name);
}

TEST(LoadChain, RelativeChainPathResolvesAgainstItsFolder) {
  fs::path previous = fs::current_path();
  fs::current_path(k_chains);
  auto chain = load_chain("minimal/chain.toml");
  fs::current_path(previous);
  ASSERT_TRUE(chain) << describe(chain.error());
  EXPECT_EQ(chain->file, k_chains / "minimal" / "chain.toml");
  EXPECT_EQ(chain->stages[0].dockerfile, k_chains / "minimal" / "Dockerfile");
}

TEST(LoadChain, UnreadableFile) {
  std::string file = (k_chains / "no-such-dir" / "chain.toml").string();
  auto chain = load_chain(file);
  ASSERT_FALSE(chain);
  ASSERT_EQ(chain.error().size(), 1u);
  EXPECT_EQ(chain.error()[0].pos.file, file);
  EXPECT_EQ(chain.error()[0].pos.line, 0);
  EXPECT_EQ(chain.error()[0].message, "cannot read chain file: No such file or directory");
}

TEST(LoadChain, AChainFileThatIsAFifoIsRefusedAtOnce) {
  fs::path fifo = fs::temp_directory_path() / ("kiln-chain-fifo-" + std::to_string(::getpid()));
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto chain = load_chain(fifo); // no writer ever comes: an open() that waits never returns
  fs::remove(fifo);
  ASSERT_FALSE(chain);
  EXPECT_EQ(chain.error()[0].message, "cannot read chain file: not a regular file");
}

// Found by fuzzing: toml++ 3.3.0 reaches undefined behaviour classifying U+00FA where it looks for
// whitespace (upstream's bug, tests/fuzz/ubsan_ignore.txt). With Debian's build it is an error
// at that character, and must stay one.
TEST(LoadChain, ANonAsciiCharacterWhereTomlWantsWhitespaceIsATomlError) {
  fs::path file = fs::temp_directory_path() / ("kiln-chain-u00fa-" + std::to_string(::getpid()));
  const std::string input("\xc3\xba> Dockerfile <==\nFP==> a\x1a\0\0\0\0O\0\0\0M scratch\n==pp",
                          49);
  std::ofstream(file, std::ios::binary) << input;
  auto chain = load_chain(file);
  fs::remove(file);
  ASSERT_FALSE(chain);
  ASSERT_EQ(chain.error().size(), 1u);
  EXPECT_EQ(chain.error()[0].pos.line, 1);
  EXPECT_EQ(chain.error()[0].pos.column, 1);
  EXPECT_NE(chain.error()[0].message.find("invalid TOML"), std::string::npos)
      << chain.error()[0].message;
}

TEST(LoadChain, TomlSyntaxError) {
  Diagnostics errors = load_errors("syntax_error");
  ASSERT_EQ(errors.size(), 1u);
  expect_diagnostic(errors, chain_file("syntax_error"), 2, 15,
                    "invalid TOML: error while parsing string: unescaped control characters");
}

TEST(LoadChain, UnknownKeys) {
  Diagnostics errors = load_errors("unknown_keys");
  std::string file = chain_file("unknown_keys");
  EXPECT_EQ(errors.size(), 5u) << describe(errors);
  expect_diagnostic(errors, file, 3, 1, "unknown key 'engin' in [chain]", "did you mean 'engine'?");
  expect_diagnostic(errors, file, 8, 2, "unknown key 'stages' at the top level",
                    "did you mean 'stage'?");
  expect_diagnostic(errors, file, 13, 1, "unknown key 'dockerfle' in [[stage]]",
                    "did you mean 'dockerfile'?");
  expect_diagnostic(errors, file, 15, 1, "unknown key 'colour' in [[stage]]",
                    "valid keys: name, dockerfile, context, target, tag, needs, build_args, "
                    "secrets, attempts");
  expect_diagnostic(errors, file, 6, 13, "unknown isolation 'chrot'", "did you mean 'chroot'?");
  // Sorted top to bottom, the way an editor walks them.
  EXPECT_EQ(errors.front().pos.line, 3);
  EXPECT_EQ(errors.back().pos.line, 15);
}

TEST(LoadChain, WrongTypesAndRanges) {
  Diagnostics errors = load_errors("bad_values");
  std::string file = chain_file("bad_values");
  EXPECT_EQ(errors.size(), 12u) << describe(errors);
  expect_diagnostic(errors, file, 2, 8, "chain name 'Bad Name' is not valid", "lower-case");
  expect_diagnostic(errors, file, 3, 10, "unsupported engine 'podman'",
                    "supported engines: buildah");
  expect_diagnostic(errors, file, 6, 13, "unknown isolation 'vm'",
                    "use one of: chroot, oci, rootless");
  expect_diagnostic(errors, file, 9, 12, "'attempts' in [defaults] must be at least 1, not 0");
  expect_diagnostic(errors, file, 10, 14,
                    "'cooldown_s' in [defaults] must be a number of seconds, not a string");
  expect_diagnostic(errors, file, 11, 18,
                    "'cooldown_max_s' in [defaults] must be 0 or more, not -1");
  expect_diagnostic(errors, file, 15, 12, "'patterns' in [[transient]] is empty");
  expect_diagnostic(errors, file, 16, 27,
                    "'retry_despite_identical' in [[transient]] must be a boolean, not a string");
  expect_diagnostic(errors, file, 19, 8, "stage name '1st' is not valid", "FROM <name>");
  expect_diagnostic(errors, file, 21, 12,
                    "'attempts' in [[stage]] must be an integer, not a float");
  expect_diagnostic(errors, file, 22, 9, "'needs' in [[stage]] must be an array, not a string");
  expect_diagnostic(errors, file, 23, 10, "'target' in [[stage]] must be a string, not an integer");
}

TEST(LoadChain, DurationsSizesAndCountsAreBoundedAtLoad) {
  // Each used to be taken as written: a watch interval of 1e10 s spun the watchdog, a cooldown
  // past 2.2e6 s overflowed an int of milliseconds.
  Diagnostics errors = load_errors("out_of_range");
  std::string file = chain_file("out_of_range");
  EXPECT_EQ(errors.size(), 6u) << describe(errors);
  expect_diagnostic(errors, file, 5, 12,
                    "'attempts' in [defaults] is 10000000, more than the 1000000 allowed");
  expect_diagnostic(errors, file, 6, 18,
                    "'cooldown_max_s' in [defaults] is 2200000 seconds, more than the 86400 "
                    "allowed",
                    "write seconds");
  expect_diagnostic(errors, file, 7, 19,
                    "'stall_timeout_s' in [defaults] is 1e+300 seconds, more than the 2592000 "
                    "allowed",
                    "a duration longer than 30 days is a mistake");
  expect_diagnostic(errors, file, 8, 13, "'timeout_s' in [defaults] must be a finite number");
  expect_diagnostic(errors, file, 11, 11, "'need_gb' in [disk]");
  expect_diagnostic(errors, file, 12, 20,
                    "'watch_interval_s' in [disk] is 10000000000 seconds, more than the 86400 "
                    "allowed");
}

TEST(LoadChain, CooldownMaxBelowCooldown) {
  Diagnostics errors = load_errors("cooldown_order");
  ASSERT_EQ(errors.size(), 1u) << describe(errors);
  expect_diagnostic(errors, chain_file("cooldown_order"), 6, 18,
                    "'cooldown_max_s' in [defaults] (4.5) is below 'cooldown_s' (10)",
                    "raise cooldown_max_s to at least 10");
}

TEST(LoadChain, MissingRequiredKeysPointAtTheTable) {
  Diagnostics errors = load_errors("missing_required");
  std::string file = chain_file("missing_required");
  EXPECT_EQ(errors.size(), 5u) << describe(errors);
  expect_diagnostic(errors, file, 1, 1, "missing required key 'name' in [chain]");
  expect_diagnostic(errors, file, 4, 1, "missing required key 'name' in [[transient]]");
  expect_diagnostic(errors, file, 7, 1, "missing required key 'name' in [[stage]]");
  expect_diagnostic(errors, file, 10, 1, "missing required key 'dockerfile' in [[stage]]",
                    "add dockerfile = ...");
  expect_diagnostic(errors, file, 12, 12, "missing required key 'id' in a secret of [[stage]]");
}

TEST(LoadChain, MissingTables) {
  Diagnostics errors = load_errors("no_tables");
  std::string file = chain_file("no_tables");
  EXPECT_EQ(errors.size(), 2u) << describe(errors);
  expect_diagnostic(errors, file, 1, 1, "missing required table [chain]");
  expect_diagnostic(errors, file, 1, 1, "missing required table [[stage]]");
}

TEST(LoadChain, MissingFilesNameTheWrittenAndResolvedPath) {
  Diagnostics errors = load_errors("missing_files");
  std::string file = chain_file("missing_files");
  const fs::path dir = k_chains / "missing_files";
  EXPECT_EQ(errors.size(), 6u) << describe(errors);
  expect_diagnostic(errors, file, 3, 12,
                    "versions file 'pins.env' does not exist (resolved to " +
                        (dir / "pins.env").string() + ")");
  expect_diagnostic(errors, file, 7, 14,
                    "dockerfile 'docker/Dockerfile' does not exist (resolved to " +
                        (dir / "docker" / "Dockerfile").string() + ")",
                    "relative path starts from the chain file's folder");
  expect_diagnostic(errors, file, 8, 11,
                    "context 'ctx' does not exist (resolved to " + (dir / "ctx").string() + ")");
  expect_diagnostic(errors, file, 9, 33,
                    "secret file 'keys/id_rsa' does not exist (resolved to " +
                        (dir / "keys" / "id_rsa").string() + ")");
  expect_diagnostic(errors, file, 13, 14,
                    "dockerfile '.' is not a regular file (resolved to " + dir.string() + ")");
  expect_diagnostic(errors, file, 14, 11,
                    "context 'chain.toml' is not a directory (resolved to " +
                        (dir / "chain.toml").string() + ")");
}

TEST(LoadChain, UnknownNeeds) {
  Diagnostics errors = load_errors("needs");
  std::string file = chain_file("needs");
  EXPECT_EQ(errors.size(), 3u) << describe(errors);
  expect_diagnostic(errors, file, 11, 10, "unknown stage 'bsae' in needs", "did you mean 'base'?");
  expect_diagnostic(errors, file, 11, 26, "unknown stage 'zzzzzz' in needs", "stages: base, app");
  expect_diagnostic(errors, file, 11, 36,
                    "each of 'needs' in [[stage]] must be a stage name, not an integer");
}

TEST(LoadChain, DuplicateStageName) {
  Diagnostics errors = load_errors("duplicate_stage");
  std::string file = chain_file("duplicate_stage");
  EXPECT_EQ(errors.size(), 2u) << describe(errors);
  expect_diagnostic(errors, file, 13, 10, "duplicate stage name 'a'",
                    "the first stage named 'a' is on line 5");
  expect_diagnostic(errors, file, 9, 8, "stage name 'App' is not valid");
}

TEST(LoadChain, DependencyCycles) {
  Diagnostics errors = load_errors("cycles");
  std::string file = chain_file("cycles");
  ASSERT_EQ(errors.size(), 2u) << describe(errors);
  EXPECT_EQ(errors[0].message, "dependency cycle: a -> b -> c -> a");
  EXPECT_EQ(errors[0].pos.line, 17);
  EXPECT_EQ(errors[0].pos.column, 18);
  EXPECT_EQ(errors[1].message, "dependency cycle: self -> self");
  EXPECT_EQ(errors[1].pos.line, 22);
  EXPECT_EQ(errors[1].pos.column, 10);
}

// The needs a stage's Dockerfile implies, besides those written: chain order, each placed at the
// reference that implies it.
TEST(LoadChain, AChainStageTheDockerfileNamesIsANeed) {
  auto chain = load_chain(chain_file("inferred_needs"));
  ASSERT_TRUE(chain) << describe(chain.error());
  const fs::path dir = k_chains / "inferred_needs";
  auto needs = [&](const std::string& name) { return chain->find_stage(name)->needs; };
  using Names = std::vector<std::string>;
  EXPECT_EQ(needs("base"), Names{});
  // Written first, then what the Dockerfile names in chain order (it names toolchain last).
  EXPECT_EQ(needs("app"), (Names{"toolchain", "base"}));
  const Stage* app = chain->find_stage("app");
  ASSERT_EQ(app->needs_pos.size(), 2u);
  EXPECT_EQ(app->needs_pos[1].file, (dir / "app.Dockerfile").string());
  EXPECT_EQ(app->needs_pos[1].line, 3);
  EXPECT_EQ(app->needs_pos[1].column, 6);
  // Named three times, needed once.
  EXPECT_EQ(needs("tools"), (Names{"base", "toolchain"}));
  EXPECT_EQ(needs("mounts"), Names{"toolchain"});
  // Global ARGs expand as BuildKit expands them.
  EXPECT_EQ(needs("pinned"), Names{"base"});
  // Only the Dockerfile stages the target builds on count: `unused` names base.
  EXPECT_EQ(needs("targeted"), Names{"toolchain"});
}

TEST(LoadChain, NeedsTheDockerfileImpliesAreChecked) {
  Diagnostics errors = load_errors("needs_errors");
  const fs::path dir = k_chains / "needs_errors";
  std::string file = chain_file("needs_errors");
  EXPECT_EQ(errors.size(), 4u) << describe(errors);
  expect_diagnostic(errors, (dir / "again.Dockerfile").string(), 3, 6,
                    "COPY --from=again names stage 'again' itself: a stage cannot build on its "
                    "own image",
                    "name another stage of the chain, or an image from a registry by its full "
                    "path");
  // One typo away from a stage: the engine would look for it in a registry. `busybox` and a
  // registry image of a stage's name are left to the engine.
  expect_diagnostic(errors, (dir / "typo.Dockerfile").string(), 3, 6,
                    "FROM ponng names 'ponng', which is no stage of the chain",
                    "did you mean 'pong'?");
  // A cycle through the Dockerfiles is reported where a Dockerfile closes it.
  expect_diagnostic(errors, (dir / "pong.Dockerfile").string(), 1, 6,
                    "dependency cycle: ping -> pong -> ping");
  // A need written by hand still names a stage of the chain.
  expect_diagnostic(errors, file, 28, 10, "unknown stage 'nowhere' in needs");
}

// The demo chain with every needs line removed loads with the same needs.
TEST(LoadChain, TheDemoChainNeedsNoNeedsLines) {
  const fs::path demo = fs::path(KILN_TEST_FIXTURES).parent_path().parent_path() / "examples/hello";
  testing::TempDir dir;
  fs::copy(demo / "stages", dir.path() / "stages", fs::copy_options::recursive);
  fs::copy(demo / "versions.env", dir.path() / "versions.env");
  std::ifstream in(demo / "chain.toml");
  std::ofstream out(dir.path() / "chain.toml");
  int removed = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("needs = ")) {
      ++removed;
    } else {
      out << line << "\n";
    }
  }
  out.close();
  EXPECT_EQ(removed, 4);
  auto written = load_chain(demo / "chain.toml");
  auto inferred = load_chain(dir.path() / "chain.toml");
  ASSERT_TRUE(written) << describe(written.error());
  ASSERT_TRUE(inferred) << describe(inferred.error());
  ASSERT_EQ(written->stages.size(), inferred->stages.size());
  for (size_t i = 0; i < written->stages.size(); ++i) {
    EXPECT_EQ(written->stages[i].needs, inferred->stages[i].needs) << written->stages[i].name;
  }
}

TEST(LoadChain, AMatrixStageIsOneStagePerCombination) {
  auto chain = load_chain(chain_file("matrix"));
  ASSERT_TRUE(chain) << describe(chain.error());
  std::vector<std::string> names;
  for (const auto& stage : chain->stages) {
    names.push_back(stage.name);
  }
  // The variables vary in the order written, the last the fastest.
  EXPECT_EQ(names, (std::vector<std::string>{"base", "lib-zlib-2", "lib-zlib-s", "lib-png-2",
                                             "lib-png-s", "lib-jpeg-2", "lib-jpeg-s", "final"}));
  const Stage* png = chain->find_stage("lib-png-s");
  ASSERT_NE(png, nullptr);
  EXPECT_EQ(png->tag, "localhost/matrix-png:os");
  // A `${...}` that is no matrix variable stays as written.
  EXPECT_EQ(png->build_args, (KeyValues{{"LIB", "png"}, {"FLAGS", "-Os ${keep}"}}));
  EXPECT_EQ(png->artifacts, std::vector<std::string>{"/opt/png/s"});
  EXPECT_EQ(png->needs, std::vector<std::string>{"base"});
  // Each copy is placed at its table.
  EXPECT_EQ(png->pos.line, 9);
  EXPECT_EQ(png->build_args_pos[0].line, 13);
  EXPECT_EQ(chain->find_stage("final")->needs,
            (std::vector<std::string>{"base", "lib-zlib-s", "lib-png-2"}));
}

TEST(LoadChain, MatrixMistakes) {
  Diagnostics errors = load_errors("matrix_errors");
  std::string file = chain_file("matrix_errors");
  EXPECT_EQ(errors.size(), 12u) << describe(errors);
  expect_diagnostic(errors, file, 5, 8, "the matrix names two stages 'lib'",
                    "use the matrix's variables in the name, e.g. name = \"lib-${lib}\"");
  expect_diagnostic(errors, file, 12, 22, "matrix variable 'v' holds 'a' twice");
  expect_diagnostic(errors, file, 12, 27,
                    "each value of matrix variable 'v' must be a string or an integer, not a "
                    "float");
  expect_diagnostic(errors, file, 12, 32,
                    "each value of matrix variable 'v' must be a string or an integer, not an "
                    "empty string");
  expect_diagnostic(errors, file, 12, 37, "matrix variable 'bad-name' is not valid");
  expect_diagnostic(errors, file, 12, 50,
                    "matrix variable 'bad-name' must be an array of values, not an empty array");
  expect_diagnostic(errors, file, 12, 58,
                    "matrix variable 'n' must be an array of values, not a string");
  expect_diagnostic(errors, file, 17, 10, "'matrix' in [[stage]] must be a table of variables");
  // A mistake in the table is said once, not once per stage; one in a substituted value, once
  // per value.
  expect_diagnostic(errors, file, 21, 14, "dockerfile 'missing-a.Dockerfile' does not exist");
  expect_diagnostic(errors, file, 21, 14, "dockerfile 'missing-b.Dockerfile' does not exist");
  expect_diagnostic(errors, file, 23, 1, "unknown key 'nonsense' in [[stage]]");
  expect_diagnostic(errors, file, 28, 10, "the matrix makes 294 stages, more than the 256");
}

TEST(LoadChain, ChainStagesInNeedsAndNamesThatAreNoChainStageLoad) {
  // In needs; a stage of the same Dockerfile; an index; a registry image; scratch; a stage the
  // target does not build on; a global ARG a build arg points at a registry.
  auto chain = load_chain(chain_file("declared_needs"));
  ASSERT_TRUE(chain) << describe(chain.error());
  EXPECT_EQ(chain->stages.size(), 7u);
}

TEST(LoadChain, BuildArgKeysAndValues) {
  Diagnostics errors = load_errors("build_args");
  std::string file = chain_file("build_args");
  EXPECT_EQ(errors.size(), 7u) << describe(errors);
  const std::string invalid = "is not a valid ARG name and would never reach the build";
  const std::string allowed = "letters, digits and '_', and does not start with a digit";
  expect_diagnostic(errors, file, 7, 16, "build arg 'FOO-BAR' " + invalid, allowed);
  expect_diagnostic(errors, file, 7, 33, "build arg '1X' " + invalid, allowed);
  expect_diagnostic(errors, file, 7, 45, "build arg 'A B' " + invalid, allowed);
  expect_diagnostic(errors, file, 14, 1, "build arg 'lower-case' " + invalid, allowed);
  expect_diagnostic(errors, file, 7, 66, "build arg 'COUNT' must be a string, not an integer",
                    "quote it: COUNT = \"4\"");
  expect_diagnostic(errors, file, 15, 8, "build arg 'FLAG' must be a string, not a boolean",
                    "quote it: FLAG = \"true\"");
  expect_diagnostic(errors, file, 7, 83,
                    "build arg 'UNUSED' is not declared with ARG in a.Dockerfile",
                    "declare 'ARG UNUSED' in a.Dockerfile or remove it");
}

TEST(LoadChain, VersionsFileProblems) {
  Diagnostics errors = load_errors("versions_errors");
  std::string file = (k_chains / "versions_errors" / "bad.env").string();
  EXPECT_EQ(errors.size(), 4u) << describe(errors);
  expect_diagnostic(errors, file, 3, 10, "'BAD-KEY' is not a valid variable name");
  expect_diagnostic(errors, file, 4, 1, "expected KEY=VALUE but the line has no '='");
  expect_diagnostic(errors, file, 5, 1, "duplicate key 'GOOD' in versions file",
                    "'GOOD' is first set on line 2");
  expect_diagnostic(errors, file, 6, 1, "'1X' is not a valid variable name");
}

TEST(LoadChain, BadRegexInTransientPattern) {
  Diagnostics errors = load_errors("bad_regex");
  std::string file = chain_file("bad_regex");
  EXPECT_EQ(errors.size(), 4u) << describe(errors);
  // The caret goes under the part RE2 names, inside the string.
  expect_diagnostic(errors, file, 6, 22, "invalid regular expression: missing ) at '(unclosed'",
                    "RE2 regular expressions");
  expect_diagnostic(errors, file, 6, 36,
                    "invalid regular expression: invalid character class range at 'z-a]'");
  expect_diagnostic(errors, file, 6, 43,
                    "each of 'patterns' in [[transient]] must be a string, not an integer");
  // Lookahead is not RE2's: the message says so before any run starts.
  expect_diagnostic(errors, file, 6, 52, "invalid regular expression: invalid perl operator");
}

TEST(LoadChain, Secrets) {
  Diagnostics errors = load_errors("secrets");
  std::string file = chain_file("secrets");
  EXPECT_EQ(errors.size(), 8u) << describe(errors);
  expect_diagnostic(errors, file, 8, 40, "a secret takes 'env' or 'file', not both");
  expect_diagnostic(errors, file, 10, 10, "secret id 'bad id' is not valid");
  expect_diagnostic(errors, file, 10, 26, "'1TOKEN' is not a valid environment variable name");
  expect_diagnostic(errors, file, 11, 17, "unknown key 'evn' in a secret of [[stage]]",
                    "did you mean 'env'?");
  expect_diagnostic(errors, file, 12, 10, "duplicate secret id 'dup' in stage 'a'");
  expect_diagnostic(errors, file, 13, 3,
                    "each of 'secrets' in [[stage]] must be a table, not a string");
  // Both `{ id = "neither" }` and the misspelt `evn` leave a secret with no source.
  int no_source = 0;
  for (const auto& error : errors) {
    if (error.message == "a secret needs 'env' or 'file'") {
      EXPECT_EQ(error.pos.column, 3);
      EXPECT_TRUE(error.pos.line == 9 || error.pos.line == 11) << error.pos.line;
      ++no_source;
    }
  }
  EXPECT_EQ(no_source, 2);
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

TEST(LoadChain, CacheTiersAndBuildkitSettings) {
  auto chain = load_chain(chain_file("cache_valid"));
  ASSERT_TRUE(chain) << describe(chain.error());
  const fs::path dir = k_chains / "cache_valid";
  EXPECT_EQ(chain->engine, "buildkit");
  EXPECT_EQ(chain->registry, "reg.example:5000/team");
  EXPECT_EQ(chain->buildkit_host, "tcp://10.1.2.3:1234");
  EXPECT_TRUE(chain->cache.local);
  EXPECT_EQ(chain->cache.root, dir / "slugs");
  EXPECT_EQ(chain->cache.import_flakes_before_drop, 3);
  EXPECT_FALSE(chain->cache.salvage);
  EXPECT_EQ(chain->cache.salvage_min_free_gb, 12.5);
  EXPECT_EQ(chain->cache.salvage_target_timeout, std::chrono::seconds(90));
  const Stage& a = chain->stages[0];
  const Stage& b = chain->stages[1];
  EXPECT_TRUE(a.cache_local);
  EXPECT_FALSE(b.cache_local);
  EXPECT_EQ(chain->cache_slug(a), dir / "slugs/tiers-a-arm64");
  EXPECT_EQ(chain->pushed_ref(a), "reg.example:5000/team/tiers-a:latest");
  ASSERT_TRUE(a.snapshot_to);
  EXPECT_EQ(a.snapshot_to->attr("ref"), "reg.example:5000/team/a:buildcache");
  ASSERT_EQ(b.cache_from.size(), 2u);
  EXPECT_EQ(b.cache_from[1].attr("type"), "registry");
}

TEST(LoadChain, CacheTiersThatCannotWork) {
  Diagnostics errors = load_errors("cache_tiers");
  std::string file = chain_file("cache_tiers");
  EXPECT_EQ(errors.size(), 6u) << describe(errors);
  // The pair that made every stage rebuild from scratch: an import nothing exports.
  expect_diagnostic(errors, file, 8, 15,
                    "stage 'a' imports cache 'reg.example/never:cache', which no stage of this "
                    "chain exports",
                    "add cache_to = [\"type=registry,ref=reg.example/never:cache,mode=max\"]");
  expect_diagnostic(errors, file, 8, 60, "'cache_from' names a local cache",
                    "set local = true in [cache]");
  expect_diagnostic(errors, file, 9, 13,
                    "exports an inline cache, which travels inside a pushed "
                    "image, but the chain pushes nothing");
  expect_diagnostic(errors, file, 9, 28, "'cache_to' entry 'type=gha' has type 'gha'");
  expect_diagnostic(errors, file, 9, 40, "has no ref", "add ref=");
  expect_diagnostic(errors, file, 10, 21, "must be a type=registry export with mode=max");
}

TEST(LoadChain, CacheTiersNeedBuildkit) {
  Diagnostics errors = load_errors("cache_buildah");
  std::string file = chain_file("cache_buildah");
  EXPECT_EQ(errors.size(), 2u) << describe(errors);
  expect_diagnostic(errors, file, 3, 12, "'registry' hands stages over by push",
                    "set engine = \"buildkit\"");
  expect_diagnostic(errors, file, 8, 13,
                    "names cache tier 'type=registry,ref=reg.example/a:cache'");
  // The same file with the engine switched on the command line loads.
  auto chain = load_chain(file, {"buildkit"});
  EXPECT_TRUE(chain) << describe(chain.error());
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

TEST(LoadChain, DiskAndResourceSettings) {
  Diagnostics errors = load_errors("disk_resources");
  std::string file = chain_file("disk_resources");
  EXPECT_EQ(errors.size(), 2u) << describe(errors);
  expect_diagnostic(errors, file, 28, 17,
                    "'disk_floor_gb' in [[stage]] must be a number of GB, 0 "
                    "or more");
  expect_diagnostic(errors, file, 29, 18,
                    "'mem_per_job_gb' in [[stage]] must be a number of GB, "
                    "more than 0");
}

TEST(LoadChain, DiskAndResourceValues) {
  auto chain = load_chain(chain_file("disk_resources_valid"));
  ASSERT_TRUE(chain) << describe(chain.error());
  EXPECT_EQ(chain->disk.path, "/var/lib/containers");
  EXPECT_EQ(chain->disk.need_gb, 150);
  EXPECT_EQ(chain->disk.guard_gb, 40);
  EXPECT_EQ(chain->disk.floor_gb, 20);
  EXPECT_EQ(chain->disk.keep_slugs, 5);
  EXPECT_EQ(chain->disk.buildkit_keep_gb, 100);
  EXPECT_EQ(chain->disk.watch_interval, std::chrono::seconds(30));
  EXPECT_EQ(chain->resources.sample_interval, std::chrono::seconds(5));
  EXPECT_EQ(chain->resources.host_reserve_gb, 6);
  EXPECT_EQ(chain->resources.memory_limit_gb, 12.5);
  EXPECT_EQ(chain->resources.mem_per_job_gb, 3);
  EXPECT_EQ(chain->stages[0].disk_floor_gb, 120);
  EXPECT_EQ(chain->stages[0].mem_per_job_gb, 4);
}

TEST(LoadChain, DiskAndResourceDefaults) {
  auto chain = load_chain(chain_file("minimal"));
  ASSERT_TRUE(chain) << describe(chain.error());
  EXPECT_TRUE(chain->disk.path.empty()) << "each store is measured where it keeps its data";
  EXPECT_EQ(chain->disk.need_gb, 0);
  EXPECT_EQ(chain->disk.guard_gb, 10);
  EXPECT_EQ(chain->disk.floor_gb, 10);
  EXPECT_EQ(chain->disk.keep_slugs, 3);
  EXPECT_EQ(chain->disk.buildkit_keep_gb, 120);
  EXPECT_EQ(chain->disk.watch_interval, std::chrono::seconds(120));
  EXPECT_EQ(chain->resources.sample_interval, std::chrono::seconds(20));
  EXPECT_FALSE(chain->resources.host_reserve_gb);
  EXPECT_EQ(chain->resources.mem_per_job_gb, 2);
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

TEST(LoadChain, LanesCopyEveryStageIntoEachLaneWithItsOwnImagesAndArgs) {
  auto chain = load_chain(chain_file("lanes"));
  ASSERT_TRUE(chain) << describe(chain.error());
  std::vector<std::string> names;
  for (const auto& stage : chain->stages) {
    names.push_back(stage.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"amd64/base", "amd64/app", "arm64/base", "arm64/app",
                                             "arm64/extra"}));
  const Stage* app = chain->find_stage("arm64/app");
  ASSERT_NE(app, nullptr);
  EXPECT_EQ(app->known_as(), "app");
  EXPECT_EQ(app->lane, "arm64");
  EXPECT_EQ(app->needs, std::vector<std::string>{"arm64/base"});
  EXPECT_EQ(app->tag, "registry.example:5000/team/app-arm64:1.0");
  EXPECT_EQ(chain->find_stage("amd64/base")->tag, "localhost/ln-base-amd64:latest");
  EXPECT_EQ(chain->max_lanes, 1);
  ASSERT_EQ(chain->lanes.size(), 2u);
  EXPECT_EQ(chain->lanes[0].host, "unix:///run/buildkit/amd64.sock");
  EXPECT_EQ(chain->lanes[1].platform, "linux/arm64");
  // Pins, then the stage's, then the lane's: a lane's ARCH_FLAGS wins over the stage's.
  EXPECT_EQ(stage_build_args(*chain, *chain->find_stage("arm64/base"), {}),
            (KeyValues{{"OPT", "lane"}, {"ARCH_FLAGS", "-mcpu=neoverse-n1"}}));
  EXPECT_EQ(stage_build_args(*chain, *chain->find_stage("amd64/base"), {}),
            (KeyValues{{"OPT", "stage"}, {"ARCH_FLAGS", "-march=x86-64-v2"}}));
  // The local cache slug stays `<chain>-<stage>-<lane>`.
  EXPECT_EQ(chain->cache_slug(*app).filename(), "ln-app-arm64");
}

TEST(LoadChain, LaneSelectionsNameAStageInEveryLaneOrInOne) {
  auto chain = load_chain(chain_file("lanes"));
  ASSERT_TRUE(chain);
  auto names = [&](const Selection& selection) {
    std::vector<std::string> out;
    auto stages = select_stages(*chain, selection);
    EXPECT_TRUE(stages) << (stages ? "" : stages.error());
    for (const Stage* stage : stages.value_or(std::vector<const Stage*>{})) {
      out.push_back(stage->name);
    }
    return out;
  };
  EXPECT_EQ(names({{"app"}, "", {}}), (std::vector<std::string>{"amd64/app", "arm64/app"}));
  EXPECT_EQ(names({{"arm64/app"}, "", {}}), std::vector<std::string>{"arm64/app"});
  EXPECT_EQ(names({{}, "app", {}}),
            (std::vector<std::string>{"amd64/app", "arm64/app", "arm64/extra"}));
  EXPECT_EQ(names({{}, "", {"arm64"}}),
            (std::vector<std::string>{"arm64/base", "arm64/app", "arm64/extra"}));
  auto unknown = select_stages(*chain, {{}, "", {"amd46"}});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error(), "unknown lane 'amd46' in --lane (did you mean 'amd64'?)");
}

TEST(LoadChain, LanePlatformsAreNormalisedAndAddressesCheckedWhole) {
  Diagnostics errors = load_errors("lanes_addresses");
  std::string file = chain_file("lanes_addresses");
  EXPECT_EQ(errors.size(), 7u) << describe(errors);
  expect_diagnostic(errors, file, 12, 8,
                    "lane host 'tcp://10.0.0.5:99999' has the port '99999', not one of 1-65535",
                    "tcp://host:port");
  expect_diagnostic(errors, file, 17, 8, "lane host 'tcp://builder.example' has no port");
  expect_diagnostic(errors, file, 21, 12,
                    "platform 'linux/amd64/v9' names the variant 'v9', which amd64 does not have",
                    "linux/amd64/v3");
  expect_diagnostic(errors, file, 22, 8, "lane host 'unix://' names no address after unix://");
  expect_diagnostic(errors, file, 26, 12,
                    "platform 'plan8/arm64' names the os 'plan8', which no engine builds for");
  expect_diagnostic(errors, file, 27, 8,
                    "lane host 'unix://run/buildkitd.sock' names no absolute socket path");
  expect_diagnostic(
      errors, file, 31, 12,
      "platform 'linux/z80' names the architecture 'z80', which no engine builds for");
}

TEST(LoadChain, PlatformsReadAsContainerdNormalisesThem) {
  using chain_loading::normalize_platform;
  EXPECT_EQ(normalize_platform("Linux/AMD64/v3"), "linux/amd64/v3");
  EXPECT_EQ(normalize_platform("linux/x86_64"), "linux/amd64");
  EXPECT_EQ(normalize_platform("linux/amd64/v1"), "linux/amd64");
  EXPECT_EQ(normalize_platform("linux/aarch64/8"), "linux/arm64");
  EXPECT_EQ(normalize_platform("linux/arm64/v8.2"), "linux/arm64/v8.2");
  EXPECT_EQ(normalize_platform("linux/armhf"), "linux/arm/v7");
  EXPECT_EQ(normalize_platform("linux/i386"), "linux/386");
  EXPECT_EQ(normalize_platform("macos/arm64"), "darwin/arm64");
  EXPECT_EQ(normalize_platform("linux/s390x"), "linux/s390x");
  EXPECT_EQ(normalize_platform("arm64").error(), "is not a platform");
  EXPECT_EQ(normalize_platform("linux/s390x/v2").error(),
            "names the variant 'v2', which s390x does not have");
}

TEST(LoadChain, DaemonAddressesAreCheckedWhole) {
  using chain_loading::host_address_problem;
  for (const char* good :
       {"unix:///run/buildkit/buildkitd.sock", "tcp://10.0.0.5:1234", "tcp://builder.example:443",
        "tcp://[::1]:1234", "docker-container://buildkitd", "kube-pod://buildkitd-0"}) {
    EXPECT_EQ(host_address_problem(good), "") << good;
  }
  EXPECT_EQ(host_address_problem("tcp://10.0.0.5:0"), "has the port '0', not one of 1-65535");
  EXPECT_EQ(host_address_problem("tcp://10.0.0.5:"), "has the port '', not one of 1-65535");
  EXPECT_EQ(host_address_problem("tcp://:1234"), "has no host before its port");
  EXPECT_EQ(host_address_problem("tcp://[::1]"), "has no port");
  EXPECT_EQ(host_address_problem("tcp://10.0.0.5:12a"), "has the port '12a', not one of 1-65535");
  EXPECT_EQ(host_address_problem("tcp://10.0.0.5:1234 "), "holds white space");
}

TEST(LoadChain, LaneErrorsNameTheLineAndTheFix) {
  Diagnostics errors = load_errors("lanes_errors");
  std::string file = chain_file("lanes_errors");
  EXPECT_EQ(errors.size(), 6u) << describe(errors);
  expect_diagnostic(errors, file, 6, 8, "lane host 'amd64.sock' has no scheme", "unix:///");
  expect_diagnostic(errors, file, 9, 8, "duplicate lane name 'amd64'");
  expect_diagnostic(errors, file, 10, 12, "platform 'arm64' is not a platform", "linux/arm64");
  expect_diagnostic(errors, file, 15, 10, "unknown lane 'amd46' in lanes", "amd64");
  expect_diagnostic(errors, file, 20, 10,
                    "stage 'app' runs in lane 'amd64', but 'base', which it needs, does not");
  expect_diagnostic(errors, file, 17, 1, "stage 'app' sets 'lane' while the chain has [[lane]]",
                    "use 'lanes'");
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

TEST(LoadChain, PublishNamesAnIndexOfTheLanesFinalImages) {
  auto chain = load_chain(chain_file("publish"));
  ASSERT_TRUE(chain) << describe(chain.error());
  EXPECT_EQ(chain->publish.index, "127.0.0.1:5000/media/app:1.0");
  EXPECT_FALSE(chain->publish.tls_verify);
  EXPECT_EQ(chain->gates.final_stage, "app");
}

TEST(LoadChain, PublishErrorsNameTheLineAndTheFix) {
  Diagnostics errors = load_errors("publish_errors");
  std::string file = chain_file("publish_errors");
  EXPECT_EQ(errors.size(), 3u) << describe(errors);
  expect_diagnostic(errors, file, 7, 9, "index 'http://registry.example/app' is not a registry",
                    "host[:port]/repository[:tag]");
  expect_diagnostic(errors, file, 13, 1,
                    "lane 'arm64' has no platform, and its 'app' image is an entry of the index",
                    "platform = ");
  expect_diagnostic(errors, file, 16, 1, "lanes 'amd64' and 'x86' both build platform linux/amd64",
                    "limit the lanes of 'app'");

  // A published image that no smoke stage tests: named with its lane, at the index's line.
  Diagnostics unguarded = load_errors("publish_unguarded");
  ASSERT_EQ(unguarded.size(), 1u) << describe(unguarded);
  expect_diagnostic(unguarded, chain_file("publish_unguarded"), 6, 9,
                    "the chain publishes arm64/app ([publish] index), and no smoke stage needs it",
                    "require_smoke = false");

  Diagnostics no_lanes = load_errors("publish_no_lanes");
  ASSERT_EQ(no_lanes.size(), 1u) << describe(no_lanes);
  expect_diagnostic(no_lanes, chain_file("publish_no_lanes"), 6, 9,
                    "an index is assembled from the lanes' final images, and the chain has no "
                    "[[lane]] tables",
                    "add a [[lane]] table");
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

TEST(LoadChain, SmokeFloorsOfAStageAreASmokeStagesOnly) {
  Diagnostics errors = load_errors("smoke_floors_errors");
  std::string file = chain_file("smoke_floors_errors");
  EXPECT_EQ(errors.size(), 2u) << describe(errors);
  expect_diagnostic(errors, file, 7, 14,
                    "'min_passed' is a smoke stage's coverage floor, and stage 'app' is a build "
                    "stage",
                    "add kind = \"smoke\"");
  expect_diagnostic(errors, file, 14, 15, "must be a count of 0 or more, not -1");
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

TEST(LoadChain, ResidueAllowancesNeedAReasonAndArtifactsAnAbsolutePath) {
  Diagnostics errors = load_errors("layer_gates_errors");
  std::string file = chain_file("layer_gates_errors");
  EXPECT_EQ(errors.size(), 5u) << describe(errors);
  expect_diagnostic(errors, file, 7, 3,
                    "the residue_allow entry for '/root/.npmrc' gives no reason",
                    "say why this file may ship");
  expect_diagnostic(errors, file, 8, 12, "a residue_allow entry needs a 'path': an absolute path");
  expect_diagnostic(errors, file, 9, 3, "each of 'residue_allow' must be a table, not a string");
  expect_diagnostic(errors, file, 15, 13,
                    "artifact 'opt/bin/app' of stage 'app' is not an "
                    "absolute path");
  expect_diagnostic(errors, file, 16, 14, "'max_layers' must be 1 or more");
}

TEST(LoadChain, ResidueAllowancesAndArtifactsAreRead) {
  testing::TempDir dir;
  dir.write("app.Dockerfile", "FROM scratch\n");
  dir.write("chain.toml", "[chain]\nname = \"lg\"\n[gates]\nresidue_allow = [{ path = \"/a/*\", "
                          "reason = \"why\" }]\n[[stage]]\nname = \"app\"\ndockerfile = "
                          "\"app.Dockerfile\"\nartifacts = [\"/opt/x\"]\nmax_layers = 12\n");
  auto chain = load_chain(dir.path() / "chain.toml");
  ASSERT_TRUE(chain) << describe(chain.error());
  ASSERT_EQ(chain->gates.residue_allow.size(), 1u);
  EXPECT_EQ(chain->gates.residue_allow[0].path, "/a/*");
  EXPECT_EQ(chain->gates.residue_allow[0].reason, "why");
  EXPECT_EQ(chain->stages[0].artifacts, std::vector<std::string>{"/opt/x"});
  EXPECT_EQ(chain->stages[0].max_layers, 12);
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

TEST(LoadChain, EveryNameThatBecomesAnArgvWordIsCheckedWhereItIsWritten) {
  Diagnostics errors = load_errors("names_checked");
  std::string file = chain_file("names_checked");
  expect_diagnostic(errors, file, 5, 8, "[publish] sign starts with '--key', not a program",
                    "write the program first");
  expect_diagnostic(errors, file, 9, 12, "platform '-linux/amd64' is not a platform", "os/arch");
  expect_diagnostic(errors, file, 10, 8, "lane host '-unix:///run/b.sock' starts with '-'",
                    "unix://");
  expect_diagnostic(errors, file, 15, 7,
                    "image tag '--all' is not a valid image reference: it starts with '-', which "
                    "a command would read as an option",
                    "[host[:port]/]repository[:tag]");
  expect_diagnostic(errors, file, 20, 10, "target '-x' is not a Dockerfile stage name",
                    "FROM ... AS <name>");
  expect_diagnostic(errors, file, 21, 7, "image tag 'localhost/nc-b:Latest@sha256:0000'",
                    "[host[:port]/]repository[:tag]");
}

TEST(ImageRef, TheDistributionGrammar) {
  auto full = parse_image_ref("registry.example:5000/team/app:1.0@sha256:"
                              "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  ASSERT_TRUE(full) << full.error();
  EXPECT_EQ(full->domain, "registry.example:5000");
  EXPECT_EQ(full->path, "team/app");
  EXPECT_EQ(full->tag, "1.0");
  EXPECT_EQ(full->repository(), "registry.example:5000/team/app");
  auto local = parse_image_ref("localhost/hello-base:latest");
  ASSERT_TRUE(local);
  EXPECT_EQ(local->domain, "localhost");
  auto bare = parse_image_ref("debian:12");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->domain, "");
  EXPECT_EQ(bare->path, "debian");
  EXPECT_EQ(bare->str(), "debian:12");
  for (const char* bad : {"--all", "", "app/X", "a//b", "a:b:c", "host:99999x/a", "a:-tag",
                          "a@sha256:short", "a__-b", "team/"}) {
    EXPECT_FALSE(parse_image_ref(bad)) << bad;
  }
  EXPECT_TRUE(parse_image_ref("x/a.b_c__d-e--f"));
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

TEST(LoadChain, WorkerPoolsGiveEachStageTheWorkersThatCanBuildIt) {
  auto chain = load_chain(chain_file("workers"));
  ASSERT_TRUE(chain) << describe(chain.error());
  ASSERT_EQ(chain->workers.size(), 3u);
  const Worker& bk1 = chain->workers[0];
  EXPECT_EQ(bk1.platforms, (std::vector<std::string>{"linux/amd64", "linux/arm64"}));
  EXPECT_EQ(bk1.max_parallel, 2);
  EXPECT_EQ(bk1.memory_gb, 64.0);
  EXPECT_EQ(bk1.cores, 32);
  EXPECT_EQ(chain->workers[1].max_parallel, 1);
  EXPECT_EQ(chain->workers[1].labels, std::vector<std::string>{"gpu"});
  auto workers = [&](const std::string& stage) { return chain->find_stage(stage)->workers; };
  // bk2 says nothing of its platforms; bk3 builds amd64 only; only bk2 has a GPU.
  EXPECT_EQ(workers("amd64/base"), (std::vector<std::string>{"bk1", "bk2", "bk3"}));
  EXPECT_EQ(workers("arm64/base"), (std::vector<std::string>{"bk1", "bk2"}));
  EXPECT_EQ(workers("amd64/cuda"), std::vector<std::string>{"bk2"});
  EXPECT_EQ(workers("arm64/cuda"), std::vector<std::string>{"bk2"});
}

TEST(LoadChain, WorkerErrorsNameTheLineAndTheFix) {
  Diagnostics errors = load_errors("workers_errors");
  std::string file = chain_file("workers_errors");
  EXPECT_EQ(errors.size(), 5u) << describe(errors);
  expect_diagnostic(errors, file, 7, 8, "worker host 'tcp://builder.example:99999'");
  expect_diagnostic(errors, file, 11, 8, "duplicate worker name 'bk1'");
  expect_diagnostic(errors, file, 17, 19, "unknown worker 'bk9' in workers", "bk1");
  expect_diagnostic(errors, file, 17, 12, "lane 'amd64' names both a host and workers",
                    "a host is the one-worker form of a pool");
  expect_diagnostic(errors, file, 28, 17,
                    "no worker of the pool of lane 's390x' can build stage 'base': none builds "
                    "linux/s390x with the labels gpu",
                    "add a worker that does");
}

} // namespace
} // namespace kiln
