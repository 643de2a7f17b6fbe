"""The server side of the workflow (DESIGN §5).

A server keeps pre-trained models (safetensors weights), efficiency vectors and device profiles
in SQLite and hands them to devices; it can also run the proxy estimation itself, so a device
never has to. Devices talk to it through `wattcap.server.client.WattcapClient` or the CLI
(`wattcap serve`, `wattcap push`, `wattcap pull`, and `--server URL` on `plan`, `train` and
`estimate`).

The server's dependencies (fastapi, uvicorn, httpx) are the optional extra `wattcap[server]`:
nothing in this package imports them at module level except `app` (fastapi) and `client`
(httpx), so the core CLI works without them.
"""

from __future__ import annotations

#: the header that carries a payload's hex SHA-256, in both directions
CHECKSUM_HEADER = "X-Wattcap-SHA256"
#: environment variable holding the bearer token (server and clients)
TOKEN_ENV = "WATTCAP_SERVER_TOKEN"
#: environment variable holding the server URL for `push` and `pull`
SERVER_ENV = "WATTCAP_SERVER"
