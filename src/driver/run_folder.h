#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "driver/records.h"
#include "forensics/line_times.h"
#include "util/fs.h"
#include "util/time.h"

namespace kiln {

/// Room a run sets aside for its own record when it starts: the manifest of a long chain and
/// the last lines of driver.log fit many times over. When the disk fills, this room is given
/// back so the record can still say what happened.
constexpr uint64_t k_record_headroom = uint64_t{4} << 20;

/// What the files of one run's record share: the reserved room and the first failed writes.
struct RecordState;

/// One file of a run's record that grows while the run goes: driver.log, or the engine output
/// of one attempt. When a write to any file of the record fails (a full disk), the room
/// reserved at the start is released and every engine log is cut where it stands, with a line
/// saying so: what room is left belongs to driver.log and the manifest.
class RecordLog {
public:
  RecordLog() = default;

  /// A log of its own, outside any run's record (a cache snapshot's): it is cut like a record's
  /// when a write fails, and nothing else is.
  static tl::expected<RecordLog, std::string> open(const std::filesystem::path& path);

  /// False once the file was cut.
  bool write(std::string_view data);
  /// Also keep the line-time sidecar `<log minus .log>.times` beside it: a mark `<offset>
  /// <milliseconds since now>` for a chunk of output arriving 100 ms or more after the last
  /// mark (docs/records.md). A sidecar that cannot be written is given up, the log goes on.
  void keep_line_times(const std::filesystem::path& times_path);
  /// The sidecar's last mark: the end of the log, now. Nothing without a sidecar.
  void finish_line_times();

  /// The size the file had when it was cut; nullopt while it is whole.
  std::optional<uint64_t> cut_at() const { return m_cut_at; }
  const std::filesystem::path& path() const { return m_path; }

private:
  friend class RunFolder;
  void cut(uint64_t at, const std::string& reason);

  AppendFile m_file;
  std::filesystem::path m_path;
  std::shared_ptr<RecordState> m_state;
  bool m_engine_output = true; // driver.log is kiln's own and is never cut for another's sake
  std::optional<uint64_t> m_cut_at;
  AppendFile m_times;
  forensics::LineTimesWriter m_times_writer;
  std::chrono::steady_clock::time_point m_times_start;
};

/// The folder of one run: driver.log, stages/<stage>.attempt-N.log, manifest.json; and the
/// `latest` link beside `runs/`. The one writer of a run's record.
class RunFolder {
public:
  /// Create `<records>/runs/<run-id>/stages` for a new run id of a run started at `start` and
  /// set `headroom` bytes aside in it. Refused, leaving nothing behind, when the room cannot
  /// be set aside: a run whose record cannot be written must not start.
  static tl::expected<RunFolder, std::string> create(const std::filesystem::path& records,
                                                     SystemTime start,
                                                     uint64_t headroom = k_record_headroom);

  const std::string& run_id() const { return m_run_id; }
  const std::filesystem::path& path() const { return m_path; }

  /// Append `<utc time> <message>` to driver.log; it reaches the kernel before this returns, so
  /// it survives kiln being killed (not a power cut: no fsync per line). Safe from any thread.
  void log(std::string_view message);

  /// Open a log of engine output, `relative` to path(); with `line_times`, its `.times`
  /// sidecar too (an attempt's log).
  tl::expected<RecordLog, std::string> open_log(const std::string& relative,
                                                bool line_times = false);

  /// Rewrite manifest.json atomically: a kiln killed at any moment leaves a valid record.
  /// A write that fails for want of room is tried again once the reserved room is released.
  /// `flush` for the record a run starts and ends with; the changes between are atomic but
  /// not flushed, so a cached stage does not wait on the disk.
  tl::expected<void, std::string> write_manifest(const RunRecord& run,
                                                 Durability durability = Durability::flush);
  /// write_manifest() of a manifest's text (a fold of the run's events). Safe from any thread.
  tl::expected<void, std::string> write_manifest(const std::string& text,
                                                 Durability durability = Durability::flush);

  /// Point `<records>/latest` at this run, once its first manifest is on disk: `latest` never
  /// names a run without one.
  tl::expected<void, std::string> point_latest();

  /// Every write of the record that failed, in order: "cannot write PATH: No space left on
  /// device (cut at byte N)". Empty while the record is whole.
  std::vector<std::string> write_errors() const;

  /// `stages/<stage>.attempt-<n>.log`, relative to path().
  static std::string attempt_log(const std::string& stage, int attempt);

private:
  std::string m_records;
  std::string m_run_id;
  std::filesystem::path m_path;
  std::shared_ptr<RecordState> m_state;
  std::unique_ptr<RecordLog> m_driver_log;
};

} // namespace kiln
