#include "driver/run_folder.h"

#include <chrono>
#include <mutex>
#include <system_error>

#include <fmt/format.h>

namespace kiln {

struct RecordState {
  mutable std::mutex mutex;
  std::mutex driver_log_mutex;
  Headroom headroom;
  std::vector<std::string> errors;
  std::string out_of_room; // the first failure for want of room: engine logs stop at it

  /// Note a failed write. One for want of room also gives the reserved room back and cuts
  /// every engine log, so what room is left goes to driver.log and the manifest; any other
  /// (a permission, too many open files) cuts only the file that failed.
  void fail(std::string error) {
    std::lock_guard lock(mutex);
    if (out_of_room.empty() && is_out_of_room(error)) {
      out_of_room = error;
      headroom.release();
    }
    errors.push_back(std::move(error));
  }

  std::string first_out_of_room() const {
    std::lock_guard lock(mutex);
    return out_of_room;
  }
};

void RecordLog::cut(uint64_t at, const std::string& reason) {
  m_cut_at = at;
  // Written past the latch on purpose: with the reserved room released it usually fits, and a
  // reader of the log then sees where and why it ends.
  m_file.write_after_cut(
      fmt::format("\n[kiln] this log was cut here, at byte {}: {}\n", at, reason));
}

namespace {

uint64_t millis_since(std::chrono::steady_clock::time_point start) {
  auto elapsed = std::chrono::steady_clock::now() - start;
  return static_cast<uint64_t>(
      std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()));
}

} // namespace

void RecordLog::keep_line_times(const std::filesystem::path& times_path) {
  m_times_start = std::chrono::steady_clock::now();
  if (!m_times.open(times_path)) {
    m_times.close();
  }
}

void RecordLog::finish_line_times() {
  if (!m_times.is_open() || m_times.failed()) {
    return;
  }
  if (!m_times.write(m_times_writer.on_end(m_file.written(), millis_since(m_times_start)))) {
    m_times.close();
  }
}

bool RecordLog::write(std::string_view data) {
  if (m_cut_at) {
    return false;
  }
  if (m_times.is_open() && !m_times.failed() && !data.empty()) {
    std::string mark = m_times_writer.on_chunk(m_file.written(), millis_since(m_times_start));
    if (!mark.empty() && !m_times.write(mark)) {
      m_times.close(); // the sidecar is a help, never a reason to cut the record
    }
  }
  if (m_engine_output && m_state) {
    if (std::string first = m_state->first_out_of_room(); !first.empty()) {
      cut(m_file.written(), "the run's record ran out of room (" + first + ")");
      return false;
    }
  }
  if (m_file.write(data)) {
    return true;
  }
  if (m_state) {
    m_state->fail(fmt::format("{} (cut at byte {})", m_file.error(), m_file.cut_at()));
  }
  cut(m_file.cut_at(), m_file.error());
  return false;
}

tl::expected<RecordLog, std::string> RecordLog::open(const std::filesystem::path& path) {
  RecordLog log;
  log.m_path = path;
  if (auto opened = log.m_file.open(path); !opened) {
    return tl::unexpected(opened.error());
  }
  return log;
}

tl::expected<RunFolder, std::string> RunFolder::create(const std::filesystem::path& records,
                                                       SystemTime start, uint64_t headroom) {
  RunFolder folder;
  folder.m_records = records.string();
  std::error_code ec;
  std::filesystem::create_directories(records / "runs", ec);
  // Two runs started in the same second draw again until their folders differ: sharing one
  // would mix their logs.
  bool created = false;
  for (int draw = 0; draw < 100 && !created && !ec; ++draw) {
    folder.m_run_id = make_run_id(start);
    folder.m_path = records / "runs" / folder.m_run_id;
    created = std::filesystem::create_directory(folder.m_path, ec);
  }
  if (created) {
    std::filesystem::create_directory(folder.m_path / "stages", ec);
  }
  auto give_up = [&](std::string why) {
    if (created) {
      std::error_code ignored;
      std::filesystem::remove_all(folder.m_path, ignored);
    }
    return tl::unexpected(std::move(why));
  };
  if (!created || ec) {
    return give_up("cannot create a run folder under " + (records / "runs").string() + ": " +
                   (ec ? ec.message() : "every id drawn is taken"));
  }
  folder.m_state = std::make_shared<RecordState>();
  if (headroom > 0) {
    auto room = Headroom::reserve(folder.m_path / ".record-headroom", headroom);
    if (!room) {
      return give_up(fmt::format("the records folder {} has no room for a run's record: {}; "
                                 "free space there or point [chain] records elsewhere",
                                 records.string(), room.error()));
    }
    folder.m_state->headroom = std::move(*room);
  }
  folder.m_driver_log = std::make_unique<RecordLog>();
  if (auto opened = folder.m_driver_log->m_file.open(folder.m_path / "driver.log"); !opened) {
    return give_up(opened.error());
  }
  folder.m_driver_log->m_path = folder.m_path / "driver.log";
  folder.m_driver_log->m_state = folder.m_state;
  folder.m_driver_log->m_engine_output = false;
  return folder;
}

tl::expected<void, std::string> RunFolder::point_latest() {
  // Swap the link in with a rename so `latest` never dangles or vanishes.
  std::filesystem::path records(m_records);
  std::filesystem::path link = records / "latest";
  std::filesystem::path tmp = records / ("latest.tmp-" + m_run_id);
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  std::filesystem::create_directory_symlink(std::filesystem::path("runs") / m_run_id, tmp, ec);
  if (!ec) {
    std::filesystem::rename(tmp, link, ec);
  }
  if (ec) {
    return tl::unexpected("cannot point " + link.string() + " at the run: " + ec.message());
  }
  return {};
}

void RunFolder::log(std::string_view message) {
  std::string line = utc_iso8601(std::chrono::system_clock::now());
  line += ' ';
  line += message;
  line += '\n';
  std::lock_guard lock(m_state->driver_log_mutex); // the disk watchdog logs from its thread
  m_driver_log->write(line);
}

tl::expected<RecordLog, std::string> RunFolder::open_log(const std::string& relative,
                                                         bool line_times) {
  std::error_code ignored; // a lane's stage logs are in a folder of its own; open says why not
  std::filesystem::create_directories((m_path / relative).parent_path(), ignored);
  auto log = RecordLog::open(m_path / relative);
  if (!log) {
    m_state->fail(log.error());
    return log;
  }
  log->m_state = m_state;
  if (line_times) {
    log->keep_line_times((m_path / relative).replace_extension(".times"));
  }
  return log;
}

tl::expected<void, std::string> RunFolder::write_manifest(const RunRecord& run,
                                                          Durability durability) {
  return write_manifest(manifest_json(run), durability);
}

tl::expected<void, std::string> RunFolder::write_manifest(const std::string& text,
                                                          Durability durability) {
  auto written = write_file_atomic(m_path / "manifest.json", text, durability);
  if (written) {
    return written;
  }
  m_state->fail(written.error());
  // A failure for want of room released the reserved room: the manifest fits now unless the
  // disk is full to the last byte again.
  return write_file_atomic(m_path / "manifest.json", text, durability);
}

std::vector<std::string> RunFolder::write_errors() const {
  std::lock_guard lock(m_state->mutex);
  return m_state->errors;
}

std::string RunFolder::attempt_log(const std::string& stage, int attempt) {
  return "stages/" + stage + ".attempt-" + std::to_string(attempt) + ".log";
}

} // namespace kiln
