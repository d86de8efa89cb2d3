#pragma once

#include <initializer_list>
#include <optional>
#include <string_view>

#include "dockerfile/parser.h"

namespace kiln {

/// One option of a `--mount=type=cache,target=/x` value, under the first of `keys` (an option
/// and its aliases, lower-case; compared ignoring case) that any item names: the value of the
/// last such item, "" for an item without `=`, nullopt when no item names any of them.
std::optional<std::string_view> mount_option(std::string_view value,
                                             std::initializer_list<std::string_view> keys);

/// Whether `ins` is a RUN that mounts the secret `id` (`--mount=type=secret,id=ID`; without an
/// id, BuildKit takes the target's last path component).
bool run_mounts_secret(const Instruction& ins, std::string_view id);

/// Whether a RUN step of `df` mounts the secret `id` (`--mount=type=secret,id=ID`; without an
/// id, BuildKit takes the target's last path component).
bool mounts_secret(const Dockerfile& df, std::string_view id);

} // namespace kiln
