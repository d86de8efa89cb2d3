#include "driver/attestations.h"

#include <map>

#include <fmt/format.h>

#include "driver/shown_command.h"

namespace kiln {

using json = nlohmann::json;

namespace {

/// `sha256:<hex>` as a ResourceDescriptor's digest set: `{"sha256": "<hex>"}`.
json digest_set(const std::string& digest) {
  size_t colon = digest.find(':');
  if (colon == std::string::npos) {
    return json::object();
  }
  return {{digest.substr(0, colon), digest.substr(colon + 1)}};
}

} // namespace

json statement(const std::string& predicate_type, const std::string& subject_name,
               const std::string& subject_digest, json predicate) {
  return {
      {"_type", k_in_toto_statement},
      {"subject", json::array({{{"name", subject_name}, {"digest", digest_set(subject_digest)}}})},
      {"predicateType", predicate_type},
      {"predicate", std::move(predicate)}};
}

namespace {

/// Build args as a provenance holds them: a secret-shaped value named, never written.
void add_build_args(json& parameters, const KeyValues& build_args) {
  json args = json::object();
  json secret_args = json::array();
  for (const auto& [name, value] : build_args) {
    if (is_secret_build_arg(name, value)) {
      secret_args.push_back(name);
    } else {
      args[name] = value;
    }
  }
  parameters["buildArgs"] = std::move(args);
  if (!secret_args.empty()) {
    parameters["secretBuildArgs"] = std::move(secret_args);
  }
}

} // namespace

json provenance_statement(const ProvenanceFacts& facts) {
  json pins = json::object();
  for (const auto& [name, value] : facts.pins) {
    pins[name] = value;
  }
  json external = {{"chain", facts.chain_name},
                   {"chainFile", facts.chain_file},
                   {"stage", facts.stage},
                   {"platform", facts.platform},
                   {"pins", std::move(pins)}};
  add_build_args(external, facts.build_args);
  if (!facts.lane.empty()) {
    external["lane"] = facts.lane;
  }
  json parents = json::array();
  for (const auto& [stage, args] : facts.parents) {
    json parent = {{"stage", stage}};
    add_build_args(parent, args);
    parents.push_back(std::move(parent));
  }
  external["parents"] = std::move(parents);
  json dependencies = json::array();
  for (const auto& material : facts.materials) {
    json entry = {{"name", material.name}, {"uri", material.uri}};
    if (!material.digest.empty()) {
      entry["digest"] = digest_set(material.digest);
    }
    if (!material.media_type.empty()) {
      entry["mediaType"] = material.media_type;
    }
    dependencies.push_back(std::move(entry));
  }
  json predicate = {{"buildDefinition",
                     {{"buildType", k_kiln_build_type},
                      {"externalParameters", std::move(external)},
                      {"internalParameters",
                       {{"engine", facts.engine},
                        {"engineVersion", facts.engine_version},
                        {"worker", facts.worker}}},
                      {"resolvedDependencies", std::move(dependencies)}}},
                    {"runDetails",
                     {{"builder", {{"id", "kiln"}, {"version", {{"kiln", facts.kiln_version}}}}},
                      {"metadata",
                       {{"invocationId", facts.run_id},
                        {"startedOn", facts.started},
                        {"finishedOn", facts.finished}}}}}};
  return statement(k_slsa_provenance_v1, facts.subject_name, facts.subject_digest,
                   std::move(predicate));
}

tl::expected<Descriptor, std::string>
write_attestation_manifest(LayoutWriter& layout, const std::string& subject_digest,
                           const std::vector<json>& statements) {
  json layers = json::array();
  json diff_ids = json::array();
  for (const json& each : statements) {
    auto blob = layout.put(blob_text(each), k_in_toto_media_type);
    if (!blob) {
      return tl::unexpected(blob.error());
    }
    blob->annotations[k_predicate_type_annotation] = each.value("predicateType", "");
    layers.push_back(blob->to_json());
    diff_ids.push_back(blob->digest);
  }
  json config = {{"architecture", "unknown"},
                 {"os", "unknown"},
                 {"config", json::object()},
                 {"rootfs", {{"type", "layers"}, {"diff_ids", std::move(diff_ids)}}}};
  auto config_blob = layout.put(blob_text(config), k_oci_config_type);
  if (!config_blob) {
    return tl::unexpected(config_blob.error());
  }
  json manifest = {{"schemaVersion", 2},
                   {"mediaType", k_oci_manifest_type},
                   {"config", config_blob->to_json()},
                   {"layers", std::move(layers)}};
  auto manifest_blob = layout.put(blob_text(manifest), k_oci_manifest_type);
  if (!manifest_blob) {
    return tl::unexpected(manifest_blob.error());
  }
  manifest_blob->annotations = {{k_reference_type, k_attestation_manifest},
                                {k_reference_digest, subject_digest}};
  manifest_blob->platform = "unknown/unknown";
  return manifest_blob;
}

namespace {

/// The subject digest an in-toto statement names first, `sha256:<hex>`; "" when none.
std::string subject_digest(const json& statement) {
  if (!statement.contains("subject") || !statement["subject"].is_array() ||
      statement["subject"].empty() || !statement["subject"][0].is_object()) {
    return {};
  }
  const json& digest = statement["subject"][0].value("digest", json::object());
  if (!digest.is_object() || !digest.contains("sha256") || !digest["sha256"].is_string()) {
    return {};
  }
  return "sha256:" + digest["sha256"].get<std::string>();
}

std::string text_of(const json& doc, const char* key) {
  return doc.is_object() && doc.contains(key) && doc[key].is_string() ? doc[key].get<std::string>()
                                                                      : std::string();
}

std::string platform_of(const json& entry) {
  const json platform = entry.value("platform", json::object());
  if (!platform.is_object()) {
    return {};
  }
  std::string text = text_of(platform, "os") + "/" + text_of(platform, "architecture");
  if (std::string variant = text_of(platform, "variant"); !variant.empty()) {
    text += "/" + variant;
  }
  return text;
}

} // namespace

tl::expected<std::vector<PlatformAttestations>, std::string>
check_attestations(std::string_view index, const DigestReader& manifest, const DigestReader& blob) {
  json doc = json::parse(index, nullptr, false);
  if (!doc.is_object() || !doc.contains("manifests") || !doc["manifests"].is_array()) {
    return tl::unexpected(std::string("it is not an image index: it lists no manifests"));
  }
  std::vector<PlatformAttestations> out;
  std::map<std::string, std::string> attestation_of; // subject digest -> attestation manifest
  for (const auto& entry : doc["manifests"]) {
    if (!entry.is_object()) {
      continue;
    }
    const json annotations = entry.value("annotations", json::object());
    if (text_of(annotations, k_reference_type) == k_attestation_manifest) {
      attestation_of[text_of(annotations, k_reference_digest)] = text_of(entry, "digest");
    } else {
      out.push_back({platform_of(entry), text_of(entry, "digest"), {}, -1, -1, {}});
    }
  }
  if (out.empty()) {
    return tl::unexpected(std::string("the index lists no platform image"));
  }
  for (auto& platform : out) {
    auto found = attestation_of.find(platform.digest);
    if (found == attestation_of.end()) {
      platform.problems.push_back("no attestation manifest refers to it");
      continue;
    }
    platform.attestation = found->second;
    auto text = manifest(found->second);
    json attestation = text ? json::parse(*text, nullptr, false) : json();
    if (!attestation.is_object() || !attestation.contains("layers") ||
        !attestation["layers"].is_array()) {
      platform.problems.push_back(fmt::format("its attestation manifest {} cannot be read{}",
                                              found->second, text ? "" : ": " + text.error()));
      continue;
    }
    for (const auto& layer : attestation["layers"]) {
      const std::string type =
          text_of(layer.value("annotations", json::object()), k_predicate_type_annotation);
      if (type != k_slsa_provenance_v1 && type != k_spdx_predicate) {
        continue;
      }
      auto bytes = blob(text_of(layer, "digest"));
      json stated = bytes ? json::parse(*bytes, nullptr, false) : json();
      const char* what = type == k_slsa_provenance_v1 ? "provenance" : "SBOM";
      if (!stated.is_object() || text_of(stated, "predicateType") != type ||
          !stated.contains("predicate") || !stated["predicate"].is_object()) {
        platform.problems.push_back(fmt::format("its {} statement cannot be read{}", what,
                                                bytes ? "" : ": " + bytes.error()));
        continue;
      }
      if (std::string subject = subject_digest(stated); subject != platform.digest) {
        platform.problems.push_back(fmt::format("its {} is about {}, not this image", what,
                                                subject.empty() ? "no subject" : subject));
        continue;
      }
      const json& predicate = stated["predicate"];
      if (type == k_slsa_provenance_v1) {
        const json definition = predicate.value("buildDefinition", json::object());
        const json dependencies = definition.is_object()
                                      ? definition.value("resolvedDependencies", json::array())
                                      : json::array();
        platform.dependencies = dependencies.is_array() ? static_cast<int>(dependencies.size()) : 0;
      } else if (text_of(predicate, "spdxVersion") == "SPDX-2.3") {
        // The image is a package of its own SBOM (purpose CONTAINER): what it holds are the rest.
        const json packages = predicate.value("packages", json::array());
        platform.packages = 0;
        for (const auto& package : packages.is_array() ? packages : json::array()) {
          platform.packages += text_of(package, "primaryPackagePurpose") == "CONTAINER" ? 0 : 1;
        }
      } else {
        platform.problems.push_back("its SBOM is not an SPDX 2.3 document");
      }
    }
    if (platform.dependencies < 0) {
      platform.problems.push_back("no SLSA provenance v1 statement about it");
    }
    if (platform.packages < 0) {
      platform.problems.push_back("no SPDX 2.3 SBOM statement about it");
    }
  }
  return out;
}

} // namespace kiln
