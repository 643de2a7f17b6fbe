"""Request and response bodies of the server API, shared by the server and the client.

Plain pydantic: importing this module needs neither fastapi nor httpx. The resources
themselves (profiles, efficiency vectors) travel as their own versioned files
(`ProfileTable`, `EfficiencyVector`); these models describe the records around them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

JobStatus = Literal["queued", "running", "succeeded", "failed", "interrupted"]


class Health(BaseModel):
    """Answer of `GET /health`: the server is up and its database answers."""

    status: Literal["ok"] = "ok"
    version: str
    writes_enabled: bool
    private_reads: bool


class ModelInfo(BaseModel):
    """A stored pre-trained model: its architecture, input, task and weights' checksum."""

    id: int
    architecture: str
    input_shape: list[int]
    task: str
    num_classes: int
    sha256: str
    size_bytes: int
    metadata: dict[str, str] = {}
    created_at: str


class EfficiencyInfo(BaseModel):
    """A stored efficiency vector, without its entries (fetch `/efficiency-vectors/{id}`)."""

    id: int
    model: str
    input_shape: list[int]
    task: str
    dataset: str
    target_accuracy: float
    model_id: int | None = Field(
        None, description="The stored weights the vector was estimated from, when known."
    )
    sha256: str
    created_at: str


class ProfileInfo(BaseModel):
    """A stored device profile, without its points (fetch `/profiles/{id}`)."""

    id: int
    device: str
    device_kind: str
    power_mode: str | None
    model: str
    input_shape: list[int]
    mode: str
    points: int
    sha256: str
    created_at: str


class EstimateRequest(BaseModel):
    """Body of `POST /models/{id}/estimate`: the proxy sweep to run on the server.

    The bounds keep one request from occupying the server for days; the defaults are those of
    `wattcap estimate`.
    """

    model_config = ConfigDict(extra="forbid")

    proxy: str = Field(description="Proxy data spec: a bundled dataset name (e.g. 'digits') "
                       "or FORMAT:PATH under the server's data root (e.g. "
                       "'cifar10:/srv/data/cifar-10-batches-py').")
    target_accuracy: float = Field(gt=0.0, le=1.0, description="Test accuracy to reach.")
    batch_sizes: list[int] = Field(
        default=[4, 8, 16, 32, 64, 128], min_length=1, max_length=16,
        description="Batch sizes to sweep.",
    )
    seeds: int = Field(3, ge=1, le=10, description="Seeds per batch size.")
    sample_budget: int = Field(20_000, ge=1, le=10_000_000, description="Give up after this.")
    eval_every_samples: int = Field(256, ge=1, description="Evaluate every N samples.")
    lr_ref: float = Field(1e-3, gt=0.0, le=10.0)
    batch_size_ref: int = Field(32, ge=1, le=4096)
    subset_fraction: float | None = Field(None, gt=0.0, le=1.0,
                                          description="Keep this seeded share of the proxy.")
    test_fraction: float | None = Field(None, gt=0.0, lt=1.0, description="Share held out for "
                                        "testing (default 0.2 for images, 0.1 for text).")
    input_shape: list[int] | None = Field(None, min_length=3, max_length=3, description=(
        "Convert the proxy's images to this shape, C x H x W (it must be the model's)."))

    def data_options(self) -> dict[str, Any]:
        """Keyword arguments of wattcap.data.load_splits for the proxy."""
        options: dict[str, Any] = {"subset_fraction": self.subset_fraction,
                                      "test_fraction": self.test_fraction}
        if self.input_shape is not None:
            options["input_shape"] = tuple(self.input_shape)
        return options


class JobInfo(BaseModel):
    """A background job and how far it got."""

    id: int
    kind: Literal["estimate"] = "estimate"
    model_id: int
    status: JobStatus
    request: EstimateRequest
    progress: str = ""
    error: str | None = None
    efficiency_id: int | None = Field(
        None, description="The stored efficiency vector, once the job succeeded."
    )
    created_at: str
    updated_at: str

    @property
    def finished(self) -> bool:
        """The job will not change any more."""
        return self.status in ("succeeded", "failed", "interrupted")
