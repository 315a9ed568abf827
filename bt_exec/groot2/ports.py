"""The ports a Groot2 publisher serves on: the request/reply socket's and the next one, the publisher's."""
from __future__ import annotations

import socket


def free_port_pair(host: str = "127.0.0.1", tries: int = 50) -> int:
    """A port of ``host`` that is free and whose next one is free too, for a publisher to serve on (another process
    may still take them before it binds); OSError when ``tries`` ports in a row had a taken neighbour."""
    for _ in range(tries):
        with socket.socket() as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
        if port >= 65534:
            continue
        with socket.socket() as after:
            try:
                after.bind((host, port + 1))
            except OSError:
                continue
        return port
    raise OSError(f"no two free ports in a row on {host} in {tries} tries")
