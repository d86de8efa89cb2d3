#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace kiln::forensics {

/// Warning classes that fill a log without pointing at a bug worth a look.
const std::vector<std::string>& default_noise_classes();
/// Warning classes that often do point at one (a missing override, a template never
/// instantiated where it is used, infinite recursion).
const std::vector<std::string>& default_signal_classes();

/// Counts of compiler warnings: every warning GCC or Clang printed as
/// `<where>: warning: <text> [-W<class>]`, by class.
struct WarningCounts {
  long total = 0;
  long noise = 0;
  long signal = 0;
  long unclassified = 0; // `<where>: warning:` lines with no [-W...] class
  std::map<std::string, long, std::less<>> classes;

  WarningCounts& operator+=(const WarningCounts& other);
};

/// What a line tells about a warning. `text` is one line of output.
struct WarningLine {
  std::string_view klass; // "-Wunused-parameter"; empty when the warning names none
};

/// A compiler warning on this line, or nullopt. Accepted: `file:12:3: warning: ...`,
/// `cc1plus: warning: ...`, `ld: warning: ...` (the word `warning:` after `: `), its class the
/// last `[-W...]` group at the end (`[-Wformat=]` reads `-Wformat`, `[-Wfoo,-Werror]` `-Wfoo`).
/// A line starting with `warning:` is not a compiler's (git, pip and make print those too).
std::optional<WarningLine> parse_warning_line(std::string_view text);

/// Sorts classes into noise, signal and the rest.
class WarningClassifier {
public:
  WarningClassifier(const std::vector<std::string>& noise, const std::vector<std::string>& signal);

  /// Count one warning of class `klass` (empty: unclassified) into `counts`. The number of
  /// distinct classes kept per counter is bounded; further ones count as `-W(other)`.
  /// Remembers the last few classes it sorted: not for two threads at once.
  void count(std::string_view klass, WarningCounts& counts) const;

private:
  enum class Kind : unsigned char { other, noise, signal };
  Kind kind_of(std::string_view klass) const;

  // A build prints the same few classes over and over: the last few looked up, compared
  // byte by byte, save hashing each warning's class twice.
  struct Recent {
    std::string klass;
    Kind kind = Kind::other;
  };
  static constexpr size_t k_recent = 8;
  mutable std::array<Recent, k_recent> m_recent;
  mutable size_t m_recent_count = 0;
  mutable size_t m_recent_next = 0;

  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  std::unordered_set<std::string, Hash, std::equal_to<>> m_noise;
  std::unordered_set<std::string, Hash, std::equal_to<>> m_signal;
};

/// "-Wfoo" from "foo", "-Wfoo" or " -Wfoo ": a class as a user may write it in --noise.
std::string normalize_class(std::string_view name);

} // namespace kiln::forensics
