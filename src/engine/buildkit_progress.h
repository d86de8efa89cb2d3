#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln {

// What buildctl v0.11.6 prints with `--progress=plain` (util/progress/progressui/printer.go and
// display.go upstream); the recordings in tests/fixtures/buildkit-v0.11.6 are the reference.

enum class VertexState { running, done, cached, error, canceled };

/// `[base 1/2] ...` and `[1/2] ...` are Dockerfile steps, `[internal] ...` the frontend's own
/// work, `[context name] ...` a named build context; anything else comes from the engine.
enum class VertexKind { step, internal, context, engine };

struct Vertex {
  int number = 0;
  std::string name; // as printed in the header
  VertexKind kind = VertexKind::engine;
  std::string stage; // Dockerfile stage of a step ("base"), or the context's name
  int step = 0;      // step within that stage, 1-based; 0 when not a step
  int steps = 0;
  std::string instruction; // a step's instruction text
  VertexState state = VertexState::running;
  std::optional<double> seconds; // from DONE x.ys
  std::string error;             // after "ERROR: "
  // What a vertex printed, each its last lines only (at least k_vertex_lines_kept): a step's
  // output may be gigabytes, and the stage log on disk has all of it.
  std::vector<std::string> logs;     // log text without the "#N 0.123 " prefix, in order
  std::vector<std::string> statuses; // status lines without the "#N " prefix
  std::vector<std::string> warnings;
  size_t log_lines = 0; // every log line it printed, kept or not
  bool clipped = false;
};

enum class LineKind {
  blank,
  header,
  left,
  log,
  status,
  done,
  cached,
  error,
  canceled,
  warning,
  replay,
  excerpt,
  solve_error,
  client_log,
  other
};

struct ClientLog {
  std::string level;
  std::string message;
};

/// How many of its last lines of each kind a vertex keeps, at the least: as many as a failure's
/// evidence reads.
constexpr size_t k_vertex_lines_kept = 64;

/// The kind, stage, step and instruction a vertex name implies; the other fields stay default.
Vertex classify_vertex_name(std::string_view name);

/// Folds buildctl's plain progress output in, one line at a time.
class PlainProgress {
public:
  /// `line` comes without its newline.
  LineKind feed(std::string_view line);

  const std::vector<Vertex>& vertices() const { return m_vertices; } // in order of first header
  const Vertex* find(int number) const;
  const Vertex* current() const; // vertex of the last header, nullptr when none
  const Vertex* failed() const;  // the first vertex in state error, or nullptr
  const std::string& solve_error() const { return m_solve_error; } // after "error: "
  int dockerfile_line() const { return m_dockerfile_line; }        // 0 when no excerpt
  /// The last client log lines (at least k_vertex_lines_kept).
  const std::vector<ClientLog>& client_logs() const { return m_client_logs; }
  int steps() const;        // Dockerfile step vertices seen
  int steps_cached() const; // of those, CACHED

private:
  enum class Block { none, replay, excerpt_opening, excerpt };

  LineKind feed_vertex_line(int number, std::string_view rest);
  LineKind feed_event(Vertex& vertex, std::string_view rest);
  Vertex* find_mutable(int number);

  std::vector<Vertex> m_vertices;
  std::unordered_map<int, std::size_t> m_by_number;
  std::optional<std::size_t> m_current;
  // The printer prints a header after a blank line and after leaving a vertex, so those two
  // decide whether the next `#N` line names a vertex or reports on one.
  bool m_header_due = true;
  Block m_block = Block::none;
  int m_excerpt_opening = 0; // line number of an excerpt whose opening rule has yet to come
  std::string m_solve_error;
  int m_dockerfile_line = 0;
  std::vector<ClientLog> m_client_logs;
};

} // namespace kiln
