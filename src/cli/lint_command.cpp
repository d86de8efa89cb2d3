#include "cli/lint_command.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "chain/plan.h"
#include "cli/chain_file.h"
#include "cli/github_actions.h"
#include "dockerfile/source.h"
#include "driver/run_loop.h"
#include "lint/lint.h"
#include "util/fs.h"

namespace kiln {

CLI::App* add_lint_command(CLI::App& app, LintArgs& args) {
  CLI::App* lint = app.add_subcommand(
      "lint", "Find build-host leaks, out-of-scope ARGs, cache mistakes and BuildKit's check "
              "warnings in Dockerfiles");
  lint->add_option("files", args.files,
                   "Dockerfiles to check (default with --chain: every stage's Dockerfile)");
  lint->add_option("--chain", args.chain_file,
                   "A chain file: its [gates] table sets the options below, which add to it");
  lint->add_option("--format", args.format,
                   "tty (default), json, sarif, buildkit-json (BuildKit's lint result) or github "
                   "(workflow annotations)")
      ->check(CLI::IsMember({"tty", "json", "sarif", "buildkit-json", "github"}));
  lint->add_flag("--errors-only", args.errors_only,
                 "Only the findings that stop `kiln run`: no BuildKit style warnings");
  lint->add_option("--context", args.context,
                   "The FILES' build context, whose .dockerignore copy-ignored-file reads "
                   "(default: each Dockerfile's folder; with --chain: each stage's context)");
  lint->add_option("--name", args.names,
                   "Another build-host variable name, NAME or PREFIX* (repeatable)")
      ->allow_extra_args(false);
  lint->add_option("--cache-target", args.cache_targets,
                   "A compile-cache mount target (repeatable; replaces the defaults)")
      ->allow_extra_args(false);
  lint->add_option("--cache-arg", args.cache_arg,
                   "The ARG a stage needs to reach the compile cache (SCCACHE_WEBDAV_ENDPOINT)");
  lint->add_option("--per-file-dir", args.per_file_dirs,
                   "A directory to mount or copy file by file, never whole (repeatable)")
      ->allow_extra_args(false);
  return lint;
}

int lint_command(const LintArgs& args) {
  LintOptions options;
  std::vector<std::string> files = args.files;
  // The chain's own Dockerfiles, as its loader read and parsed them: not read twice.
  std::vector<const DockerfileSource*> sources;
  std::vector<std::string> contexts; // of each chain Dockerfile: its first stage's context
  std::vector<int> platforms;        // of each chain Dockerfile: how many its lanes build for
  std::optional<Chain> chain;
  if (!args.chain_file.empty()) {
    chain = load_chain_or_report(args.chain_file, "", "nothing was linted");
    if (!chain) {
      return k_exit_usage;
    }
    options = lint_options(chain->gates);
    if (files.empty()) {
      for (const Stage* stage : one_stage_per_dockerfile(run_order(*chain))) {
        sources.push_back(stage->dockerfile_source.get());
        files.push_back(sources.back()->path.string());
        contexts.push_back(stage->context.string());
        std::set<std::string> built_for;
        for (const Stage& other : chain->stages) {
          const Lane* lane = chain->find_lane(other.lane);
          if (other.dockerfile_source == stage->dockerfile_source && lane != nullptr &&
              !lane->platform.empty()) {
            built_for.insert(lane->platform);
          }
        }
        platforms.push_back(static_cast<int>(built_for.size()));
      }
    }
  } else if (files.empty()) {
    fmt::print(stderr, "kiln: error: lint needs Dockerfiles to check, or --chain CHAIN\n");
    return k_exit_usage;
  }
  options.extra_names.insert(options.extra_names.end(), args.names.begin(), args.names.end());
  if (!args.cache_targets.empty()) {
    options.cache_targets = args.cache_targets;
  }
  if (!args.cache_arg.empty()) {
    options.cache_endpoint_arg = args.cache_arg;
  }
  options.per_file_dirs.insert(options.per_file_dirs.end(), args.per_file_dirs.begin(),
                               args.per_file_dirs.end());
  options.warnings = !args.errors_only;
  options.context_dir = args.context;
  // Each file is read, linted and rendered on its own, so the files are spread over worker
  // threads; every result lands in its input slot and the output joins them in input order,
  // the same bytes as one thread would write.
  struct Slot {
    LintResult result;
    std::string rendered; // tty text, JSON elements, or the file's text for buildkit-json
    std::string annotations; // on GitHub Actions, beside the tty text: its workflow commands
    std::string error;
  };
  enum class Format { tty, json, sarif, buildkit_json, github };
  Format format = args.format == "json"            ? Format::json
                  : args.format == "sarif"         ? Format::sarif
                  : args.format == "buildkit-json" ? Format::buildkit_json
                  : args.format == "github"        ? Format::github
                                                   : Format::tty;
  // On GitHub Actions the tty text comes with each finding as an annotation; the other formats
  // are documents (or the annotations themselves) and stay as they are.
  const bool annotate = format == Format::tty && github_actions().on;
  // Formats rendered from every result at the end keep each file's findings whole.
  bool whole_results =
      format == Format::sarif || format == Format::buildkit_json || format == Format::github;
  std::vector<Slot> slots(files.size());
  std::atomic<std::size_t> next{0};
  auto lint_batches = [&] {
    // Small batches: one atomic step per file would be contended, one big share per thread
    // leaves a thread idle when its files are the slower ones.
    constexpr std::size_t k_batch = 32;
    std::string text;
    while (true) {
      std::size_t begin = next.fetch_add(k_batch);
      if (begin >= files.size()) {
        return;
      }
      std::size_t end = std::min(begin + k_batch, files.size());
      for (std::size_t i = begin; i < end; ++i) {
        auto& slot = slots[i];
        std::string_view source_text;
        if (!sources.empty()) {
          source_text = sources[i]->text;
          if (contexts[i].empty() && platforms[i] < 2) {
            slot.result = lint_parsed(files[i], source_text, sources[i]->parsed, options);
          } else {
            LintOptions in_chain = options;
            in_chain.context_dir = contexts[i].empty() ? options.context_dir : contexts[i];
            in_chain.platforms = platforms[i];
            slot.result = lint_parsed(files[i], source_text, sources[i]->parsed, in_chain);
          }
        } else if (auto read = read_file_into(files[i], text); !read) {
          // read_file's reading, into one buffer per thread instead of one per file.
          slot.error = std::move(read.error());
          continue;
        } else {
          source_text = text;
          slot.result = lint_dockerfile(files[i], text, options);
        }
        if (format == Format::buildkit_json) {
          slot.rendered.assign(source_text); // BuildKit's sources hold each file's text
        }
        if (whole_results) {
          continue;
        }
        slot.rendered = format == Format::json ? render_json_elements(slot.result)
                                               : render_tty(slot.result, source_text);
        if (annotate) {
          slot.annotations = render_github({slot.result});
        }
        // Once rendered, lint_exit_code only asks whether a finding is left: the others are
        // freed here, spread over the workers, not one by one on the main thread at the end.
        auto& findings = slot.result.findings;
        if (findings.size() > 1) {
          findings.erase(findings.begin() + 1, findings.end());
        }
      }
    }
  };
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto work = [&] {
    try {
      lint_batches();
    } catch (...) {
      // Past a worker's end an exception would terminate the process; the caller gets it.
      std::lock_guard lock(failure_mutex);
      if (!failure) {
        failure = std::current_exception();
      }
      next = files.size();
    }
  };
  std::size_t threads = std::min<std::size_t>(std::max(1U, std::thread::hardware_concurrency()),
                                              (files.size() + 63) / 64);
  std::vector<std::thread> workers;
  for (std::size_t t = 1; t < threads; ++t) {
    try {
      workers.emplace_back(work);
    } catch (const std::system_error&) {
      break; // fewer threads still lint every file
    }
  }
  work();
  for (auto& worker : workers) {
    worker.join();
  }
  if (failure) {
    std::rethrow_exception(failure);
  }

  for (const auto& slot : slots) {
    if (!slot.error.empty()) {
      fmt::print(stderr, "kiln: error: {}\n", slot.error);
      return k_exit_usage;
    }
  }
  std::vector<LintResult> results;
  results.reserve(slots.size());
  std::vector<std::string> rendered;
  rendered.reserve(slots.size());
  for (auto& slot : slots) {
    results.push_back(std::move(slot.result));
    rendered.push_back(std::move(slot.rendered));
  }
  if (format == Format::json) {
    write_json_elements(stdout, rendered);
    std::fputc('\n', stdout);
  } else if (format == Format::sarif) {
    fmt::print("{}\n", render_sarif(results));
  } else if (format == Format::buildkit_json) {
    std::vector<LintSource> texts;
    texts.reserve(files.size());
    for (std::size_t i = 0; i < files.size(); ++i) {
      texts.push_back({files[i], rendered[i]});
    }
    fmt::print("{}\n", render_buildkit_json(results, texts));
  } else if (format == Format::github) {
    fmt::print("{}", render_github(results));
  } else {
    for (const auto& text : rendered) {
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
    for (const auto& slot : slots) {
      std::fwrite(slot.annotations.data(), 1, slot.annotations.size(), stdout);
    }
  }
  return lint_exit_code(results);
}

} // namespace kiln
