#pragma once

#include <optional>
#include <string>

#include "driver/records.h"

namespace kiln {

/// One line saying how an attempt's compile cache fell back, or nullopt when it did not: every
/// compile kiln-cc launched reached sccache (or ccache, in steps that have no sccache at all).
/// A fallback keeps a build going, so nothing fails; without this line the stats would only
/// show a cache that quietly stopped hitting.
std::optional<std::string> compile_fallback_warning(const CompileReport& report);

} // namespace kiln
