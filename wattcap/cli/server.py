"""The server side on the command line: `wattcap serve`, `wattcap push ...`, `wattcap pull ...`,
and the helpers behind `--server URL` on `plan`, `train` and `estimate`.

This module imports only typer at load time: fastapi, uvicorn and httpx (the `wattcap[server]`
extra) are imported when a command needs them, so the core CLI runs without them and a
server command without them says how to install them.
"""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from wattcap.cli.common import err_console, fail, load_or_fail, say
from wattcap.cli.options import (
    ProxyFilterOpt,
    PullDeviceNameOpt,
    PullPowerModeOpt,
    ServerOpt,
    TargetFilterOpt,
    TokenOpt,
)
from wattcap.server import TOKEN_ENV

if TYPE_CHECKING:
    from wattcap.core.efficiency import EfficiencyVector
    from wattcap.server.client import WattcapClient
    from wattcap.server.schemas import EfficiencyInfo, ModelInfo

_INSTALL_HINT = "the server commands need the server extra: pip install 'wattcap[server]'"

_LIST_NAMES = {"models": "models", "efficiency": "efficiency vectors", "profiles": "profiles",
               "jobs": "jobs"}


def connect(url: str, token: str | None) -> WattcapClient:
    """A client, or a clear exit when httpx is missing."""
    try:
        from wattcap.server.client import WattcapClient
    except ImportError:
        fail(_INSTALL_HINT)
    return WattcapClient(url, token=token)


def _server_errors(*extra: type[Exception]) -> tuple[type[Exception], ...]:
    from wattcap.core.schema import WattcapFileError
    from wattcap.server.client import ServerError

    return (ServerError, WattcapFileError, *extra)


def _cached(kind: str, sha256: str, suffix: str) -> Path:
    """Where a downloaded payload is kept on the device: named by its SHA-256, so a cached
    file is never stale (a changed payload has another name)."""
    from wattcap.measure.references import cache_dir

    folder = cache_dir() / "server"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{kind}-{sha256[:24]}{suffix}"


def _is_cached(path: Path, sha256: str) -> bool:
    from wattcap.models.weights import file_sha256

    return path.exists() and file_sha256(path) == sha256


# -- fetching for plan / train / estimate ---------------------------------------------------------
class Fetcher:
    """Fetches what a device needs from a server into the local cache, as files the existing
    commands read; every problem becomes a clear CLI exit."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.client = connect(url, token)

    def profile(self, device: str | None, model: str | None, power_mode: str | None = None
                ) -> Path:
        """The newest profile of `device` for `model` (in `power_mode` when given)."""
        if not device or not model:
            fail("with --server, give --device-name and --model to fetch the profile (or a "
                  "local --profile)")
        info = self.client.latest_profile(device, model, power_mode=power_mode)
        if info is None:
            mode = f" in power mode {power_mode}" if power_mode else ""
            fail(f"the server at {self.url} has no profile of {device}{mode} for "
                       f"{model}; profile the device (wattcap profile) and push it "
                       "(wattcap push profile)")
        path = _cached("profile", info.sha256, ".json")
        if not _is_cached(path, info.sha256):
            self.client.pull_profile(info.id, dest=path)
        return path

    def efficiency(self, model: str | None, proxy: str | None = None,
                   target_accuracy: float | None = None) -> tuple[Path, EfficiencyInfo]:
        """The newest efficiency vector of `model` (estimated on `proxy`, for
        `target_accuracy`, when given). When the server holds vectors of the model on more
        than one (proxy, target) and the filters leave that open, the choice is refused with
        the candidates listed: r_b differs between proxies and targets, and a plan must not
        depend on which one was pushed last. The vector used is named on stderr."""
        if not model:
            fail("with --server, give --model to fetch the efficiency vector")
        found = self.client.list_efficiency(model=model, dataset=proxy,
                                            target_accuracy=target_accuracy)
        kinds = {(v.dataset, v.target_accuracy) for v in found}
        if len(kinds) > 1:
            listed = "; ".join(f"id {v.id}: proxy {v.dataset}, target {v.target_accuracy:g}, "
                               f"{v.created_at[:10]}" for v in found[:6])
            fail(f"the server at {self.url} holds efficiency vectors of {model} for "
                       f"{len(kinds)} proxies or targets ({listed}); name one with --proxy "
                       "and --target-accuracy, or pass a local --efficiency")
        info = found[0] if found else None
        if info is None:
            which = "".join([f" on proxy {proxy}" if proxy else "",
                             f" for target {target_accuracy}" if target_accuracy else ""])
            fail(f"the server at {self.url} has no efficiency vector for "
                       f"{model}{which}; push one (wattcap push efficiency) or estimate it "
                       "there (wattcap estimate --server URL --on-server ...)")
        path = _cached("efficiency", info.sha256, ".json")
        if not _is_cached(path, info.sha256):
            self.client.pull_efficiency(info.id, dest=path)
        # on stderr: `plan --json` keeps its stdout JSON
        err_console.print(f"efficiency vector: id {info.id} from {self.url} (proxy "
                          f"{info.dataset}, target {info.target_accuracy:g}, stored "
                          f"{info.created_at[:19]})", highlight=False)
        return path, info

    def weights(self, model: str, model_id: int | None = None,
                required: bool = True) -> tuple[Path, ModelInfo] | None:
        """Weights of stored model `model_id`, else the newest stored `model` weights."""
        info: ModelInfo | None
        if model_id is not None:
            info = self.client.get_model(model_id)
            if info.architecture != model:
                fail(f"model {model_id} on the server is a {info.architecture}, "
                           f"not {model}")
        else:
            info = self.client.latest_model(model)
        if info is None:
            if required:
                fail(f"the server at {self.url} has no weights for {model}; push "
                           "them (wattcap push weights) or pass local --weights")
            return None
        path = _cached("weights", info.sha256, ".safetensors")
        if not _is_cached(path, info.sha256):
            self.client.pull_weights(info.id, path)
        return path, info


def device_identity(device: str, power_mode: str | None = None) -> tuple[str, str | None]:
    """(device model name, power mode) of a device spec such as emulated:jetson-nano (in
    `power_mode` where given: the mode's own name), read without changing anything on the
    device."""
    from wattcap.cli.common import open_device

    dev = open_device(device, dry_run=True, power_mode=power_mode)
    return dev.name, getattr(dev, "power_mode", None)


def fetch_plan_inputs(
    url: str, token: str | None, *, profile: Path | None, efficiency: Path | None,
    device_name: str | None, model: str | None, power_mode: str | None = None,
    proxy: str | None = None, target_accuracy: float | None = None,
) -> tuple[Path, Path, EfficiencyInfo | None]:
    """Local files win; what is missing comes from the server: (profile, efficiency vector,
    the vector's record when it was fetched)."""
    fetcher = Fetcher(url, token)
    if profile is None:
        profile = fetcher.profile(device_name, model, power_mode)
    elif model is None:
        from wattcap.core.profile import ProfileTable

        model = load_or_fail(ProfileTable, profile).model
    info = None
    if efficiency is None:
        efficiency, info = fetcher.efficiency(model, proxy, target_accuracy)
    return profile, efficiency, info


def fetch_train_weights(url: str, token: str | None, model: str, model_id: int | None,
                        efficiency: EfficiencyInfo | None) -> Path | None:
    """Weights for `train --server`: --model-id, else those the fetched efficiency vector was
    estimated from (so r_b and the starting point agree), else the newest for the model."""
    fetcher = Fetcher(url, token)
    if model_id is None and efficiency is not None:
        model_id = efficiency.model_id
    found = fetcher.weights(model, model_id, required=False)
    if found is None:
        say(f"[yellow]note:[/] the server has no weights for {model}: training starts from "
            "a random initialisation")
        return None
    path, info = found
    say(f"weights: model {info.id} from {url} ({info.sha256[:12]}…)")
    return path


def fetch_estimate_weights(url: str, token: str | None, model: str,
                           model_id: int | None) -> tuple[Path, int]:
    """Weights for `estimate --server`: --model-id, else the newest for the model."""
    found = Fetcher(url, token).weights(model, model_id, required=True)
    assert found is not None
    return found[0], found[1].id


def push_estimated(url: str, token: str | None, vector: EfficiencyVector,
                   model_id: int | None) -> None:
    """Upload a vector estimated here, linked to the weights it started from."""
    client = connect(url, token)
    info = client.push_efficiency(vector, model_id=model_id)
    say(f"pushed the efficiency vector to {url} as {info.id}")


def _newest_model_id(client: WattcapClient, url: str, model: str) -> int:
    """The id of the newest weights stored for `model`; a clear exit when there are none."""
    info = client.latest_model(model)
    if info is None:
        fail(f"the server at {url} has no weights for {model}: push them first "
                   "(wattcap push weights)")
    return info.id


def estimate_on_server(
    url: str, token: str | None, *, model: str, model_id: int | None, proxy: str,
    target_accuracy: float, batch_sizes: tuple[int, ...], seeds: int, sample_budget: int,
    eval_every: int, lr_ref: float, batch_size_ref: int, timeout_s: float = 24 * 3600,
    subset_fraction: float | None = None, test_fraction: float | None = None,
    input_shape: list[int] | None = None,
) -> EfficiencyVector:
    """Run the proxy sweep on the server for its stored weights, wait, and pull the result."""
    from wattcap.server.schemas import EstimateRequest

    client = connect(url, token)
    model_id = _newest_model_id(client, url, model) if model_id is None else model_id
    job = client.start_estimate(model_id, EstimateRequest(
        proxy=proxy, target_accuracy=target_accuracy, batch_sizes=list(batch_sizes),
        seeds=seeds, sample_budget=sample_budget, eval_every_samples=eval_every,
        lr_ref=lr_ref, batch_size_ref=batch_size_ref, subset_fraction=subset_fraction,
        test_fraction=test_fraction, input_shape=input_shape,
    ))
    say(f"job {job.id} started on {url} for model {model_id}")
    last = [""]

    def report(state) -> None:  # noqa: ANN001
        if state.progress and state.progress != last[0]:
            last[0] = state.progress
            say(f"  job {state.id}: {state.progress}")

    job = client.wait_job(job.id, timeout_s=timeout_s, on_progress=report)
    if job.status != "succeeded" or job.efficiency_id is None:
        fail(f"job {job.id} {job.status}: {job.error or 'no result'}")
    return client.pull_efficiency(job.efficiency_id)


# -- serve ------------------------------------------------------------------------------------
def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on. Off loopback, put the "
                             "server behind TLS: the token travels in every request."),
    port: int = typer.Option(8765, help="TCP port."),
    db: Path | None = typer.Option(None, help="SQLite database (created if missing; default "
                                   "server.sqlite3 in the wattcap cache folder)."),
    token: str | None = typer.Option(None, envvar=TOKEN_ENV, help="Bearer token that writes "
                                     "need (env WATTCAP_SERVER_TOKEN). Without one the server "
                                     "is read-only."),
    private_reads: bool = typer.Option(False, help="Require the token for reads too."),
    max_weights_mib: float = typer.Option(64.0, help="Largest weights upload (MiB)."),
    max_json_mib: float = typer.Option(4.0, help="Largest JSON upload (MiB)."),
    data_root: Path | None = typer.Option(None, help="Folder under which estimation jobs may "
                                          "read FORMAT:PATH proxies (default: none, bundled "
                                          "datasets only)."),
    log_level: str = typer.Option("info", help="uvicorn log level (warning: quieter)."),
    ray: str | None = typer.Option(None, "--ray", metavar="local|ADDRESS", help="Run the "
                                   "estimation jobs' trainings as Ray tasks (pip install "
                                   "'wattcap[ray]'): 'local' for a local Ray of 2 CPUs "
                                   "('local:N': N), else a cluster address. Default: in the "
                                   "server's job thread."),
) -> None:
    """Serve models, efficiency vectors and profiles over HTTP (OpenAPI docs at /docs)."""
    try:
        import uvicorn

        from wattcap.server.app import MiB, ServerSettings, create_app
    except ImportError:
        fail(_INSTALL_HINT)
    if db is None:
        from wattcap.measure.references import cache_dir

        db = cache_dir() / "server.sqlite3"
    try:
        settings = ServerSettings(
            db=db, token=token or None, private_reads=private_reads,
            max_weights_bytes=int(max_weights_mib * MiB), max_json_bytes=int(max_json_mib * MiB),
            ray=ray,
            data_root=data_root,
        )
        app = create_app(settings)
    except (ValueError, RuntimeError, OSError) as err:
        fail(str(err))
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        print("warning: listening beyond loopback; use TLS in front of this server, the token "
              "is sent with every request", file=sys.stderr)
    if settings.token is None:
        print("warning: no token set: the server is read-only", file=sys.stderr)
    print(f"wattcap server on http://{host}:{port} (database {db}; docs at /docs)",
          file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


# -- push -------------------------------------------------------------------------------------
push_app = typer.Typer(help="Upload weights, efficiency vectors or profiles to a server.",
                       no_args_is_help=True)
pull_app = typer.Typer(help="Download weights, efficiency vectors or profiles from a server.",
                       no_args_is_help=True)



@push_app.command("weights")
def push_weights(
    server: ServerOpt,
    path: Path = typer.Argument(..., help="Weights file (.safetensors)."),
    model: str = typer.Option(..., help="Registered architecture the weights are for."),
    num_classes: int | None = typer.Option(None, help="Head size (default: the file's "
                                           "metadata, else the model's default)."),
    token: TokenOpt = None,
) -> None:
    """Upload pre-trained weights; the server checks them against the architecture."""
    client = connect(server, token)
    try:
        info = client.push_weights(path, architecture=model, num_classes=num_classes)
    except _server_errors(OSError) as err:
        fail(str(err))
    say(f"stored as model {info.id}: {info.architecture} {info.input_shape}, "
        f"{info.num_classes} classes, {info.size_bytes} bytes, sha256 {info.sha256}")


@push_app.command("efficiency")
def push_efficiency(
    server: ServerOpt,
    path: Path = typer.Argument(..., help="The efficiency vector (JSON) to upload."),
    model_id: int | None = typer.Option(None, help="Stored weights it was estimated from."),
    token: TokenOpt = None,
) -> None:
    """Upload an efficiency vector (validated by the server like the file)."""
    client = connect(server, token)
    try:
        info = client.push_efficiency(path, model_id=model_id)
    except _server_errors(OSError) as err:
        fail(str(err))
    say(f"stored as efficiency vector {info.id}: {info.model} on {info.dataset}, target "
        f"{info.target_accuracy}")


@push_app.command("profile")
def push_profile(
    server: ServerOpt,
    path: Path = typer.Argument(..., help="The profile (JSON) to upload."),
    token: TokenOpt = None,
) -> None:
    """Upload a device profile (validated by the server like the file)."""
    client = connect(server, token)
    try:
        info = client.push_profile(path)
    except _server_errors(OSError) as err:
        fail(str(err))
    say(f"stored as profile {info.id}: {info.model} on {info.device} "
        f"({info.power_mode or 'default mode'}), {info.points} points")


# -- pull -------------------------------------------------------------------------------------
@pull_app.command("weights")
def pull_weights(
    server: ServerOpt,
    model: str = typer.Option(..., help="Architecture (the newest stored weights)."),
    out: Path = typer.Option(..., help="Weights file to write (.safetensors)."),
    model_id: int | None = typer.Option(None, "--id", help="A specific stored model."),
    token: TokenOpt = None,
) -> None:
    """Download weights (checksum-verified safetensors)."""
    client = connect(server, token)
    try:
        model_id = _newest_model_id(client, server, model) if model_id is None else model_id
        info = client.pull_weights(model_id, out)
    except _server_errors(OSError) as err:
        fail(str(err))
    say(f"wrote {out}: model {info.id} ({info.architecture}), sha256 {info.sha256}")


@pull_app.command("efficiency")
def pull_efficiency(
    server: ServerOpt,
    model: str = typer.Option(..., help="Model name."),
    out: Path = typer.Option(..., help="The efficiency vector (JSON) to write."),
    proxy: ProxyFilterOpt = None,
    target_accuracy: TargetFilterOpt = None,
    efficiency_id: int | None = typer.Option(None, "--id", help="A specific stored vector."),
    token: TokenOpt = None,
) -> None:
    """Download the newest matching efficiency vector (validated)."""
    client = connect(server, token)
    try:
        if efficiency_id is None:
            latest = client.latest_efficiency(model, dataset=proxy,
                                              target_accuracy=target_accuracy)
            if latest is None:
                fail(f"no efficiency vector for {model} on {server}")
            efficiency_id = latest.id
        vector = client.pull_efficiency(efficiency_id)
        vector.check_matches(model=model, source=f"efficiency vector {efficiency_id}")
        vector.save(out)
    except _server_errors(OSError) as err:
        fail(str(err))
    say(f"wrote {out}: efficiency vector {efficiency_id} ({vector.model} on {vector.dataset})")


@pull_app.command("profile")
def pull_profile(
    server: ServerOpt,
    device_name: PullDeviceNameOpt,
    model: str = typer.Option(..., help="Model name."),
    out: Path = typer.Option(..., help="The profile (JSON) to write."),
    power_mode: PullPowerModeOpt = None,
    profile_id: int | None = typer.Option(None, "--id", help="A specific stored profile."),
    token: TokenOpt = None,
) -> None:
    """Download the newest matching profile (validated)."""
    client = connect(server, token)
    try:
        if profile_id is None:
            latest = client.latest_profile(device_name, model, power_mode=power_mode)
            if latest is None:
                fail(f"no profile of {device_name} for {model} on {server}")
            profile_id = latest.id
        table = client.pull_profile(profile_id)
        table.check_matches(device=device_name, model=model, source=f"profile {profile_id}")
        table.save(out)
    except _server_errors(OSError) as err:
        fail(str(err))
    say(f"wrote {out}: profile {profile_id} ({table.model} on {table.device})")


@pull_app.command("list")
def pull_list(
    server: ServerOpt,
    what: str = typer.Argument("all", help="models, efficiency, profiles, jobs or all."),
    token: TokenOpt = None,
) -> None:
    """List what the server holds (ids for --id)."""
    kinds = ("models", "efficiency", "profiles", "jobs")
    if what not in (*kinds, "all"):
        fail(f"list what? one of {', '.join(kinds)} or all")
    client = connect(server, token)
    lines: list[str] = []
    if what in ("models", "all"):
        lines += [f"model {m.id}: {m.architecture} {m.input_shape} {m.task}, "
                  f"{m.num_classes} classes, {m.size_bytes} B, {m.created_at}"
                  for m in client.list_models()]
    if what in ("efficiency", "all"):
        lines += [f"efficiency {e.id}: {e.model} on {e.dataset}, target "
                  f"{e.target_accuracy}, weights {e.model_id}, {e.created_at}"
                  for e in client.list_efficiency()]
    if what in ("profiles", "all"):
        lines += [f"profile {p.id}: {p.model} on {p.device} ({p.power_mode}), "
                  f"{p.points} points, {p.created_at}" for p in client.list_profiles()]
    if what in ("jobs", "all"):
        lines += [f"job {j.id}: model {j.model_id} {j.status} {j.progress} {j.error or ''}"
                  for j in client.list_jobs()]
    for line in lines:
        say(line)
    if not lines:
        held = "nothing" if what == "all" else f"no {_LIST_NAMES[what]}"
        say(f"the server at {server} holds {held} yet: upload with `wattcap push "
            "weights|efficiency|profile` (or start a job with `wattcap estimate --server URL "
            "--on-server`)")
