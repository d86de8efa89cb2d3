#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace kiln {

/// POST `body` to `url` (plain `http://host[:port]/path`: a collector on this machine or the
/// build network) with `content_type`, waiting at most `timeout` for the whole exchange.
/// Returns the response's status code; an error says what failed (resolving, connecting,
/// sending, or a reply that is not HTTP).
tl::expected<int, std::string> http_post(std::string_view url, std::string_view content_type,
                                         std::string_view body, std::chrono::milliseconds timeout);

} // namespace kiln
