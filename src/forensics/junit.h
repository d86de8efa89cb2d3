#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "forensics/report.h"

namespace kiln {

/// The run as JUnit XML, the Jenkins/Ant shape CI servers read as test results: one
/// <testsuite> per lane (without lanes, one named after the chain) and one <testcase> per
/// stage. A stage that failed, was refused or unverified is a <failure> quoting the real error
/// lines of its failing step (forensics' analysis) and naming its log, under `run_dir`; one
/// that was interrupted or crashed an <error>; one that never ran <skipped>. docs/report.md
/// lists every element and property.
std::string render_junit(const ReportInput& in, const std::filesystem::path& run_dir);

/// `text` safe in XML 1.0 content and in a quoted attribute: `&`, `<`, `>`, `"` and `'` as
/// entities; CR (and, with `attribute`, LF and TAB, which a parser would turn into spaces) as
/// character references; the characters XML 1.0 forbids (the control bytes a log holds,
/// U+FFFE, U+FFFF) left out, and bytes that are not UTF-8 as U+FFFD.
std::string xml_escape(std::string_view text, bool attribute = false);

} // namespace kiln
