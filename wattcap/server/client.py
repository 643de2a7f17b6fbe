"""Client of the wattcap server (httpx), for devices and for the people feeding the server.

    >>> from wattcap.server.client import WattcapClient
    >>> with WattcapClient("http://127.0.0.1:8765", token="...") as server:
    ...     model = server.push_weights("digits.safetensors", architecture="digits-cnn")
    ...     vector = server.pull_efficiency(server.latest_efficiency("digits-cnn").id)

Nothing that comes back is trusted: every download is checked against the SHA-256 the server
declares, weights must parse as safetensors, and files are validated with the same
`from_json` as files on disk.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx
from pydantic import BaseModel

from wattcap.core.efficiency import EfficiencyVector
from wattcap.core.errors import WattcapError
from wattcap.core.profile import ProfileTable
from wattcap.core.schema import VersionedFile, WattcapFileError
from wattcap.server import CHECKSUM_HEADER
from wattcap.server.schemas import (
    EfficiencyInfo,
    EstimateRequest,
    Health,
    JobInfo,
    ModelInfo,
    ProfileInfo,
)
from wattcap.server.validate import PayloadError, parse_safetensors_header, sha256_hex

_M = TypeVar("_M", bound=BaseModel)
_F = TypeVar("_F", bound=VersionedFile)


class ServerError(WattcapError, RuntimeError):
    """The server refused a request, could not be reached, or sent something invalid."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


def _shape_param(shape: list[int] | tuple[int, ...] | None) -> str | None:
    return None if shape is None else ",".join(str(int(d)) for d in shape)


def _params(**values: object) -> dict[str, object]:
    """Query parameters that are set."""
    return {k: v for k, v in values.items() if v is not None}


def _write_atomically(dest: Path, data: bytes) -> None:
    """Write via a temporary file and rename: a failed download never leaves half a file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.part")
    tmp.write_bytes(data)
    tmp.replace(dest)


class WattcapClient:
    """Talks to one wattcap server. `token` is needed for writes (and reads on a server
    started with --private-reads)."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 120.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s,
                                  transport=transport)

    def __enter__(self) -> WattcapClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    # -- plumbing ----------------------------------------------------------------------------
    def _request(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)  # type: ignore[arg-type]
        except httpx.TransportError as err:
            raise ServerError(f"cannot reach the wattcap server at {self.url}: {err}") from None
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            if isinstance(detail, list):  # FastAPI's validation errors
                detail = "; ".join(str(d.get("msg", d)) for d in detail)
            raise ServerError(f"{method} {path}: the server answered {response.status_code}: "
                              f"{detail}", status_code=response.status_code)
        return response

    def _get_model(self, cls: type[_M], path: str, params: dict | None = None) -> _M:
        return cls.model_validate(self._request("GET", path, params=params).json())

    def _get_list(self, cls: type[_M], path: str, params: dict) -> list[_M]:
        return [cls.model_validate(item)
                for item in self._request("GET", path, params=params).json()]

    def _download(self, path: str) -> bytes:
        """A payload, checked against the SHA-256 the server declares."""
        response = self._request("GET", path)
        declared = response.headers.get(CHECKSUM_HEADER)
        data = response.content
        if declared is None or sha256_hex(data) != declared.lower():
            raise ServerError(f"GET {path}: the payload does not match its declared SHA-256 "
                              "(corrupted in transit?)")
        return data

    def _pull_file(self, cls: type[_F], path: str, dest: str | Path | None) -> _F:
        data = self._download(path)
        try:
            item = cls.from_json(data.decode("utf-8"), source=f"{self.url}{path}")
        except (WattcapFileError, UnicodeDecodeError) as err:
            raise ServerError(str(err)) from None
        if dest is not None:
            _write_atomically(Path(dest), data)  # the exact bytes: the checksum still holds
        return item

    def _push_json(self, path: str, text: str, params: dict | None = None) -> httpx.Response:
        data = text.encode("utf-8")
        return self._request("POST", path, content=data, params=params, headers={
            "Content-Type": "application/json", CHECKSUM_HEADER: sha256_hex(data)})

    @staticmethod
    def _text_of(item: VersionedFile | str | Path) -> str:
        # Files are sent byte for byte (so their checksum is the local file's); objects are
        # serialised the way `save` writes them.
        if isinstance(item, VersionedFile):
            return item.to_json()
        return Path(item).read_text()

    # -- server ------------------------------------------------------------------------------
    def health(self) -> Health:
        """The server's health (open even on a private server)."""
        return self._get_model(Health, "/health")

    # -- models ------------------------------------------------------------------------------
    def push_weights(self, weights: str | Path | bytes, architecture: str,
                     num_classes: int | None = None) -> ModelInfo:
        """Upload safetensors weights for a registered architecture (with their SHA-256)."""
        data = weights if isinstance(weights, bytes) else Path(weights).read_bytes()
        response = self._request(
            "POST", "/models", content=data,
            params=_params(architecture=architecture, num_classes=num_classes),
            headers={"Content-Type": "application/octet-stream",
                     CHECKSUM_HEADER: sha256_hex(data)},
        )
        return ModelInfo.model_validate(response.json())

    def list_models(self, architecture: str | None = None, task: str | None = None,
                    input_shape: list[int] | tuple[int, ...] | None = None,
                    limit: int = 100) -> list[ModelInfo]:
        """Stored models matching the filters, newest first."""
        return self._get_list(ModelInfo, "/models", _params(
            architecture=architecture, task=task, input_shape=_shape_param(input_shape),
            limit=limit))

    def get_model(self, model_id: int) -> ModelInfo:
        """One model's record."""
        return self._get_model(ModelInfo, f"/models/{model_id}")

    def latest_model(self, architecture: str,
                     input_shape: list[int] | tuple[int, ...] | None = None) -> ModelInfo | None:
        """The newest stored model of an architecture, or None."""
        found = self.list_models(architecture=architecture, input_shape=input_shape, limit=1)
        return found[0] if found else None

    def pull_weights_bytes(self, model_id: int) -> tuple[ModelInfo, bytes]:
        """(record, safetensors bytes) of a stored model, checked: SHA-256 against the record,
        and the header parses as safetensors (never unpickled)."""
        info = self.get_model(model_id)
        data = self._download(f"/models/{model_id}/weights")
        if sha256_hex(data) != info.sha256:
            raise ServerError(f"model {model_id}: the weights' SHA-256 is not the one on record")
        try:
            parse_safetensors_header(data)
        except PayloadError as err:
            raise ServerError(f"model {model_id}: {err}") from None
        return info, data

    def pull_weights(self, model_id: int, dest: str | Path) -> ModelInfo:
        """Download a model's weights to `dest` (written atomically), checked as above."""
        info, data = self.pull_weights_bytes(model_id)
        _write_atomically(Path(dest), data)
        return info

    def start_estimate(self, model_id: int, request: EstimateRequest) -> JobInfo:
        """Start the proxy estimation of a stored model on the server."""
        response = self._request("POST", f"/models/{model_id}/estimate",
                                 content=request.model_dump_json().encode(),
                                 headers={"Content-Type": "application/json"})
        return JobInfo.model_validate(response.json())

    # -- efficiency vectors ------------------------------------------------------------------
    def push_efficiency(self, vector: EfficiencyVector | str | Path,
                        model_id: int | None = None) -> EfficiencyInfo:
        """Upload an efficiency vector (object or file), optionally linked to the stored
        weights it was estimated from."""
        response = self._push_json("/efficiency-vectors", self._text_of(vector),
                                   params=_params(model_id=model_id))
        return EfficiencyInfo.model_validate(response.json())

    def list_efficiency(self, model: str | None = None, task: str | None = None,
                        dataset: str | None = None,
                        input_shape: list[int] | tuple[int, ...] | None = None,
                        target_accuracy: float | None = None, model_id: int | None = None,
                        limit: int = 100) -> list[EfficiencyInfo]:
        """Stored efficiency vectors matching the filters, newest first."""
        return self._get_list(EfficiencyInfo, "/efficiency-vectors", _params(
            model=model, task=task, dataset=dataset, input_shape=_shape_param(input_shape),
            target_accuracy=target_accuracy, model_id=model_id, limit=limit))

    def latest_efficiency(self, model: str, dataset: str | None = None,
                          target_accuracy: float | None = None, task: str | None = None,
                          model_id: int | None = None) -> EfficiencyInfo | None:
        """The newest stored vector for a model (and proxy, target, weights), or None."""
        found = self.list_efficiency(model=model, dataset=dataset, task=task,
                                     target_accuracy=target_accuracy, model_id=model_id, limit=1)
        return found[0] if found else None

    def pull_efficiency(self, efficiency_id: int, dest: str | Path | None = None
                        ) -> EfficiencyVector:
        """A stored efficiency vector, checksum-verified and validated (and written to
        `dest`, byte for byte, when given)."""
        return self._pull_file(EfficiencyVector, f"/efficiency-vectors/{efficiency_id}", dest)

    # -- profiles ----------------------------------------------------------------------------
    def push_profile(self, profile: ProfileTable | str | Path) -> ProfileInfo:
        """Upload a device profile (object or file)."""
        response = self._push_json("/profiles", self._text_of(profile))
        return ProfileInfo.model_validate(response.json())

    def list_profiles(self, device: str | None = None, model: str | None = None,
                      input_shape: list[int] | tuple[int, ...] | None = None,
                      power_mode: str | None = None, device_kind: str | None = None,
                      limit: int = 100) -> list[ProfileInfo]:
        """Stored profiles matching the filters, newest first."""
        return self._get_list(ProfileInfo, "/profiles", _params(
            device=device, model=model, input_shape=_shape_param(input_shape),
            power_mode=power_mode, device_kind=device_kind, limit=limit))

    def latest_profile(self, device: str, model: str, power_mode: str | None = None,
                       input_shape: list[int] | tuple[int, ...] | None = None
                       ) -> ProfileInfo | None:
        """The newest stored profile of a device model for a model, or None."""
        found = self.list_profiles(device=device, model=model, power_mode=power_mode,
                                   input_shape=input_shape, limit=1)
        return found[0] if found else None

    def pull_profile(self, profile_id: int, dest: str | Path | None = None) -> ProfileTable:
        """A stored profile, checksum-verified and validated (and written to `dest`, byte for
        byte, when given)."""
        return self._pull_file(ProfileTable, f"/profiles/{profile_id}", dest)

    # -- jobs --------------------------------------------------------------------------------
    def list_jobs(self, limit: int = 100) -> list[JobInfo]:
        """Jobs, newest first."""
        return self._get_list(JobInfo, "/jobs", {"limit": limit})

    def get_job(self, job_id: int) -> JobInfo:
        """A job's status."""
        return self._get_model(JobInfo, f"/jobs/{job_id}")

    def wait_job(self, job_id: int, timeout_s: float = 3600.0, poll_s: float = 0.5,
                 on_progress: Callable[[JobInfo], None] | None = None) -> JobInfo:
        """Poll a job until it has finished (succeeded, failed or interrupted)."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.get_job(job_id)
            if on_progress is not None:
                on_progress(job)
            if job.finished:
                return job
            if time.monotonic() > deadline:
                raise ServerError(f"job {job_id} still {job.status} after {timeout_s:.0f} s")
            time.sleep(poll_s)
