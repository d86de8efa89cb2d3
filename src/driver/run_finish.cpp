#include "driver/run.h"

#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "disk/sizes.h"
#include "driver/publish.h"
#include "driver/records_prune.h"
#include "driver/run_history.h"
#include "forensics/trace.h"
#include "util/http_post.h"
#include "util/strings.h"

namespace kiln {

namespace {

/// Record and log why `stage`'s stable name stays where it was.
void hold_tag(RunFolder& folder, const Stage& stage, StageRecord& record, std::string why) {
  record.tag_held = std::move(why);
  folder.log(
      fmt::format("stage {}: {} stays where it was: {}", stage.name, stage.tag, record.tag_held));
}

} // namespace

std::vector<std::string> Run::guards_not_passed(const Stage& stage) const {
  std::vector<std::string> untested;
  for (const Stage* guard : guarding_smoke_stages(m_chain, stage)) {
    const StageRecord* ran = m_record.find_stage(guard->name);
    if (ran == nullptr) {
      untested.push_back(guard->name + " did not run in this run");
    } else if (ran->status != "ok") {
      untested.push_back(fmt::format(
          "{} {}", guard->name, ran->outcome.empty() ? "has not ended" : "ended " + ran->outcome));
    }
  }
  return untested;
}

bool Run::has_name_to_move(const Stage& stage) const {
  const StageRecord* record = m_record.find_stage(stage.name);
  return stage.stable_name && record != nullptr && record->status == "ok" &&
         m_identities.count(stage.name) != 0 && m_tag_moves.count(stage.name) == 0;
}

void Run::start_tag_moves() {
  if (m_interrupted || interrupt_signal() != 0 || m_cancel.cancelled()) {
    return;
  }
  for (const Stage* stage : *m_stages) {
    if (has_name_to_move(*stage) && guards_not_passed(*stage).empty()) {
      m_tag_moves.emplace(stage->name, std::async(std::launch::async, &Run::move_tag, this,
                                                  std::cref(*stage), m_identities.at(stage->name)));
    }
  }
}

void Run::move_tag(const Stage& stage, const std::string& identity) {
  auto moved = m_engine.move_tag(identity, stage.tag);
  std::lock_guard held(m_mutex);
  StageRecord& record = *m_record.find_stage(stage.name);
  if (moved) {
    record.tag_moved = m_engine.name() == "buildah";
    if (record.tag_moved) {
      m_folder.log(fmt::format("stage {}: {} now names {}", stage.name, stage.tag, identity));
    }
  } else if (interrupt_signal() != 0) {
    // Ctrl-C reached the tag command too: a reason, not a fault.
    hold_tag(m_folder, stage, record, "the run was interrupted");
  } else {
    record.tag_held = moved.error();
    m_folder.log(fmt::format("stage {}: warning: {} was not moved: {}", stage.name, stage.tag,
                             moved.error()));
  }
  save();
}

void Run::move_stable_tags() {
  // Every stage has ended: what could move has started moving.
  for (auto& [stage, move] : m_tag_moves) {
    move.get();
  }
  std::lock_guard held(m_mutex);
  for (const Stage* stage : *m_stages) {
    if (!has_name_to_move(*stage)) {
      continue;
    }
    StageRecord& record = *m_record.find_stage(stage->name);
    std::vector<std::string> untested = guards_not_passed(*stage);
    std::string why;
    if (m_interrupted || interrupt_signal() != 0) {
      why = "the run was interrupted";
    } else if (!untested.empty()) {
      why = "a smoke stage that needs it did not pass: " + join(untested, ", ");
    } else {
      why = "the run was " + stop_cause();
    }
    hold_tag(m_folder, *stage, record, std::move(why));
  }
  save();
}

void Run::publish_all(const std::vector<const Stage*>& stages) {
  std::vector<PublishTarget> targets = publish_targets(m_chain);
  for (size_t n = 0; n < targets.size(); ++n) {
    const PublishTarget& target = targets[n];
    bool selected = std::any_of(target.stages.begin(), target.stages.end(), [&](const Stage* s) {
      return std::find(stages.begin(), stages.end(), s) != stages.end();
    });
    if (!selected) {
      m_folder.log(fmt::format("publish {}: not attempted, this run builds no {} it carries",
                               target.ref, m_chain.gates.final_stage));
      continue;
    }
    PublishRecord& record = m_record.published.emplace_back();
    record.ref = target.ref;
    if (m_interrupted || interrupt_signal() != 0 || m_cancel.cancelled()) {
      record.status = "interrupted";
      record.gates_not_run = {"completeness", "smoke", "coherence"};
      record.gates_not_run.insert(record.gates_not_run.end(), publish_steps().begin(),
                                  publish_steps().end());
      m_folder.log(fmt::format("publish {}: not attempted, the run was interrupted", target.ref));
      m_events.emit(EventType::publish_ended, {{"ref", record.ref}, {"status", record.status}});
      save();
      continue;
    }
    m_console.note(fmt::format("publish {}: {} image(s)", target.ref, target.stages.size()));
    std::string started = utc_iso8601(m_clock.wall());
    std::chrono::steady_clock::time_point start = m_clock.steady();
    record.started = started;
    save();
    set_phase("publish", "publish");
    // The stages' threads have ended, and with them the watch that turns Ctrl-C into the run's
    // token: Ctrl-C reaches the publish through the interrupt token itself.
    record =
        publish({m_chain, m_engine, *m_gates, m_record, m_folder, m_identities,
                 m_options.build_arg_overrides, m_classes, m_clock, interrupt_token(),
                 [this](const std::string& line) {
                   m_folder.log(line);
                   m_console.note(line);
                 }},
                target, targets.size() == 1 ? "publish.log" : fmt::format("publish-{}.log", n + 1));
    set_phase("publish", "");
    record.started = started;
    record.seconds = seconds_since(start);
    for (const auto& lane : record.lanes) {
      m_folder.log(fmt::format("publish {}: {} ({}): {} {}{}{}", record.ref, lane.stage,
                               lane.platform, lane.image, lane.identity,
                               lane.digest.empty() ? "" : " staged as " + lane.digest,
                               lane.detail.empty() ? "" : " (" + lane.detail + ")"));
    }
    std::string line = fmt::format("publish {}: {}", record.ref, record.status);
    if (record.status == "published") {
      line += fmt::format(" {} ({} image(s) with provenance and SBOM, read back from the "
                          "registry{})",
                          record.digest, record.lanes.size(),
                          m_chain.publish.sign.empty() ? "" : ", signed");
    } else {
      line += ": " + record.failure;
      if (!record.gates_not_run.empty()) {
        line += "; not run: " + join(record.gates_not_run, ", ");
      }
    }
    m_folder.log(line);
    m_console.note(line);
    if (record.status == "blocked" && m_failed.empty() && m_refused.empty()) {
      m_refused.push_back("refused:publish");
    } else if (record.status == "failed") {
      m_failed.push_back("publish");
    } else if (record.status == "interrupted") {
      m_interrupted = true;
    }
    m_events.emit(EventType::publish_ended, {{"ref", record.ref},
                                             {"status", record.status},
                                             {"digest", record.digest},
                                             {"failure", record.failure}});
    save();
  }
}

void Run::finish_sampler() {
  if (!m_sampler) {
    return;
  }
  m_sampler->set_phase("done");
  m_sampler->stop();
  m_sampler.reset();
  auto rows = read_resource_csv(m_folder.path() / "resources.csv");
  if (!rows) {
    m_folder.log("warning: " + rows.error());
    return;
  }
  m_record.resources = summarize(*rows);
  std::string table = format_summary(m_record.resources);
  m_folder.log("resources per phase:\n" + table);
  m_console.note("resources per phase (resources.csv):");
  for (const auto& line : split(table, '\n')) {
    if (!line.empty()) {
      m_console.note("  " + line);
    }
  }
}

void Run::note_history() {
  HistoryNotes notes = index_finished_run(m_chain, m_folder.path());
  if (!notes.warning.empty()) {
    m_folder.log("warning: the run history was not updated: " + notes.warning);
    m_console.note("warning: the run history was not updated: " + notes.warning);
  }
  for (const std::string& line : notes.regressions) {
    m_folder.log("regression: " + line);
    m_console.note("regression: " + line);
  }
  if (m_options.output != nullptr) {
    m_options.output->log_analysis = std::move(notes.log_analysis);
  }
}

void Run::keep_records() {
  if (!m_chain.records_keep) {
    return;
  }
  PruneOutcome pruned = prune_records(m_chain.records, {m_chain.records_keep, std::nullopt},
                                      m_clock.wall(), false, true);
  if (!pruned.removed.empty()) {
    std::string line =
        fmt::format("records: removed {} run(s) beyond the newest {} ([records] "
                    "keep), {} freed",
                    pruned.removed.size(), *m_chain.records_keep, decimal_size(pruned.bytes));
    m_folder.log(line + ": " + join(pruned.removed, ", "));
    m_console.note(line);
  }
  for (const auto& kept : pruned.plan.kept) {
    m_folder.log("records: kept " + kept);
  }
  for (const auto& error : pruned.errors) {
    m_folder.log("warning: records: " + error);
    m_console.note("warning: records: " + error);
  }
}

void Run::export_trace() {
  std::string endpoint = m_chain.otlp_endpoint;
  if (const char* env = std::getenv("OTEL_EXPORTER_OTLP_ENDPOINT");
      endpoint.empty() && env != nullptr) {
    endpoint = env;
  }
  if (endpoint.empty()) {
    return;
  }
  while (endpoint.ends_with('/')) {
    endpoint.pop_back();
  }
  const std::string url = endpoint + "/v1/traces"; // OTLP/HTTP's path for spans
  std::filesystem::path events = m_folder.path() / "events.jsonl";
  auto sent = [&]() -> tl::expected<size_t, std::string> {
    auto text = read_file(events);
    if (!text) {
      return tl::unexpected(text.error());
    }
    auto trace = forensics::trace_from_events(*text, events.string());
    if (!trace) {
      return tl::unexpected(trace.error());
    }
    auto status = http_post(url, "application/json",
                            forensics::otlp_trace(*trace).dump(
                                -1, ' ', false, nlohmann::json::error_handler_t::replace),
                            std::chrono::seconds(10));
    if (!status) {
      return tl::unexpected(status.error());
    }
    if (*status < 200 || *status >= 300) {
      return tl::unexpected(fmt::format("{} answered HTTP {}", url, *status));
    }
    return trace->spans.size();
  }();
  if (sent) {
    m_folder.log(fmt::format("trace: {} span(s) sent to {}", *sent, url));
  } else {
    std::string line = fmt::format("warning: the run's trace was not sent to {}: {}; `kiln trace "
                                   "{} --format otlp` writes it",
                                   url, sent.error(), m_record.run_id);
    m_folder.log(line);
    m_console.note(line);
  }
}

} // namespace kiln
