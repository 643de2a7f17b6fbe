"""The wattcap server: a FastAPI app over the SQLite store (DESIGN §5).

Resources (each: list with filters, get, upload):

* `/models`: pre-trained weights (safetensors only) of a registered architecture;
  `/models/{id}/weights` serves the bytes, `/models/{id}/estimate` starts a proxy sweep;
* `/efficiency-vectors`: r_b per model and task, with their proxy dataset;
* `/profiles`: a device's lookup tables for one model and input shape;
* `/jobs`: background estimations and their outcome.

Writes need `Authorization: Bearer <token>`; reads too with `private_reads`. Every upload is
size-limited (413), checked (4xx with the reason, nothing stored) and acknowledged only after
its transaction committed. OpenAPI docs at `/docs`.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.profile import ProfileTable
from wattcap.core.version import __version__
from wattcap.server import CHECKSUM_HEADER
from wattcap.server.jobs import JobRunner
from wattcap.server.schemas import (
    EfficiencyInfo,
    EstimateRequest,
    Health,
    JobInfo,
    ModelInfo,
    ProfileInfo,
)
from wattcap.server.store import Store
from wattcap.server.validate import (
    ChecksumError,
    PayloadError,
    check_efficiency,
    check_profile,
    check_weights,
    verify_checksum,
)

MiB = 2**20


@dataclass(frozen=True)
class ServerSettings:
    """How a server runs: its database, its token and its limits."""

    db: Path
    token: str | None = None
    private_reads: bool = False
    max_weights_bytes: int = 64 * MiB
    max_json_bytes: int = 4 * MiB
    #: where estimation jobs train: None in the job thread, else a `--ray` spec ("local",
    #: "local:N", a cluster address) for `wattcap.train.executors.get_executor`
    ray: str | None = None
    #: the only folder estimation jobs may read data from (FORMAT:PATH proxies); None: bundled
    #: datasets only
    data_root: Path | None = None

    def __post_init__(self) -> None:
        if self.private_reads and not self.token:
            raise ValueError("private reads need a token: set --token or WATTCAP_SERVER_TOKEN")
        if self.token is not None and len(self.token) < 8:
            raise ValueError("the token must be at least 8 characters long")
        if self.max_weights_bytes < 1 or self.max_json_bytes < 1:
            raise ValueError("size limits must be positive")


_bearer = HTTPBearer(auto_error=False, description="The token given to `wattcap serve`.")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _parse_shape(value: str | None) -> list[int] | None:
    """'1,8,8' -> [1, 8, 8] (query parameters), refusing anything else with a 422."""
    if value is None:
        return None
    try:
        shape = [int(d) for d in value.replace("x", ",").split(",") if d.strip()]
    except ValueError:
        raise HTTPException(
            422, f"input_shape must be comma-separated integers, got {value!r}") from None
    return shape


async def _read_body(request: Request, limit: int, what: str) -> bytes:
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


def _text(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PayloadError(f"{what} is not UTF-8 text") from None


def _json_body(schema_name: str) -> dict:
    """OpenAPI for an endpoint that reads its JSON body itself (to size-limit it and to
    validate it with the same code as the files)."""
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{schema_name}"}}}}}


def create_app(settings: ServerSettings) -> FastAPI:
    """The app for `settings`: opens (or creates) the database and starts the job worker."""
    executor = None
    if settings.ray is not None:
        from wattcap.train.executors import get_executor

        executor = get_executor(settings.ray).start()  # fails here, before serving
    store = Store(settings.db)
    store.interrupt_unfinished_jobs()
    jobs = JobRunner(store, executor)

    app = FastAPI(
        title="wattcap server",
        version=__version__,
        description="Pre-trained models, efficiency vectors and device profiles for wattcap "
        "devices. Writes need a bearer token" + (", reads too." if settings.private_reads
                                                 else "; reads are open."),
    )
    app.state.store = store
    app.state.jobs = jobs
    app.state.settings = settings

    def _check_token(credentials: HTTPAuthorizationCredentials | None) -> None:
        if settings.token is None:
            raise HTTPException(403, "this server was started without a token: writes are "
                                "disabled (start it with --token or WATTCAP_SERVER_TOKEN)")
        if credentials is None:
            raise HTTPException(401, "missing bearer token (Authorization: Bearer <token>)",
                                headers={"WWW-Authenticate": "Bearer"})
        # constant-time comparison: the answer's timing must not reveal the token
        if not hmac.compare_digest(credentials.credentials.encode(), settings.token.encode()):
            raise HTTPException(403, "wrong bearer token")

    async def require_write(credentials: Credentials) -> None:
        _check_token(credentials)

    async def require_read(credentials: Credentials) -> None:
        if settings.private_reads:
            _check_token(credentials)

    read = [Depends(require_read)]
    write = [Depends(require_write)]

    @app.exception_handler(PayloadError)
    async def payload_error(request: Request, err: PayloadError) -> JSONResponse:
        status = 400 if isinstance(err, ChecksumError) else 422
        return JSONResponse(status_code=status, content={"detail": str(err)})

    def _store_efficiency(data: bytes, sha: str, model_id: int | None
                          ) -> tuple[EfficiencyInfo, bool]:
        # validation and the write, off the event loop (a 4 MiB JSON takes a while to parse)
        vector = check_efficiency(_text(data, "the efficiency vector"))
        if model_id is not None:
            model = store.get_model(model_id)
            if model is None:
                raise PayloadError(f"model_id {model_id}: no such model on this server")
            if (model.architecture, model.input_shape) != (vector.model, vector.input_shape):
                raise PayloadError(
                    f"the vector is for {vector.model} {vector.input_shape}, model {model_id} is "
                    f"{model.architecture} {model.input_shape}")
        return store.add_efficiency(vector, data.decode("utf-8"), sha, model_id)

    def _store_profile(data: bytes, sha: str) -> tuple[ProfileInfo, bool]:
        profile = check_profile(_text(data, "the profile"))
        return store.add_profile(profile, data.decode("utf-8"), sha)

    def _not_found(what: str, item_id: int) -> HTTPException:
        return HTTPException(404, f"no {what} with id {item_id}")

    def _stored_json(found: tuple[str, str] | None, kind: str, item_id: int) -> Response:
        # Sent as is, byte for byte with its checksum: the route's model only documents it.
        if found is None:
            raise _not_found(kind, item_id)
        return Response(content=found[0], media_type="application/json",
                        headers={CHECKSUM_HEADER: found[1]})

    # -- health ------------------------------------------------------------------------------
    @app.get("/health", response_model=Health, tags=["server"])
    def health() -> Health:
        """The server is up and its database answers (always open: used for readiness)."""
        store.list_jobs(limit=1)
        return Health(version=__version__, writes_enabled=settings.token is not None,
                      private_reads=settings.private_reads)

    # -- models ------------------------------------------------------------------------------
    @app.get("/models", response_model=list[ModelInfo], dependencies=read, tags=["models"])
    def list_models(
        architecture: str | None = None,
        task: str | None = None,
        input_shape: str | None = Query(None, description="Comma-separated, e.g. 3,32,32."),
        limit: int = Query(100, ge=1, le=1000),
    ) -> list[ModelInfo]:
        """Stored models, newest first."""
        return store.list_models(architecture, task, _parse_shape(input_shape), limit)

    @app.post(
        "/models", response_model=ModelInfo, status_code=201, dependencies=write,
        tags=["models"],
        openapi_extra={"requestBody": {"required": True, "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}},
        responses={200: {"description": "These weights were already stored (idempotent)."},
                   413: {"description": "Larger than the weights limit."},
                   422: {"description": "Not safetensors, or not this architecture's tensors."}},
    )
    async def upload_model(
        request: Request,
        response: Response,
        architecture: str = Query(..., description="Registered architecture, e.g. resnet18."),
        num_classes: int | None = Query(None, ge=2, description="Head size (default: the "
                                        "file's num_classes metadata, else the model's)."),
    ) -> ModelInfo:
        """Upload safetensors weights (raw body) with their SHA-256 in X-Wattcap-SHA256. They
        must parse as safetensors and match the architecture's state dict exactly."""
        data = await _read_body(request, settings.max_weights_bytes, "weights")
        sha = verify_checksum(data, request.headers.get(CHECKSUM_HEADER), required=True)
        checked = await run_in_threadpool(check_weights, data, architecture, num_classes)
        info, created = await run_in_threadpool(store.add_model, checked, data, sha)
        if not created:
            response.status_code = 200
        return info

    @app.get("/models/{model_id}", response_model=ModelInfo, dependencies=read, tags=["models"])
    def get_model(model_id: int) -> ModelInfo:
        """One model's record."""
        info = store.get_model(model_id)
        if info is None:
            raise _not_found("model", model_id)
        return info

    @app.get(
        "/models/{model_id}/weights", dependencies=read, tags=["models"],
        response_class=Response,
        responses={200: {"content": {"application/octet-stream": {}},
                         "description": "safetensors bytes; SHA-256 in X-Wattcap-SHA256"}},
    )
    def get_weights(model_id: int) -> Response:
        """The model's safetensors weights, byte for byte as uploaded."""
        found = store.get_weights(model_id)
        if found is None:
            raise _not_found("model", model_id)
        data, sha = found
        return Response(content=data, media_type="application/octet-stream", headers={
            CHECKSUM_HEADER: sha,
            "Content-Disposition": f'attachment; filename="model-{model_id}.safetensors"',
        })

    @app.post(
        "/models/{model_id}/estimate", response_model=JobInfo, status_code=202,
        dependencies=write, tags=["jobs"], openapi_extra=_json_body("EstimateRequest"),
    )
    async def start_estimate(model_id: int, request: Request) -> JobInfo:
        """Start the proxy estimation of r_b for a stored model in the background; poll
        `/jobs/{id}`. On success the efficiency vector is stored, linked to this model."""
        data = await _read_body(request, settings.max_json_bytes, "request")
        try:
            body = EstimateRequest.model_validate_json(data)
        except ValueError as err:
            raise PayloadError(f"invalid estimate request: {err}") from None
        info = await run_in_threadpool(store.get_model, model_id)
        if info is None:
            raise _not_found("model", model_id)
        await run_in_threadpool(_check_proxy, info, body, settings.data_root)
        return await run_in_threadpool(jobs.submit, model_id, body)

    # -- efficiency vectors ------------------------------------------------------------------
    @app.get("/efficiency-vectors", response_model=list[EfficiencyInfo], dependencies=read,
             tags=["efficiency vectors"])
    def list_efficiency(
        model: str | None = None,
        task: str | None = None,
        dataset: str | None = Query(None, description="The proxy dataset."),
        input_shape: str | None = Query(None, description="Comma-separated, e.g. 3,32,32."),
        target_accuracy: float | None = None,
        model_id: int | None = Query(None, description="Estimated from these stored weights."),
        limit: int = Query(100, ge=1, le=1000),
    ) -> list[EfficiencyInfo]:
        """Stored efficiency vectors, newest first."""
        return store.list_efficiency(model, task, dataset, _parse_shape(input_shape),
                                     target_accuracy, model_id, limit)

    @app.post(
        "/efficiency-vectors", response_model=EfficiencyInfo, status_code=201,
        dependencies=write, tags=["efficiency vectors"],
        openapi_extra=_json_body("EfficiencyVector"),
    )
    async def upload_efficiency(
        request: Request,
        response: Response,
        model_id: int | None = Query(None, description="The stored weights it was estimated "
                                     "from (must be the same architecture)."),
    ) -> EfficiencyInfo:
        """Upload an EfficiencyVector file (validated like the file on disk)."""
        data = await _read_body(request, settings.max_json_bytes, "efficiency vector")
        sha = verify_checksum(data, request.headers.get(CHECKSUM_HEADER), required=False)
        info, created = await run_in_threadpool(_store_efficiency, data, sha, model_id)
        if not created:
            response.status_code = 200
        return info

    @app.get("/efficiency-vectors/{efficiency_id}", response_model=EfficiencyVector,
             dependencies=read, tags=["efficiency vectors"])
    def get_efficiency(efficiency_id: int) -> Response:
        """The EfficiencyVector file, byte for byte as stored."""
        return _stored_json(store.get_efficiency(efficiency_id), "efficiency vector",
                            efficiency_id)

    # -- profiles ----------------------------------------------------------------------------
    @app.get("/profiles", response_model=list[ProfileInfo], dependencies=read,
             tags=["profiles"])
    def list_profiles(
        device: str | None = Query(None, description="Device model, e.g. jetson-nano."),
        model: str | None = None,
        input_shape: str | None = Query(None, description="Comma-separated, e.g. 3,32,32."),
        power_mode: str | None = None,
        device_kind: str | None = Query(None, description="emulated, jetson or nvml."),
        limit: int = Query(100, ge=1, le=1000),
    ) -> list[ProfileInfo]:
        """Stored profiles, newest first."""
        return store.list_profiles(device, model, _parse_shape(input_shape), power_mode,
                                   device_kind, limit)

    @app.post("/profiles", response_model=ProfileInfo, status_code=201, dependencies=write,
              tags=["profiles"], openapi_extra=_json_body("ProfileTable"))
    async def upload_profile(request: Request, response: Response) -> ProfileInfo:
        """Upload a ProfileTable file (validated like the file on disk)."""
        data = await _read_body(request, settings.max_json_bytes, "profile")
        sha = verify_checksum(data, request.headers.get(CHECKSUM_HEADER), required=False)
        info, created = await run_in_threadpool(_store_profile, data, sha)
        if not created:
            response.status_code = 200
        return info

    @app.get("/profiles/{profile_id}", response_model=ProfileTable, dependencies=read,
             tags=["profiles"])
    def get_profile(profile_id: int) -> Response:
        """The ProfileTable file, byte for byte as stored."""
        return _stored_json(store.get_profile(profile_id), "profile", profile_id)

    # -- jobs --------------------------------------------------------------------------------
    @app.get("/jobs", response_model=list[JobInfo], dependencies=read, tags=["jobs"])
    def list_jobs(limit: int = Query(100, ge=1, le=1000)) -> list[JobInfo]:
        """Jobs, newest first."""
        return store.list_jobs(limit)

    @app.get("/jobs/{job_id}", response_model=JobInfo, dependencies=read, tags=["jobs"])
    def get_job(job_id: int) -> JobInfo:
        """A job's status, progress, error, and the stored efficiency vector once done."""
        job = store.get_job(job_id)
        if job is None:
            raise _not_found("job", job_id)
        return job

    return app


def _check_proxy(model: ModelInfo, request: EstimateRequest, data_root: Path | None) -> None:
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
