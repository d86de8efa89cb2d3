#include "driver/publish.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "chain/plan.h"
#include "dockerfile/parents.h"
#include "dockerfile/source.h"
#include "driver/attempt.h"
#include "driver/attestations.h"
#include "driver/build_request.h"
#include "engine/registry_client.h"
#include "util/fs.h"
#include "util/image_ref.h"
#include "util/process.h"
#include "util/sha256.h"
#include "util/strings.h"
#include "util/time.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

namespace kiln {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool ended_ok(const std::string& outcome) {
  return outcome == "built" || outcome == "reused";
}

/// Every stage `stage` builds on, nearest first, each once.
std::vector<const Stage*> ancestors(const Chain& chain, const Stage& stage) {
  std::vector<const Stage*> out;
  std::set<std::string> seen;
  std::vector<const Stage*> todo = {&stage};
  while (!todo.empty()) {
    const Stage* at = todo.front();
    todo.erase(todo.begin());
    for (const auto& need : at->needs) {
      if (const Stage* next = chain.find_stage(need); next && seen.insert(need).second) {
        out.push_back(next);
        todo.push_back(next);
      }
    }
  }
  return out;
}

/// An image's identity as a digest: buildah's ids are its config's digest, bare.
std::string as_digest(const std::string& identity) {
  return identity.empty() || identity.starts_with("sha256:") ? identity : "sha256:" + identity;
}

std::string relative_to(const fs::path& path, const fs::path& dir) {
  std::error_code ignored;
  fs::path relative = fs::relative(path, dir, ignored);
  return relative.empty() ? path.string() : relative.string();
}

/// Where a parent stage's image is, as a provenance names it: its repository by digest when it
/// went through the registry, its OCI layout (relative to the chain's folder) for BuildKit,
/// its stable name in buildah's store.
std::string where_it_is(const Chain& chain, const Stage& stage, const std::string& digest) {
  NamedContext context = stage_context(chain, stage);
  if (!context.pushed.empty()) {
    return context.pushed + "@" + digest;
  }
  if (chain.engine == "buildkit") {
    return "oci-layout://" + relative_to(context.layout, chain.dir) + "@" + digest;
  }
  return stage.tag;
}

/// What kiln knows of how `stage`'s image was made.
ProvenanceFacts provenance_facts(const PublishJob& job, const Stage& stage,
                                 const std::string& subject_name,
                                 const std::string& subject_digest) {
  const Chain& chain = job.chain;
  ProvenanceFacts facts;
  facts.subject_name = subject_name;
  facts.subject_digest = subject_digest;
  facts.chain_name = chain.name;
  facts.chain_file = relative_to(chain.file, chain.dir);
  facts.stage = stage.known_as();
  facts.lane = stage.lane;
  if (const Lane* lane = chain.find_lane(stage.lane)) {
    facts.platform = lane->platform;
    facts.worker = lane->host;
  }
  if (facts.worker.empty()) {
    facts.worker = chain.engine == "buildkit" && !chain.buildkit_host.empty()
                       ? chain.buildkit_host
                       : "local (" + job.record.host + ")";
  }
  facts.build_args = stage_build_args(chain, stage, job.overrides);
  for (const auto& [name, value] : facts.build_args) {
    if (std::any_of(chain.versions.begin(), chain.versions.end(),
                    [&](const auto& pin) { return pin.first == name; })) {
      facts.pins.emplace_back(name, value);
    }
  }
  std::vector<const Stage*> made_of = {&stage};
  for (const Stage* parent : ancestors(chain, stage)) {
    made_of.push_back(parent);
    facts.parents.emplace_back(parent->name, stage_build_args(chain, *parent, job.overrides));
  }
  std::set<std::string> named_bases;
  for (const Stage* each : made_of) {
    auto dockerfile = sha256_file_digest(each->dockerfile);
    facts.materials.push_back({"Dockerfile of " + each->name,
                               relative_to(each->dockerfile, chain.dir),
                               dockerfile ? *dockerfile : std::string()});
    if (each != &stage) {
      auto identity = job.identities.find(each->name);
      std::string digest =
          identity == job.identities.end() ? std::string() : as_digest(identity->second);
      facts.materials.push_back(
          {"stage " + each->name, where_it_is(chain, *each, digest), digest,
           job.engine.name() == "buildah" ? k_oci_config_type : k_oci_manifest_type});
    }
    if (!each->dockerfile_source) {
      continue;
    }
    BuildRequest request = build_request(chain, *each, job.overrides, {});
    std::map<std::string, std::string> args(request.build_args.begin(), request.build_args.end());
    for (const auto& parent : parent_images(each->dockerfile_source->parsed, args)) {
      bool chain_stage =
          std::any_of(request.contexts.begin(), request.contexts.end(),
                      [&](const NamedContext& c) { return lower(c.name) == lower(parent.ref); });
      if (chain_stage || !named_bases.insert(parent.ref).second) {
        continue;
      }
      NamedContext built_by = stage_context(chain, *each);
      facts.materials.push_back({"base " + parent.ref, parent.ref,
                                 job.engine.external_image_digest(parent.ref, built_by),
                                 k_oci_manifest_type});
    }
  }
  facts.engine = job.record.engine;
  facts.engine_version = job.record.engine_version;
  facts.kiln_version = KILN_VERSION;
  facts.run_id = job.record.run_id;
  facts.started = job.record.started;
  facts.finished = utc_iso8601(job.clock.wall());
  return facts;
}

/// A command of `[publish] sign` or `verify` with `{ref}` and `{digest}` filled in.
std::vector<std::string> hook_argv(const std::vector<std::string>& words, const std::string& ref,
                                   const std::string& digest) {
  std::vector<std::string> argv;
  for (std::string word : words) {
    for (auto [placeholder, value] : {std::pair{"{ref}", &ref}, std::pair{"{digest}", &digest}}) {
      for (size_t at = word.find(placeholder); at != std::string::npos;
           at = word.find(placeholder, at + value->size())) {
        word.replace(at, std::string_view(placeholder).size(), *value);
      }
    }
    argv.push_back(std::move(word));
  }
  return argv;
}

/// What the registry serves under `reference` is the index staged: the same bytes (its digest
/// is `digest`) listing every image and attestation under the digests staged.
tl::expected<void, std::string> check_served(RegistryClient& client, const std::string& reference,
                                             const std::string& digest,
                                             const std::vector<Descriptor>& staged) {
  auto served = client.manifest(reference);
  if (!served) {
    return tl::unexpected(served.error());
  }
  if (std::string got = sha256_digest(*served); got != digest) {
    return tl::unexpected(
        fmt::format("{} serves the index {}, and the one pushed is {}", reference, got, digest));
  }
  json index = json::parse(*served, nullptr, false);
  std::set<std::string> listed;
  if (index.is_object() && index.contains("manifests") && index["manifests"].is_array()) {
    for (const auto& entry : index["manifests"]) {
      if (entry.is_object() && entry.contains("digest") && entry["digest"].is_string()) {
        listed.insert(entry["digest"].get<std::string>());
      }
    }
  }
  for (const auto& each : staged) {
    if (listed.count(each.digest) == 0) {
      return tl::unexpected(fmt::format("{} does not list {} ({})", reference, each.digest,
                                        each.platform.empty() ? "an image" : each.platform));
    }
  }
  return {};
}

} // namespace

std::vector<PublishTarget> publish_targets(const Chain& chain) {
  std::vector<const Stage*> finals;
  for (const auto& stage : chain.stages) {
    if (stage.known_as() == chain.gates.final_stage && stage.kind == StageKind::build) {
      finals.push_back(&stage);
    }
  }
  if (!chain.publish.index.empty()) {
    return {{chain.publish.index, finals, true}};
  }
  std::vector<PublishTarget> targets;
  if (!chain.registry.empty() && chain.engine == "buildkit") {
    for (const Stage* stage : finals) {
      targets.push_back({chain.pushed_ref(*stage), {stage}, false});
    }
  }
  return targets;
}

std::vector<const Stage*> guarding_smoke_stages(const Chain& chain, const Stage& stage) {
  std::vector<const Stage*> guards;
  for (const auto& other : chain.stages) {
    if (other.kind != StageKind::smoke || other.lane != stage.lane) {
      continue;
    }
    auto parents = ancestors(chain, other);
    if (std::find(parents.begin(), parents.end(), &stage) != parents.end()) {
      guards.push_back(&other);
    }
  }
  return guards;
}

std::vector<PublishImage> publish_images(const PublishJob& job, const PublishTarget& target) {
  std::vector<PublishImage> images;
  for (const Stage* stage : target.stages) {
    PublishImage image;
    image.lane = stage->lane;
    image.stage = stage->name;
    if (const Lane* lane = job.chain.find_lane(stage->lane)) {
      image.platform = lane->platform;
    }
    const StageRecord* record = job.record.find_stage(stage->name);
    image.outcome = record != nullptr ? record->outcome : std::string();
    if (auto identity = job.identities.find(stage->name);
        record != nullptr && ended_ok(record->outcome) && identity != job.identities.end()) {
      image.identity = identity->second;
      NamedContext context = stage_context(job.chain, *stage);
      context.identity = image.identity;
      image.config = job.engine.stage_image_config(context);
    } else {
      image.config = tl::unexpected(std::string("no image of this run"));
    }
    // A stage of the lane that failed, was refused or stopped on its own (one skipped because
    // another did is told by that one).
    for (const auto& other : job.record.stages) {
      if (other.lane == stage->lane && other.name != stage->name && !ended_ok(other.outcome) &&
          !other.outcome.starts_with("skipped") &&
          (job.chain.lanes.empty() || !stage->lane.empty())) {
        image.unfinished.push_back(fmt::format(
            "{} ended {}", other.name, other.outcome.empty() ? other.status : other.outcome));
      }
    }
    for (const Stage* guard : guarding_smoke_stages(job.chain, *stage)) {
      if (job.record.find_stage(guard->name) == nullptr) {
        image.untested.push_back(guard->name);
      }
    }
    images.push_back(std::move(image));
  }
  return images;
}

fs::path publish_staging(const Chain& chain, const std::string& run_id) {
  const char* tmp = std::getenv("TMPDIR");
  fs::path root = tmp != nullptr && *tmp != '\0' ? fs::path(tmp) : fs::path("/var/tmp");
  std::string key = sha256_digest(chain.records.string()).substr(7, 8);
  return root / fmt::format("kiln-publish-{}-{}", key, run_id);
}

std::vector<std::string> remove_stale_staging(const Chain& chain) {
  fs::path any = publish_staging(chain, "");
  std::string prefix = any.filename().string();
  std::vector<std::string> lines;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(any.parent_path(), error)) {
    if (entry.path().filename().string().starts_with(prefix)) {
      std::error_code removed;
      fs::remove_all(entry.path(), removed);
      lines.push_back(fmt::format("removed {}, what a run that did not end staged to publish{}",
                                  entry.path().string(),
                                  removed ? " (not whole: " + removed.message() + ")" : ""));
    }
  }
  return lines;
}

PublishRecord publish(const PublishJob& job, const PublishTarget& target, const std::string& log) {
  PublishRecord out;
  out.ref = target.ref;
  std::vector<PublishImage> images = publish_images(job, target);
  PublishVerdict verdict = judge_publish(target.ref, images);
  out.lanes = verdict.lanes;
  out.gates = verdict.gates;
  out.gates_not_run = verdict.gates_not_run;
  if (!verdict.ok()) {
    const GateRecord& refused = verdict.gates.back();
    out.status = verdict.held ? "held" : "blocked";
    out.failure =
        fmt::format("the {} gate refused it: {}", refused.gate, join(refused.findings, "; "));
    return out;
  }
  const std::vector<std::string>& steps = publish_steps();
  auto fail = [&](std::string status, std::string why) {
    out.status = std::move(status);
    out.failure = std::move(why);
    for (const auto& step : steps) {
      if (std::find(out.done.begin(), out.done.end(), step) == out.done.end() &&
          std::find(out.gates_not_run.begin(), out.gates_not_run.end(), step) ==
              out.gates_not_run.end()) {
        out.gates_not_run.push_back(step);
      }
    }
    return out;
  };
  out.log = log;
  auto log_file = job.folder.open_log(log);
  if (!log_file) {
    return fail("failed", log_file.error());
  }
  auto write = [&](std::string_view text) { log_file->write(text); };
  auto ref = parse_image_ref(target.ref);
  if (!ref) {
    return fail("failed", fmt::format("{} is not a reference: {}", target.ref, ref.error()));
  }
  const std::string repository = ref->repository();

  // Staged in a folder of its own, removed however the publish ends.
  fs::path staging =
      publish_staging(job.chain, job.record.run_id) / sha256_digest(target.ref).substr(7, 12);
  struct Remove {
    fs::path dir;
    ~Remove() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
      fs::remove(dir.parent_path(), ignored); // the run's folder, once its last target is gone
    }
  } remove{staging};
  std::error_code ignored;
  fs::remove_all(staging, ignored);
  auto layout = LayoutWriter::create(staging);
  if (!layout) {
    return fail("failed", "cannot stage the images: " + layout.error());
  }

  std::vector<Descriptor> staged;
  std::vector<Descriptor> attestations;
  for (size_t i = 0; i < images.size(); ++i) {
    const Stage& stage = *target.stages[i];
    NamedContext context = stage_context(job.chain, stage);
    context.identity = images[i].identity;
    write(fmt::format("[kiln] staging {} ({}) from {}\n", stage.name, images[i].identity,
                      job.engine.stage_image_place(context)));
    auto image = job.engine.export_image(context, *layout, fmt::format("image-{}", i));
    if (!image) {
      return fail("failed", image.error());
    }
    if (job.engine.name() == "buildkit" && image->digest != images[i].identity) {
      return fail("failed", fmt::format("the image staged for {} is {}, not the gated {}",
                                        stage.name, image->digest, images[i].identity));
    }
    image->annotations.clear();
    image->platform = images[i].config->platform();
    out.lanes[i].digest = image->digest;

    // The SBOM from the layer scan the gates made of this very image.
    std::vector<Package> packages;
    OsRelease os;
    if (auto scans = job.gates.scans_of(images[i].identity)) {
      for (const auto& scan : *scans) {
        packages.insert(packages.end(), scan.packages.begin(), scan.packages.end());
        os = scan.os;
      }
    } else {
      return fail("failed", fmt::format("no layer scan of {}'s image ({}) to write its SBOM from",
                                        stage.name, images[i].identity));
    }
    std::string created = utc_iso8601(job.clock.wall());
    json sbom = spdx_document({target.ref, image->digest, image->platform}, packages, os, created,
                              KILN_VERSION);
    json provenance = provenance_statement(provenance_facts(job, stage, target.ref, image->digest));
    auto attestation = write_attestation_manifest(
        *layout, image->digest,
        {provenance, statement(k_spdx_predicate, target.ref, image->digest, std::move(sbom))});
    if (!attestation) {
      return fail("failed", "cannot write the attestations: " + attestation.error());
    }
    out.lanes[i].attestation = attestation->digest;
    out.lanes[i].packages = static_cast<int>(packages.size());
    write(fmt::format("[kiln] {}: {} ({}), attestation manifest {} (provenance, SBOM of {} "
                      "package(s))\n",
                      stage.name, image->digest, image->platform, attestation->digest,
                      packages.size()));
    staged.push_back(*image);
    attestations.push_back(*attestation);
  }
  json manifests = json::array();
  for (const auto* list : {&staged, &attestations}) {
    for (const auto& each : *list) {
      manifests.push_back(each.to_json());
    }
  }
  json index_doc = {
      {"schemaVersion", 2}, {"mediaType", k_oci_index_type}, {"manifests", manifests}};
  auto index = layout->put(blob_text(index_doc), k_oci_index_type);
  if (!index) {
    return fail("failed", index.error());
  }
  if (auto named = layout->name_only(*index, "kiln"); !named) {
    return fail("failed", named.error());
  }
  out.digest = index->digest;
  const std::string by_digest = repository + "@" + index->digest;
  std::vector<Descriptor> expected = staged;
  expected.insert(expected.end(), attestations.begin(), attestations.end());

  RegistryClient client({job.chain.publish.tls_verify, &job.cancel,
                         job.chain.defaults.stall_timeout, write, staging});
  const int attempts = job.chain.defaults.attempts;
  std::optional<Tail> previous;
  for (int attempt = 1;; ++attempt) {
    out.attempts = attempt;
    out.done.clear();
    write(fmt::format("[kiln] publish attempt {}/{}: {}\n", attempt, attempts, by_digest));
    tl::expected<void, std::string> step = client.push(staging, "kiln", by_digest);
    if (step) {
      out.done.push_back("push");
      step = check_served(client, by_digest, index->digest, expected);
    }
    if (step) {
      out.done.push_back("read-back");
      // Signing reads the registry: it runs after the push, and before anything moves the tag.
      for (const auto* words : {&job.chain.publish.sign, &job.chain.publish.verify}) {
        if (words->empty()) {
          continue;
        }
        std::vector<std::string> argv = hook_argv(*words, repository, index->digest);
        write("$ " + quoted_command(argv) + "\n");
        ProcessSpec spec{argv};
        spec.cwd = job.chain.dir;
        spec.cancel = &job.cancel;
        std::string said;
        ProcessExit exit = run_process(spec, [&](std::string_view chunk) {
          said.append(chunk);
          write(chunk);
        });
        if (exit.interrupted) {
          return fail("interrupted", "interrupted while signing");
        }
        if (!exit.ok()) {
          return fail("failed",
                      fmt::format("[publish] {} failed, so {} was not tagged: `{}`: {}",
                                  words == &job.chain.publish.sign ? "sign" : "verify", target.ref,
                                  quoted_command(argv), CapturedRun{exit, said}.failure()));
        }
      }
      if (!job.chain.publish.sign.empty() || !job.chain.publish.verify.empty()) {
        out.done.push_back("sign");
      }
      step = client.copy(by_digest, target.ref);
    }
    if (step) {
      step = check_served(client, target.ref, index->digest, expected);
    }
    if (step) {
      out.done.push_back("tag");
      out.status = "published";
      return out;
    }
    if (client.interrupted() || job.cancel.cancelled()) {
      return fail("interrupted", "interrupted while publishing: " + step.error());
    }
    FailureVerdict verdict =
        classify_failure(client.tail(), previous, attempt, attempts, job.classes);
    job.note(fmt::format(
        "publish {}: attempt {}/{} failed: {} ({}{})", target.ref, attempt, attempts, step.error(),
        verdict.class_name.empty() ? "" : "class " + verdict.class_name + "; ", verdict.reason));
    if (verdict.verdict != Verdict::retry) {
      return fail("failed", step.error());
    }
    if (!job.clock.sleep_for(cooldown_before(attempt + 1, job.chain.defaults), job.cancel)) {
      return fail("interrupted", "interrupted during the cooldown before publish attempt " +
                                     std::to_string(attempt + 1));
    }
    previous = client.tail();
  }
}

} // namespace kiln
