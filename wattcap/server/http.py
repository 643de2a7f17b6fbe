"""What every router of the server shares: the app's state as dependencies, the token checks,
size-limited bodies, and the shapes of answers (404s, stored files sent byte for byte)."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from wattcap.server import CHECKSUM_HEADER
from wattcap.server.jobs import JobRunner
from wattcap.server.settings import ServerSettings
from wattcap.server.store import Store
from wattcap.server.validate import PayloadError

_bearer = HTTPBearer(auto_error=False, description="The token given to `wattcap serve`.")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def settings_of(request: Request) -> ServerSettings:
    """The settings the app was created with."""
    return request.app.state.settings


def store_of(request: Request) -> Store:
    """The app's database."""
    return request.app.state.store


def jobs_of(request: Request) -> JobRunner:
    """The app's background job runner."""
    return request.app.state.jobs


StoreDep = Annotated[Store, Depends(store_of)]
JobsDep = Annotated[JobRunner, Depends(jobs_of)]
SettingsDep = Annotated[ServerSettings, Depends(settings_of)]


def _check_token(settings: ServerSettings,
                 credentials: HTTPAuthorizationCredentials | None) -> None:
    if settings.token is None:
        raise HTTPException(403, "this server was started without a token: writes are "
                            "disabled (start it with --token or WATTCAP_SERVER_TOKEN)")
    if credentials is None:
        raise HTTPException(401, "missing bearer token (Authorization: Bearer <token>)",
                            headers={"WWW-Authenticate": "Bearer"})
    # constant-time comparison: the answer's timing must not reveal the token
    if not hmac.compare_digest(credentials.credentials.encode(), settings.token.encode()):
        raise HTTPException(403, "wrong bearer token")


async def require_write(request: Request, credentials: Credentials) -> None:
    """Writes need the bearer token (and a server started with one)."""
    _check_token(settings_of(request), credentials)


async def require_read(request: Request, credentials: Credentials) -> None:
    """Reads need the token only on a server with private reads."""
    settings = settings_of(request)
    if settings.private_reads:
        _check_token(settings, credentials)


READ = [Depends(require_read)]
WRITE = [Depends(require_write)]


def parse_shape(value: str | None) -> list[int] | None:
    """'1,8,8' -> [1, 8, 8] (query parameters), refusing anything else with a 422."""
    if value is None:
        return None
    try:
        shape = [int(d) for d in value.replace("x", ",").split(",") if d.strip()]
    except ValueError:
        raise HTTPException(
            422, f"input_shape must be comma-separated integers, got {value!r}") from None
    return shape


async def read_body(request: Request, limit: int, what: str) -> bytes:
    """The request body, refusing more than `limit` bytes with a 413. Content-Length is only
    a claim (and may be absent with chunked uploads), so the stream is counted as it comes."""
    too_big = HTTPException(413, f"{what} larger than this server's limit of {limit} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_big
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


def utf8_text(data: bytes, what: str) -> str:
    """An uploaded file as text, or a 422 that says it is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PayloadError(f"{what} is not UTF-8 text") from None


def json_body(schema_name: str) -> dict:
    """OpenAPI for an endpoint that reads its JSON body itself (to size-limit it and to
    validate it with the same code as the files)."""
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{schema_name}"}}}}}


def not_found(what: str, item_id: int) -> HTTPException:
    """The 404 of a missing resource."""
    return HTTPException(404, f"no {what} with id {item_id}")


def stored_json(found: tuple[str, str] | None, kind: str, item_id: int) -> Response:
    """A stored file sent as is, byte for byte with its checksum (the route's model only
    documents it)."""
    if found is None:
        raise not_found(kind, item_id)
    return Response(content=found[0], media_type="application/json",
                    headers={CHECKSUM_HEADER: found[1]})
