"""Background jobs of the server: the proxy estimation of r_b for a stored model.

One worker thread runs the jobs in order: estimation is CPU-bound, and two at once would only
make each slower while the server still has to answer requests. With an executor (`wattcap
serve --ray ...`) a job's trainings run as Ray tasks, on this machine's other cores or on a
cluster, while the thread only waits for them. The thread is a daemon so a
server that is stopped does not wait for a sweep to end; the job's row then says 'running' and
the next start marks it 'interrupted' (see `Store.interrupt_unfinished_jobs`). Every state
change is a committed write, so `/jobs/{id}` always reports what really happened.
"""

from __future__ import annotations

import logging
import queue
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from wattcap.core.progress import ProgressUpdate
from wattcap.server.schemas import EstimateRequest, JobInfo
from wattcap.server.store import Store

if TYPE_CHECKING:
    from wattcap.train.executors import Executor

log = logging.getLogger("wattcap.server")


class JobRunner:
    """Queue of estimate jobs served by one daemon worker thread."""

    def __init__(self, store: Store, executor: Executor | None = None) -> None:
        self.store = store
        self.executor = executor
        self._queue: queue.Queue[int] = queue.Queue()
        self._worker = threading.Thread(target=self._work, name="wattcap-jobs", daemon=True)
        self._worker.start()

    def submit(self, model_id: int, request: EstimateRequest) -> JobInfo:
        """Record a queued job (committed before this returns) and hand it to the worker."""
        job = self.store.create_job(model_id, request)
        self._queue.put(job.id)
        return job

    def _work(self) -> None:
        while True:
            job_id = self._queue.get()
            try:
                self._run(job_id)
            except Exception:  # the worker must survive anything a job does
                log.exception("job %s crashed", job_id)

    def _run(self, job_id: int) -> None:
        from wattcap.train.efficiency import estimate_efficiency

        job = self.store.get_job(job_id)
        if job is None:
            return
        self.store.update_job(job_id, status="running", progress="starting")
        request = job.request
        try:
            model = self.store.get_model(job.model_id)
            weights = self.store.get_weights(job.model_id)
            if model is None or weights is None:
                raise LookupError(f"model {job.model_id} is not stored")
            with tempfile.TemporaryDirectory(prefix="wattcap-job-") as folder:
                # The trainer loads weights from a file; these bytes passed the safetensors
                # and state-dict checks when they were uploaded.
                path = Path(folder) / "weights.safetensors"
                path.write_bytes(weights[0])

                def progress(update: ProgressUpdate) -> None:
                    self.store.update_job(job_id, progress=f"{update.done:.0f}/"
                                          f"{update.total or 0:.0f} runs; {update.detail}")

                vector = estimate_efficiency(
                    model.architecture, request.proxy, request.target_accuracy, weights=path,
                    batch_sizes=tuple(sorted(set(request.batch_sizes))), seeds=request.seeds,
                    sample_budget=request.sample_budget,
                    eval_every_samples=request.eval_every_samples, lr_ref=request.lr_ref,
                    batch_size_ref=request.batch_size_ref, progress=progress,
                    executor=self.executor,
                    data_options=request.data_options(),
                )
            vector.notes.append(f"estimated by the wattcap server (job {job_id}) from stored "
                                f"model {model.id}, weights sha256 {model.sha256}")
            self.store.finish_estimate(job_id, vector, model.id)
        except Exception as err:
            message = str(err).strip("'\"") or type(err).__name__
            self.store.update_job(job_id, status="failed", error=message)
