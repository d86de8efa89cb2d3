#include "cli/records_folder.h"

#include <fmt/format.h>

#include "cli/chain_file.h"

namespace kiln {

tl::expected<std::filesystem::path, std::string> records_folder(const std::string& records,
                                                                const std::string& chain_file,
                                                                HistorySettings* history) {
  std::filesystem::path folder = records;
  if (!chain_file.empty()) {
    auto chain = load_chain_or_report(chain_file, "", "no records were read");
    if (!chain) {
      return tl::unexpected(fmt::format("cannot read the records folder from {}", chain_file));
    }
    folder = folder.empty() ? chain->records : folder;
    if (history) {
      *history = chain->history;
    }
  }
  if (folder.empty()) {
    folder = "records";
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(folder / "runs", ec)) {
    return tl::unexpected(fmt::format("{} holds no runs (no {}): name the records folder with "
                                      "--records DIR or the chain with --chain FILE",
                                      folder.string(), (folder / "runs").string()));
  }
  return folder;
}

tl::expected<std::filesystem::path, std::string> run_folder(const std::string& run,
                                                            const std::filesystem::path& records) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(std::filesystem::path(run) / "manifest.json", ec)) {
    return std::filesystem::path(run);
  }
  std::filesystem::path named = run == "latest" ? records / "latest" : records / "runs" / run;
  if (std::filesystem::is_regular_file(named / "manifest.json", ec)) {
    return std::filesystem::canonical(named, ec);
  }
  return tl::unexpected(fmt::format("no run '{}': neither a run folder holding manifest.json nor a "
                                    "run id under {} (see `ls {}`)",
                                    run, (records / "runs").string(), (records / "runs").string()));
}

} // namespace kiln
