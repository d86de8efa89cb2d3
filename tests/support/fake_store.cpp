#include "fake_store.h"

#include <stdexcept>
#include <system_error>

namespace kiln::testing {

FakeStore FakeStore::files(std::filesystem::path dir) {
  FakeStore store;
  store.m_location = dir;
  store.m_dir = std::move(dir);
  return store;
}

FakeStore::FakeStore(const FakeStore& other)
    : StoreLevers(), m_dir(other.m_dir), m_location(other.m_location),
      m_location_error(other.m_location_error), m_stale(other.m_stale), m_tagged(other.m_tagged),
      m_throw(other.m_throw) {}

tl::expected<StoreLocation, std::string> FakeStore::location() const {
  ++m_located;
  if (!m_location_error.empty()) {
    return tl::unexpected(m_location_error);
  }
  return StoreLocation{m_location, "the fake store " + m_location.string()};
}

LayerPrune FakeStore::prune_layers(double keep_gb) const {
  ++m_prunes;
  m_last_keep = keep_gb;
  if (m_throw) {
    throw std::runtime_error("store exploded");
  }
  LayerPrune prune;
  prune.ran = true;
  prune.lines.push_back("[disk-store] fake prune");
  if (m_dir.empty()) {
    prune.summary = "removed 1 layer";
    prune.removed_any = true;
    return prune;
  }
  std::error_code error;
  prune.removed_any = std::filesystem::remove(m_dir / "layers", error);
  prune.summary = prune.removed_any ? "removed the layer cache" : "removed nothing";
  return prune;
}

tl::expected<void, std::string> FakeStore::remove_image(const std::string& reference) const {
  std::lock_guard<std::mutex> lock(m_mutex);
  m_removed.push_back(reference);
  if (m_dir.empty()) {
    return {};
  }
  std::error_code error;
  if (!std::filesystem::remove(m_dir / reference, error)) {
    return tl::unexpected(std::string("no such image"));
  }
  return {};
}

std::vector<std::string> FakeStore::removed() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  return m_removed;
}

int count_containing(const std::vector<std::string>& lines, const std::string& needle) {
  int n = 0;
  for (const std::string& line : lines) {
    n += line.find(needle) != std::string::npos ? 1 : 0;
  }
  return n;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) {
    out += line + "\n";
  }
  return out;
}

} // namespace kiln::testing
