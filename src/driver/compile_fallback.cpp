#include "driver/compile_fallback.h"

#include <vector>

#include <fmt/format.h>

#include "util/strings.h"

namespace kiln {

std::optional<std::string> compile_fallback_warning(const CompileReport& report) {
  const cc::CompileStats& t = report.totals;
  // ccache is a fallback only where sccache was meant to serve.
  const bool sccache_meant = report.sccache_absent < report.reports;
  if (report.sccache_lost == 0 && report.sccache_failed == 0 && t.via_direct == 0 &&
      !(sccache_meant && t.via_ccache > 0)) {
    return std::nullopt;
  }
  std::vector<std::string> parts;
  if (report.sccache_failed > 0) {
    parts.push_back(fmt::format("the sccache server did not start in {} of {} step(s)",
                                report.sccache_failed, report.reports));
  }
  if (report.sccache_lost > 0) {
    parts.push_back(fmt::format("the sccache server was lost mid-step in {} of {} step(s), its "
                                "counters with it",
                                report.sccache_lost, report.reports));
  }
  long launched = t.via_sccache + t.via_ccache + t.via_direct;
  std::string uncached = fmt::format("{} ran uncached", t.via_direct);
  if (t.bypasses > 0) {
    uncached += fmt::format(" ({} after sccache failed on them)", t.bypasses);
  }
  parts.push_back(fmt::format("of {} compile(s) kiln-cc launched, {} went to sccache, {} to "
                              "ccache ({} hit(s), {} miss(es)), {}",
                              launched, t.via_sccache, t.via_ccache, t.ccache_hits, t.ccache_misses,
                              uncached));
  return "the compile cache fell back: " + join(parts, "; ");
}

} // namespace kiln
