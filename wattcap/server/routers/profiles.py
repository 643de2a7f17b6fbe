"""`/profiles`: a device's lookup tables for one model and input shape."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from wattcap.core.profile import ProfileTable
from wattcap.server import CHECKSUM_HEADER
from wattcap.server.http import (
    READ,
    WRITE,
    SettingsDep,
    StoreDep,
    json_body,
    parse_shape,
    read_body,
    stored_json,
    utf8_text,
)
from wattcap.server.schemas import ProfileInfo
from wattcap.server.store import Store
from wattcap.server.validate import check_profile, verify_checksum

router = APIRouter(tags=["profiles"])


@router.get("/profiles", response_model=list[ProfileInfo], dependencies=READ)
def list_profiles(
    store: StoreDep,
    device: str | None = Query(None, description="Device model, e.g. jetson-nano."),
    model: str | None = None,
    input_shape: str | None = Query(None, description="Comma-separated, e.g. 3,32,32."),
    power_mode: str | None = Query(None, description="A Jetson power mode: its name (MAXN, "
                                   "15W) or its id, as nvpmodel numbers it (0, 2)."),
    device_kind: str | None = Query(None, description="emulated, jetson or nvml."),
    limit: int = Query(100, ge=1, le=1000),
) -> list[ProfileInfo]:
    """Stored profiles, newest first."""
    return store.list_profiles(device, model, parse_shape(input_shape), power_mode,
                               device_kind, limit)


def _store_profile(store: Store, data: bytes, sha: str) -> tuple[ProfileInfo, bool]:
    profile = check_profile(utf8_text(data, "the profile"))
    return store.add_profile(profile, data.decode("utf-8"), sha)


@router.post("/profiles", response_model=ProfileInfo, status_code=201, dependencies=WRITE,
             openapi_extra=json_body("ProfileTable"))
async def upload_profile(request: Request, response: Response, store: StoreDep,
                         settings: SettingsDep) -> ProfileInfo:
    """Upload a ProfileTable file (validated like the file on disk)."""
    data = await read_body(request, settings.max_json_bytes, "profile")
    sha = verify_checksum(data, request.headers.get(CHECKSUM_HEADER), required=False)
    info, created = await run_in_threadpool(_store_profile, store, data, sha)
    if not created:
        response.status_code = 200
    return info


@router.get("/profiles/{profile_id}", response_model=ProfileTable, dependencies=READ)
def get_profile(profile_id: int, store: StoreDep) -> Response:
    """The ProfileTable file, byte for byte as stored."""
    return stored_json(store.get_profile(profile_id), "profile", profile_id)
