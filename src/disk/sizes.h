#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

/// A size as buildctl prints it (`3.05MB`, `28.11kB`, `123B`; tonistiigi/units with `%.2f`:
/// decimal B kB MB GB TB PB EB, bytes below 1 kB as an integer), in bytes; binary units
/// (`KiB`...) are read too. A trailing `*` (the table's shared mark) is ignored. 0 when the text
/// is not a size.
uint64_t parse_human_size(std::string_view text);

/// A size the way buildctl and buildah print it, decimal units (`3.16MB`, `123B`), so log lines
/// compare with their own output.
std::string decimal_size(uint64_t bytes);

} // namespace kiln
