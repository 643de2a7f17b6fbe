"""`/efficiency-vectors`: r_b per model and task, with their proxy dataset."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from wattcap.core.efficiency import EfficiencyVector
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
from wattcap.server.schemas import EfficiencyInfo
from wattcap.server.store import Store
from wattcap.server.validate import PayloadError, check_efficiency, verify_checksum

router = APIRouter(tags=["efficiency vectors"])


@router.get("/efficiency-vectors", response_model=list[EfficiencyInfo], dependencies=READ)
def list_efficiency(
    store: StoreDep,
    model: str | None = None,
    task: str | None = None,
    dataset: str | None = Query(None, description="The proxy dataset."),
    input_shape: str | None = Query(None, description="Comma-separated, e.g. 3,32,32."),
    target_accuracy: float | None = None,
    model_id: int | None = Query(None, description="Estimated from these stored weights."),
    limit: int = Query(100, ge=1, le=1000),
) -> list[EfficiencyInfo]:
    """Stored efficiency vectors, newest first."""
    return store.list_efficiency(model, task, dataset, parse_shape(input_shape),
                                 target_accuracy, model_id, limit)


def _store_efficiency(store: Store, data: bytes, sha: str, model_id: int | None
                      ) -> tuple[EfficiencyInfo, bool]:
    """Validation and the write, off the event loop (a 4 MiB JSON takes a while to parse)."""
    vector = check_efficiency(utf8_text(data, "the efficiency vector"))
    if model_id is not None:
        model = store.get_model(model_id)
        if model is None:
            raise PayloadError(f"model_id {model_id}: no such model on this server")
        if (model.architecture, model.input_shape) != (vector.model, vector.input_shape):
            raise PayloadError(
                f"the vector is for {vector.model} {vector.input_shape}, model {model_id} is "
                f"{model.architecture} {model.input_shape}")
    return store.add_efficiency(vector, data.decode("utf-8"), sha, model_id)


@router.post("/efficiency-vectors", response_model=EfficiencyInfo, status_code=201,
             dependencies=WRITE, openapi_extra=json_body("EfficiencyVector"))
async def upload_efficiency(
    request: Request,
    response: Response,
    store: StoreDep,
    settings: SettingsDep,
    model_id: int | None = Query(None, description="The stored weights it was estimated "
                                 "from (must be the same architecture)."),
) -> EfficiencyInfo:
    """Upload an EfficiencyVector file (validated like the file on disk)."""
    data = await read_body(request, settings.max_json_bytes, "efficiency vector")
    sha = verify_checksum(data, request.headers.get(CHECKSUM_HEADER), required=False)
    info, created = await run_in_threadpool(_store_efficiency, store, data, sha, model_id)
    if not created:
        response.status_code = 200
    return info


@router.get("/efficiency-vectors/{efficiency_id}", response_model=EfficiencyVector,
            dependencies=READ)
def get_efficiency(efficiency_id: int, store: StoreDep) -> Response:
    """The EfficiencyVector file, byte for byte as stored."""
    return stored_json(store.get_efficiency(efficiency_id), "efficiency vector",
                       efficiency_id)
