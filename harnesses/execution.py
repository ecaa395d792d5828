"""What the worker does for one run: clone, launch, install, run, collect.

Kept apart from tasks.py (the queue entry points) as Read the Docs keeps its
build environment apart from its Celery tasks.
"""

import logging
import tempfile
import threading
import time

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from belvedir.core.models import ApiKey
from belvedir.localmodel.files import ModelFileError
from belvedir.redaction import Redactor
from belvedir.sandbox import egress
from belvedir.sandbox.backend import Sandbox
from belvedir.sandbox.errors import (
    SandboxError,
    SandboxFileMissing,
    SandboxFileTooLarge,
    SandboxPlatformError,
    SandboxTimeout,
    SandboxUserError,
)
from belvedir.sandbox.launch import Placement, workload
from belvedir.sandbox.models import ComputeType
from belvedir.sandbox.output import TailBuffer
from belvedir.sandbox.spec import HOME, GpuRequest, Limits, SandboxSpec
from traces import workload_keys

from . import local_model, repo
from .actions import finish_run, revoke_run_credentials
from .models import Run
from .redaction import CANARY_ENV, RUN_KEY_ENV, Place, RunSecrets, new_canary, note_found, run_secrets
from .results import ParsedResults, errors_problem, parse_results

logger = logging.getLogger(__name__)
REPO_DIR = f"{HOME}/repo"
TASKS_FILE = f"{HOME}/.belvedir/tasks.txt"
Status = Run.Status


class RunExecution:
    def __init__(self, run: Run):
        self.run = run
        self.harness = run.harness
        # Its key, canary and egress token join these when they are made, before the sandbox starts.
        self.secrets: list[str] = list(run_secrets(run.pk).values)
        self.tail = TailBuffer(settings.HARNESS_LOG_TAIL_BYTES, Redactor(self.secrets))
        self.launch_secrets: RunSecrets | None = None  # with its key and canary, once they are made
        self.egress_names: dict[str, str] = {}  # its egress token, by the variables that hold it
        self.sandbox: Sandbox | None = None
        self.launched = False
        self.mounts = ()
        self._stop = threading.Event()

    # -- the whole run -----------------------------------------------------

    def execute(self):
        run = self.run
        monitor = threading.Thread(target=self._monitor, daemon=True)
        monitor.start()
        try:
            self._execute()
        except (repo.RepoError, ModelFileError) as exc:
            self._end(Status.LAUNCH_FAILED, str(exc), refund=True)
        except SandboxPlatformError as exc:
            if self.launched:
                self._end(Status.ERROR, f"Platform error during the run: {exc.message}", refund=True)
            else:
                self._end(Status.LAUNCH_FAILED, exc.message, refund=True)
        except SandboxTimeout:
            self._end(Status.TIMED_OUT, f"Killed after the harness time limit of {self.harness.time_limit_seconds} s.")
        except SandboxUserError as exc:
            # Out of memory, or the sandbox killed from inside: the workload's
            # doing, so charged (a refund here would make any run free).
            self._end(Status.FAILED, exc.message)
        except Exception:
            logger.exception("run %s crashed the worker", run.pk)
            self._end(Status.ERROR, "An internal error stopped this run; it was refunded.", refund=True)
        finally:
            self._stop.set()
            monitor.join(10)
            revoke_run_credentials(run)  # again: a key issued after a cancel ended the run
            Run.objects.filter(pk=run.pk).update(log_tail=self._log(final=True))
            if self.launch_secrets:
                note_found(self.launch_secrets, self.tail.redactor, Place.LOG, self.egress_names)  # after the final tail: its held-back end is masked last

    def _execute(self):
        run, harness = self.run, self.harness
        gpu_type = harness.gpu_type if run.compute_type == ComputeType.GPU else ""
        # Checked before the clone: weights that are missing or changed fail the launch (refunded), naming the fix.
        self.mounts = local_model.mounts() if harness.local_model else ()
        with tempfile.TemporaryDirectory(prefix=f"bv-run-{run.pk}-") as checkout:
            self._say(f"Cloning {repo.redact(harness.repo_url)}{' at ' + harness.ref if harness.ref else ''}…")
            credentials = repo.Credentials.for_project(run.project)
            sha = repo.clone(harness.repo_url, harness.ref, checkout, settings.HARNESS_CLONE_TIMEOUT_SECONDS, credentials)
            Run.objects.filter(pk=run.pk).update(commit_sha=sha)
            self._say(f"Checked out {sha[:12]}.")
            key, raw_key = ApiKey.issue(project=run.project, user=run.created_by, name=f"run #{run.pk}", scope=ApiKey.Scope.INGEST, per_run=True)
            run.api_key = key
            # The key joins the run's secret env so that the trace workers
            # can redact it; the canary is made fresh for this launch.
            run.secret_env = {**run.secret_env, RUN_KEY_ENV: raw_key, CANARY_ENV: new_canary()}
            Run.objects.filter(pk=run.pk).update(api_key=key, secret_env=run.secret_env)
            env = self._env(raw_key)
            if settings.HARNESS_SANDBOX_NETWORK == egress.NETWORK:
                _, token = egress.issue_grant(run.owner, domains=harness.egress_domain_list())
                self.secrets.append(token)
                self.egress_names[token] = "HTTPS_PROXY"  # (and HTTP_PROXY, ALL_PROXY: the proxy's URL holds it)
                env.update(egress.sandbox_env(egress.proxy_url(run.owner, token)))
            self.launch_secrets = run_secrets(run.pk)
            self.secrets += self.launch_secrets.values
            self.tail.redactor = Redactor(self.secrets)  # bytes the old one held back go through the new one
            # An engine that does not answer is marked unhealthy and the run moves to another host once.
            with workload(run.owner, self._spec, compute=run.compute_type, gpu_type=gpu_type, on_lease=self._on_host) as box:
                self.sandbox = box
                box.put_archive(REPO_DIR, repo.tar_stream(checkout))
                if harness.tasks:
                    box.put_files(TASKS_FILE.rsplit("/", 1)[0], {"tasks.txt": harness.tasks.encode()})
                self.launched = True
                try:
                    self._collect(box, env)
                except SandboxError:
                    raise
                except Exception as exc:
                    # An error of ours, unless the evidence (read while the
                    # container still exists) says the workload stopped it.
                    if died := box.diagnose():
                        raise died from exc
                    raise

    def _collect(self, box: Sandbox, env: dict):
        harness = self.harness
        deadline = time.monotonic() + harness.time_limit_seconds
        if not self._advance(Status.INSTALLING, install_started_at=timezone.now()):
            return
        self._say(f"$ {harness.install_command}")
        install = box.exec(harness.install_command, env=env, workdir=REPO_DIR, timeout=self._left(deadline), tail_bytes=1, on_output=self.tail.write)
        if install.exit_code != 0:
            self._end(Status.FAILED, f"The install command exited with code {install.exit_code}.", exit_code=install.exit_code)
            return
        if not self._advance(Status.RUNNING, run_started_at=timezone.now()):
            return
        self._say(f"$ {harness.run_command}")
        result = box.exec(harness.run_command, env=env, workdir=REPO_DIR, timeout=self._left(deadline), tail_bytes=1, on_output=self.tail.write)
        parsed = self._results(box)
        fields = dict(exit_code=result.exit_code, results=parsed.results, score=parsed.score, model_label=parsed.model, results_error=parsed.error)
        if result.exit_code == 0:
            too_many = errors_problem(parsed.results)
            self._end(Status.FAILED if too_many else Status.SUCCEEDED, too_many, **fields)
        else:
            self._end(Status.FAILED, f"The run command exited with code {result.exit_code}.", **fields)

    # -- pieces ------------------------------------------------------------

    def _on_host(self, lease):
        Run.objects.filter(pk=self.run.pk).update(host=lease.host)

    def _spec(self, place: Placement) -> SandboxSpec:
        gpu = None
        if self.run.compute_type == ComputeType.GPU and place.host.gpu_device_requests:
            gpu = GpuRequest(device_ids=(str(place.lease.gpu_slot),))
        return SandboxSpec(
            owner=self.run.owner,
            network=settings.HARNESS_SANDBOX_NETWORK,
            gpu=gpu,
            mounts=self.mounts,
            limits=Limits.defaults(),
            runtime=place.runtime,
        )

    def _env(self, raw_key: str) -> dict[str, str]:
        run = self.run
        env = {v.name: v.value for v in self.harness.env_vars.all()}
        env.update(run.extra_env)
        env.update(run.secret_env)
        env.update(workload_keys.workload_env(raw_key, str(run.pk)))
        if self.harness.tasks:
            env["FRACTAL_TASKS_FILE"] = TASKS_FILE
        if self.harness.local_model:
            env.update(local_model.env())
        return env

    def _results(self, box: Sandbox) -> ParsedResults:
        try:
            raw = box.read_file(f"{REPO_DIR}/results.json", settings.HARNESS_RESULTS_MAX_BYTES)
        except SandboxFileMissing:
            return ParsedResults(error="The run wrote no results.json at the repo root.")
        except SandboxFileTooLarge:
            return ParsedResults(error=f"results.json is larger than {settings.HARNESS_RESULTS_MAX_BYTES // 1024} KB; it was not read.")
        redactor = Redactor(self.secrets)
        parsed = parse_results(raw, redactor)
        note_found(self.launch_secrets, redactor, Place.RESULTS, self.egress_names)
        return parsed

    def _advance(self, status, **fields) -> bool:
        """Step forward unless the run was cancelled or reaped meanwhile."""
        return bool(Run.objects.filter(pk=self.run.pk, status__in=Run.IN_SANDBOX).update(status=status, **fields))

    def _end(self, status, message, *, refund=False, **fields):
        # The final log goes in with the final status: whoever sees the run
        # ended (a page, `bv runs logs`) also sees its whole tail.
        finish_run(
            self.run,
            status,
            status_message=Redactor(self.secrets).text(message)[:1000],
            refund_reason=message if refund else "",
            from_statuses=Run.IN_SANDBOX,
            log_tail=self._log(final=True),
            **fields,
        )

    def _left(self, deadline) -> float:
        return max(deadline - time.monotonic(), 0.1)

    def _say(self, line: str):
        self.tail.write(f"[belvedir] {line}\n".encode())

    def _log(self, *, final: bool = False) -> str:
        return self.tail.text(final=final)

    def _monitor(self):
        """Heartbeat, live log tail, and the kill switch for cancel and reap."""
        last = None
        try:
            while not self._stop.wait(settings.HARNESS_HEARTBEAT_SECONDS):
                log = self._log()
                fields = {"heartbeat_at": timezone.now()}
                if log != last:
                    fields["log_tail"] = last = log
                Run.objects.filter(pk=self.run.pk).update(**fields)
                status = Run.objects.filter(pk=self.run.pk).values_list("status", flat=True).first()
                if status not in Run.IN_SANDBOX and self.sandbox is not None:
                    self.sandbox.kill()
        except Exception:
            logger.exception("monitor of run %s failed", self.run.pk)
        finally:
            connection.close()


def execute_run(run_id: int):
    close_old_connections()
    claimed = Run.objects.filter(pk=run_id, status=Status.QUEUED).update(status=Status.LAUNCHING, launched_at=timezone.now(), heartbeat_at=timezone.now())
    if not claimed:
        return  # re-delivered, cancelled or reaped: nothing to do twice
    run = Run.objects.select_related("harness", "project", "created_by").get(pk=run_id)
    RunExecution(run).execute()
