// One log file: its name's stage, lane and attempt, and its bytes read ahead on a thread of
// their own and fed to a LogAnalyzer with the times of its `.times` sidecar.
#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forensics/log_analyzer_impl.h"

namespace kiln::forensics {

bool parse_log_name(const std::filesystem::path& relative, std::string& stage, std::string& lane,
                    int& attempt) {
  std::string file = relative.filename().string();
  constexpr std::string_view k_suffix = ".log";
  constexpr std::string_view k_attempt = ".attempt-";
  if (!std::string_view(file).ends_with(k_suffix)) {
    return false;
  }
  std::string_view base(file.data(), file.size() - k_suffix.size());
  size_t at = base.rfind(k_attempt);
  if (at == std::string_view::npos || at == 0) {
    return false;
  }
  auto number = small_number(base.substr(at + k_attempt.size()));
  if (!number || *number < 1) {
    return false;
  }
  stage = std::string(base.substr(0, at));
  attempt = *number;
  lane.clear();
  // stages/<lane>/<stage>.attempt-N.log: the folder between stages/ and the file is the lane.
  std::filesystem::path parent = relative.parent_path();
  if (!parent.empty() && parent.filename() != "stages" &&
      parent.parent_path().filename() == "stages") {
    lane = parent.filename().string();
  }
  return true;
}

namespace {

std::string fmt_error(const std::filesystem::path& path, const char* why) {
  return "cannot read " + path.string() + ": " + why;
}

} // namespace

std::optional<std::string> read_small_file(const std::filesystem::path& path, size_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return std::nullopt;
  }
  std::string text;
  char buffer[65536];
  ssize_t got = 0;
  while ((got = ::read(fd, buffer, sizeof buffer)) > 0 && text.size() < limit) {
    text.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return text;
}

namespace {

// Reads a file ahead on a thread of its own into a few buffers while the caller analyses
// the chunk before: the copy out of the page cache then costs the analysis no time, and
// neither does finding the line ends, which the thread does for each chunk it read.
class ReadAhead {
public:
  /// `size_hint`: the file's size when it was opened; a file that grows is still read to its end.
  ReadAhead(int fd, size_t size_hint)
      : m_fd(fd), m_chunk_bytes(std::clamp<size_t>(size_hint + 1, 64u << 10, k_chunk_bytes)) {
    for (size_t i = 0; i < k_buffers; ++i) {
      m_free.push_back(i);
    }
    m_thread = std::thread([this] { run(); });
  }

  ~ReadAhead() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_changed.notify_all();
    m_thread.join();
  }

  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  struct Piece {
    std::string_view bytes;
    std::span<const uint32_t> newlines; // offsets of the '\n's in `bytes`
  };

  /// The next chunk of the file, empty at its end or on an error; valid until the next call.
  Piece next() {
    std::unique_lock lock(m_mutex);
    if (m_held) {
      m_free.push_back(*m_held);
      m_held.reset();
      m_changed.notify_all();
    }
    m_changed.wait(lock, [this] { return !m_filled.empty() || m_ended; });
    if (m_filled.empty()) {
      return {};
    }
    m_held = m_filled.front();
    m_filled.pop_front();
    const Chunk& chunk = m_chunks[*m_held];
    return {std::string_view(chunk.bytes.get(), chunk.size), chunk.newlines};
  }

  /// The errno of a failed read, 0 when the file was read to its end; once next() came back
  /// empty.
  int error() {
    std::lock_guard lock(m_mutex);
    return m_errno;
  }

private:
  static constexpr size_t k_buffers = 4;
  static constexpr size_t k_chunk_bytes = 1u << 20;

  // A buffer is made when it is first read into, sized to the file and not zeroed: four
  // zeroed megabytes for each of a run's small logs were most of the time its history took.
  struct Chunk {
    std::unique_ptr<char[]> bytes;
    size_t size = 0;
    std::vector<uint32_t> newlines;
  };

  void run() {
    for (;;) {
      size_t index = 0;
      {
        std::unique_lock lock(m_mutex);
        m_changed.wait(lock, [this] { return !m_free.empty() || m_stop; });
        if (m_stop) {
          return;
        }
        index = m_free.front();
        m_free.pop_front();
      }
      Chunk& chunk = m_chunks[index];
      if (!chunk.bytes) {
        chunk.bytes = std::make_unique_for_overwrite<char[]>(m_chunk_bytes);
      }
      ssize_t got = ::read(m_fd, chunk.bytes.get(), m_chunk_bytes);
      int read_errno = got < 0 ? errno : 0;
      if (got > 0) {
        chunk.size = static_cast<size_t>(got);
        find_newlines(std::string_view(chunk.bytes.get(), chunk.size), chunk.newlines);
      }
      {
        std::lock_guard lock(m_mutex);
        if (got <= 0) {
          m_errno = read_errno;
          m_ended = true;
        } else {
          m_filled.push_back(index);
        }
      }
      m_changed.notify_all();
      if (got <= 0) {
        return;
      }
    }
  }

  int m_fd;
  size_t m_chunk_bytes;
  std::array<Chunk, k_buffers> m_chunks;
  std::mutex m_mutex;
  std::condition_variable m_changed;
  std::deque<size_t> m_free, m_filled;
  std::optional<size_t> m_held; // the chunk the caller has
  bool m_ended = false;
  bool m_stop = false;
  int m_errno = 0;
  std::thread m_thread;
};

} // namespace

tl::expected<LogResult, std::string> analyze_log_file(const std::filesystem::path& path,
                                                      const std::string& shown,
                                                      const Options& options) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return tl::unexpected(fmt_error(path, std::strerror(errno)));
  }
  LineClock clock;
  std::filesystem::path times = path;
  times.replace_extension(".times");
  // A sidecar is a few bytes per tenth of a second of build; 64 MiB is days of it.
  if (auto text = read_small_file(times, 64u << 20)) {
    clock = LineClock(parse_line_times(*text));
  }
  bool sidecar = !clock.empty();
  LogAnalyzer analyzer(options, std::move(clock));
  int read_errno = 0;
  {
    struct stat info {};
    ReadAhead reader(fd, ::fstat(fd, &info) == 0 ? static_cast<size_t>(info.st_size) : 0);
    for (auto piece = reader.next(); !piece.bytes.empty(); piece = reader.next()) {
      analyzer.m_impl->feed_split(piece.bytes, piece.newlines);
    }
    read_errno = reader.error();
  }
  ::close(fd);
  if (read_errno != 0) {
    return tl::unexpected(fmt_error(path, std::strerror(read_errno)));
  }
  LogResult result = analyzer.finish();
  result.path = shown;
  result.line_times = sidecar;
  parse_log_name(path, result.stage, result.lane, result.attempt);
  return result;
}

} // namespace kiln::forensics
