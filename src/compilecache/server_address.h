#pragma once

#include <string>
#include <string_view>

#include <sys/socket.h>

namespace kiln::cc {

/// Where the sccache client connects, and that address in words.
struct ServerAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  std::string text; // "127.0.0.1:4226", "unix:/path", "unix:@name"
};

/// The address the sccache client derives from SCCACHE_SERVER_UDS and SCCACHE_SERVER_PORT
/// (each may be null or empty): the socket when one is named, else 127.0.0.1 on the port,
/// 4226 when the port is unset or not a number.
ServerAddress sccache_server_address(const char* uds, const char* port);

/// Whether something accepts connections at `address`: the check the sccache client itself
/// makes first. Costs one connect, not an sccache process, and sends nothing, so it is not a
/// request to the server (it does not keep an idle server alive).
bool server_answers(const ServerAddress& address);

} // namespace kiln::cc
