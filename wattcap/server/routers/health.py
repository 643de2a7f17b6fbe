"""`/health`: the server is up and its database answers."""

from __future__ import annotations

from fastapi import APIRouter

from wattcap.core.version import __version__
from wattcap.server.http import SettingsDep, StoreDep
from wattcap.server.schemas import Health

router = APIRouter(tags=["server"])


@router.get("/health", response_model=Health)
def health(store: StoreDep, settings: SettingsDep) -> Health:
    """The server is up and its database answers (always open: used for readiness)."""
    store.list_jobs(limit=1)
    return Health(version=__version__, writes_enabled=settings.token is not None,
                  private_reads=settings.private_reads)
