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

tl::expected<std::filesystem::path, std::string> resolve_run_folder(const std::string& run,
                                                                    const std::string& records) {
  std::error_code error;
  std::filesystem::path folder = run;
  if (!std::filesystem::is_directory(folder, error)) {
    folder = run == "latest" ? std::filesystem::path(records) / "latest"
                             : std::filesystem::path(records) / "runs" / run;
  }
  if (!std::filesystem::is_directory(folder, error)) {
    return tl::unexpected(fmt::format(
        "no run folder {} ({} is neither a folder nor a run under {}/runs); name a run id "
        "from {}/runs, `latest` or a run folder, and --records DIR when the records are "
        "elsewhere",
        folder.string(), run, records, records));
  }
  if (!std::filesystem::exists(folder / "manifest.json", error)) {
    return tl::unexpected(
        fmt::format("{} holds no manifest.json, so it is not a run folder; name a folder "
                    "under <records>/runs",
                    folder.string()));
  }
  // `latest` is a link: the page, and the line that names it, belong to the run it points at.
  if (auto real = std::filesystem::canonical(folder, error); !error) {
    folder = real;
  }
  return folder;
}

void add_records_options(CLI::App* command, RecordsArgs& args) {
  command->add_option("--records", args.records,
                      "The records folder (default: the chain file's, or ./records)");
  command->add_option("--chain", args.chain_file,
                      "The chain file: its [chain] records is the records folder");
}

void add_run_options(CLI::App* command, RecordsArgs& args, const std::string& what) {
  command->add_option("run", args.run, what);
  add_records_options(command, args);
}

tl::expected<std::filesystem::path, std::string> run_folder(const RecordsArgs& args) {
  std::error_code error;
  // A folder named as the run needs no records folder to be found in.
  if (args.chain_file.empty() && std::filesystem::is_directory(args.run, error)) {
    return resolve_run_folder(args.run, args.records);
  }
  auto records = records_folder(args.records, args.chain_file);
  if (!records) {
    return tl::unexpected(records.error());
  }
  return resolve_run_folder(args.run, records->string());
}

} // namespace kiln
