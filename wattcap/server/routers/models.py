"""`/models`: pre-trained weights (safetensors only) of a registered architecture; their bytes,
and the proxy estimation jobs they start."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from wattcap.server import CHECKSUM_HEADER
from wattcap.server.http import (
    READ,
    WRITE,
    JobsDep,
    SettingsDep,
    StoreDep,
    json_body,
    not_found,
    parse_shape,
    read_body,
)
from wattcap.server.schemas import EstimateRequest, JobInfo, ModelInfo
from wattcap.server.validate import PayloadError, check_weights, verify_checksum

router = APIRouter(tags=["models"])


@router.get("/models", response_model=list[ModelInfo], dependencies=READ)
def list_models(
    store: StoreDep,
    architecture: str | None = None,
    task: str | None = None,
    input_shape: str | None = Query(None, description="Comma-separated, e.g. 3,32,32."),
    limit: int = Query(100, ge=1, le=1000),
) -> list[ModelInfo]:
    """Stored models, newest first."""
    return store.list_models(architecture, task, parse_shape(input_shape), limit)


@router.post(
    "/models", response_model=ModelInfo, status_code=201, dependencies=WRITE,
    openapi_extra={"requestBody": {"required": True, "content": {
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}},
    responses={200: {"description": "These weights were already stored (idempotent)."},
               413: {"description": "Larger than the weights limit."},
               422: {"description": "Not safetensors, or not this architecture's tensors."}},
)
async def upload_model(
    request: Request,
    response: Response,
    store: StoreDep,
    settings: SettingsDep,
    architecture: str = Query(..., description="Registered architecture, e.g. resnet18."),
    num_classes: int | None = Query(None, ge=2, description="Head size (default: the file's "
                                    "num_classes metadata, else the model's)."),
) -> ModelInfo:
    """Upload safetensors weights (raw body) with their SHA-256 in X-Wattcap-SHA256. They must
    parse as safetensors and match the architecture's state dict exactly."""
    data = await read_body(request, settings.max_weights_bytes, "weights")
    sha = verify_checksum(data, request.headers.get(CHECKSUM_HEADER), required=True)
    checked = await run_in_threadpool(check_weights, data, architecture, num_classes)
    info, created = await run_in_threadpool(store.add_model, checked, data, sha)
    if not created:
        response.status_code = 200
    return info


@router.get("/models/{model_id}", response_model=ModelInfo, dependencies=READ)
def get_model(model_id: int, store: StoreDep) -> ModelInfo:
    """One model's record."""
    info = store.get_model(model_id)
    if info is None:
        raise not_found("model", model_id)
    return info


@router.get(
    "/models/{model_id}/weights", dependencies=READ, response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}},
                     "description": "safetensors bytes; SHA-256 in X-Wattcap-SHA256"}},
)
def get_weights(model_id: int, store: StoreDep) -> Response:
    """The model's safetensors weights, byte for byte as uploaded."""
    found = store.get_weights(model_id)
    if found is None:
        raise not_found("model", model_id)
    data, sha = found
    return Response(content=data, media_type="application/octet-stream", headers={
        CHECKSUM_HEADER: sha,
        "Content-Disposition": f'attachment; filename="model-{model_id}.safetensors"',
    })


@router.post(
    "/models/{model_id}/estimate", response_model=JobInfo, status_code=202,
    dependencies=WRITE, tags=["jobs"], openapi_extra=json_body("EstimateRequest"),
)
async def start_estimate(model_id: int, request: Request, store: StoreDep, jobs: JobsDep,
                         settings: SettingsDep) -> JobInfo:
    """Start the proxy estimation of r_b for a stored model in the background; poll
    `/jobs/{id}`. On success the efficiency vector is stored, linked to this model."""
    data = await read_body(request, settings.max_json_bytes, "request")
    try:
        body = EstimateRequest.model_validate_json(data)
    except ValueError as err:
        raise PayloadError(f"invalid estimate request: {err}") from None
    info = await run_in_threadpool(store.get_model, model_id)
    if info is None:
        raise not_found("model", model_id)
    await run_in_threadpool(check_proxy, info, body, settings.data_root)
    return await run_in_threadpool(jobs.submit, model_id, body)


def check_proxy(model: ModelInfo, request: EstimateRequest, data_root: Path | None) -> None:
    """Refuse, before queueing, a proxy the server may not read (a path outside its data root)
    or the stored model cannot train on."""
    from wattcap.data import (
        DataMismatchError,
        DatasetFormatError,
        DataSpecError,
        load_splits,
        parse_data_spec,
    )

    proxy = request.proxy
    if request.input_shape is not None and request.input_shape != model.input_shape:
        raise PayloadError(f"input_shape {request.input_shape} is not model {model.id}'s "
                           f"{model.input_shape}")
    try:
        spec = parse_data_spec(proxy)
    except DataSpecError as err:
        raise PayloadError(str(err)) from None
    if spec.path is not None:
        check_under_root(spec.path, data_root)
    try:
        data, _ = load_splits(spec, **request.data_options())
    except (DataSpecError, DatasetFormatError, DataMismatchError) as err:
        raise PayloadError(f"proxy {proxy}: {err}") from None
    if list(data.input_shape) != model.input_shape:
        raise PayloadError(f"proxy {proxy} has input shape {list(data.input_shape)}, model "
                           f"{model.id} ({model.architecture}) takes {model.input_shape}")
    if data.num_classes != model.num_classes:
        raise PayloadError(f"proxy {proxy} has {data.num_classes} classes, model {model.id} "
                           f"has a {model.num_classes}-class head")


def check_under_root(path: Path, data_root: Path | None) -> None:
    """Refuse a data path outside the server's data root (symbolic links and '..' resolved
    first), or any path when the server has no data root."""
    if data_root is None:
        raise PayloadError("this server reads no data from paths (start it with --data-root "
                           "DIR to allow FORMAT:PATH proxies under DIR); use a bundled dataset")
    root = data_root.resolve()
    resolved = path.expanduser().resolve()
    if resolved != root and root not in resolved.parents:
        raise PayloadError(f"{path}: outside this server's data root {root}; the server reads "
                           "data only under it")
