#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chain/chain.h"

namespace kiln {

/// Whether a build arg's value must never be shown: a secret by its name (the image-env gate's
/// `leak-secret` words) or by the shape of its value (a vendor token, a password in a URL).
bool is_secret_build_arg(std::string_view name, std::string_view value);

/// How a secret value is shown: a URL with only its password masked, as kiln-cc shows a cache
/// endpoint, anything else as its first characters and its length.
std::string shown_secret(std::string_view value);

/// An engine's argv as a shell line for the record, driver.log, the console and `--dry-run`:
/// the value of every secret build arg of `build_args` replaced by its shown form. The argv
/// itself reaches the engine unchanged.
std::string shown_command(const std::vector<std::string>& argv, const KeyValues& build_args);

} // namespace kiln
