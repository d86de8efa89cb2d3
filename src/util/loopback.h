#pragma once

namespace kiln {

/// A TCP port on 127.0.0.1 that nothing listens on at this moment (the kernel's pick for a bind
/// to port 0); 0 when none could be had. Another process may take it before the caller does.
int free_loopback_port();

/// Whether something accepts TCP connections on 127.0.0.1 at `port`: one connect, nothing sent.
bool loopback_accepts(int port);

} // namespace kiln
