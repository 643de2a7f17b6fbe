"""`/jobs`: background estimations and their outcome."""

from __future__ import annotations

from fastapi import APIRouter, Query

from wattcap.server.http import READ, StoreDep, not_found
from wattcap.server.schemas import JobInfo

router = APIRouter(tags=["jobs"], dependencies=READ)


@router.get("/jobs", response_model=list[JobInfo])
def list_jobs(store: StoreDep, limit: int = Query(100, ge=1, le=1000)) -> list[JobInfo]:
    """Jobs, newest first."""
    return store.list_jobs(limit)


@router.get("/jobs/{job_id}", response_model=JobInfo)
def get_job(job_id: int, store: StoreDep) -> JobInfo:
    """A job's status, progress, error, and the stored efficiency vector once done."""
    job = store.get_job(job_id)
    if job is None:
        raise not_found("job", job_id)
    return job
