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

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from wattcap.core.version import __version__
from wattcap.server.jobs import JobRunner
from wattcap.server.routers import efficiency, health, jobs, models, profiles
from wattcap.server.settings import MiB, ServerSettings
from wattcap.server.store import Store
from wattcap.server.validate import ChecksumError, PayloadError


def create_app(settings: ServerSettings) -> FastAPI:
    """The app for `settings`: opens (or creates) the database and starts the job worker; the
    routes are the routers' (one per resource), reading the store, the jobs and the settings
    from the app's state."""
    executor = None
    if settings.ray is not None:
        from wattcap.train.executors import get_executor

        executor = get_executor(settings.ray).start()  # fails here, before serving
    store = Store(settings.db)
    store.interrupt_unfinished_jobs()

    app = FastAPI(
        title="wattcap server",
        version=__version__,
        description="Pre-trained models, efficiency vectors and device profiles for wattcap "
        "devices. Writes need a bearer token" + (", reads too." if settings.private_reads
                                                 else "; reads are open."),
    )
    app.state.store = store
    app.state.jobs = JobRunner(store, executor)
    app.state.settings = settings

    @app.exception_handler(PayloadError)
    async def payload_error(request: Request, err: PayloadError) -> JSONResponse:
        status = 400 if isinstance(err, ChecksumError) else 422
        return JSONResponse(status_code=status, content={"detail": str(err)})

    for router in (health.router, models.router, efficiency.router, profiles.router,
                   jobs.router):
        app.include_router(router)
    return app


__all__ = ["MiB", "ServerSettings", "create_app"]
