#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include "chain/chain.h"
#include "engine/oci_writer.h"

namespace kiln {

constexpr const char* k_in_toto_statement = "https://in-toto.io/Statement/v1";
constexpr const char* k_slsa_provenance_v1 = "https://slsa.dev/provenance/v1";
constexpr const char* k_spdx_predicate = "https://spdx.dev/Document";
/// What a kiln provenance's buildDefinition describes: a stage of a chain.
constexpr const char* k_kiln_build_type = "https://kiln.dev/chain/v1";
constexpr const char* k_in_toto_media_type = "application/vnd.in-toto+json";
/// BuildKit's annotations on an attestation manifest's index entry.
constexpr const char* k_reference_type = "vnd.docker.reference.type";
constexpr const char* k_reference_digest = "vnd.docker.reference.digest";
constexpr const char* k_attestation_manifest = "attestation-manifest";
constexpr const char* k_predicate_type_annotation = "in-toto.io/predicate-type";

/// Something a build read, as a provenance names it: a Dockerfile, a parent image, a base.
struct Material {
  std::string name;   // `Dockerfile of base`, `parent base`, `docker.io/library/debian:12`
  std::string uri;    // where it is: a path relative to the chain's folder, an image reference
  std::string digest; // `sha256:<hex>`; "" when kiln does not know it
  /// What the digest is the digest of: an image's manifest, or its config (buildah names an
  /// image by its config's digest); "" for a file.
  std::string media_type = {};
};

/// What kiln knows of how one published platform image was made.
struct ProvenanceFacts {
  std::string subject_name;   // the published reference
  std::string subject_digest; // the platform image's manifest digest
  std::string chain_name;
  std::string chain_file; // as the user named it, relative to the chain's folder
  std::string stage, lane, platform;
  KeyValues build_args; // as the stage received them; a secret-shaped value is never written
  KeyValues pins;       // of the versions file, those the stage received
  /// The build args of every stage it is built on, nearest first: what made them is part of
  /// what made it.
  std::vector<std::pair<std::string, KeyValues>> parents;
  std::vector<Material> materials;
  std::string engine, engine_version, worker;
  std::string kiln_version, run_id, started, finished;
};

/// An in-toto statement about `subject_name@subject_digest` with `predicate`.
nlohmann::json statement(const std::string& predicate_type, const std::string& subject_name,
                         const std::string& subject_digest, nlohmann::json predicate);

/// The SLSA provenance v1 statement of a published image.
nlohmann::json provenance_statement(const ProvenanceFacts& facts);

/// An attestation manifest as BuildKit writes one (an image manifest of `unknown/unknown`, one
/// `application/vnd.in-toto+json` layer per statement annotated with its predicate type), its
/// blobs put in `layout`; the descriptor an index lists it under, annotated as referring to
/// `subject_digest`.
tl::expected<Descriptor, std::string>
write_attestation_manifest(LayoutWriter& layout, const std::string& subject_digest,
                           const std::vector<nlohmann::json>& statements);

/// What `kiln attest verify` found for one platform image of an index.
struct PlatformAttestations {
  std::string platform;    // `os/arch[/variant]`
  std::string digest;      // the image's manifest digest
  std::string attestation; // the attestation manifest's digest; "" when the index has none
  int dependencies = -1;   // of its provenance (resolvedDependencies); -1: no valid provenance
  int packages = -1;       // of its SBOM; -1: no valid SBOM
  std::vector<std::string> problems; // why it does not verify; empty when it does
};

/// Reads what a registry serves, by digest: a manifest, and a blob of an attestation manifest.
using DigestReader = std::function<tl::expected<std::string, std::string>(const std::string&)>;

/// Check that every platform image an index lists (`index`, the index's JSON) has an
/// attestation manifest referring to it whose layers hold an in-toto statement with SLSA
/// provenance v1 and one with an SPDX 2.3 SBOM, each naming the image's digest as its subject.
/// An index that is not one is an error; what a platform lacks is its problems.
tl::expected<std::vector<PlatformAttestations>, std::string>
check_attestations(std::string_view index, const DigestReader& manifest, const DigestReader& blob);

} // namespace kiln
