"""`make run`'s embedded defaults: the platform on a SQLite file, as a newcomer first gets it.

The rest of the suite runs on PostgreSQL. These start the same commands as
scripts/run.sh on SQLite, so a query only PostgreSQL takes fails here
rather than in front of a newcomer: DISTINCT ON made the home page a 500,
and the jsonb statement that records a run's leaked secrets failed its worker.
"""

import re
import subprocess
import sys
from urllib.parse import urljoin, urlsplit

import pytest
import requests

from .servers import REPO, subprocess_environ, web_server

pytestmark = pytest.mark.processes
# Bounds the crawl: every page of a small project is well within it.
MAX_PAGES = 300
# Links a crawl must not follow: they sign out, change state by GET in the admin, or download files.
NOT_FOLLOWED = re.compile(r"logout|/admin/.*/(delete|history)/|/download|/export|\.(zip|csv|jsonl)$")

# A project with something on each kind of page: a harness run that printed its secret (logged twice,
# from two places, as the worker and the trace workers each note what they found), and a scored eval.
SEED = """
from decimal import Decimal
from django.utils import timezone
from django.contrib.auth import get_user_model
from belvedir.core.models import Project
from belvedir.redaction import Redactor
from evals.models import Deployment, Eval, Sample
from harnesses.models import Harness, HarnessEnvVar, Run
from harnesses.redaction import Place, note_found, run_secrets

owner = get_user_model().objects.get(username="demo")
project = Project.objects.get(members__username="demo")
harness = Harness.objects.create(project=project, created_by=owner, name="seeded", repo_url="https://example.com/r.git", run_command="true")
HarnessEnvVar.objects.create(harness=harness, name="API_TOKEN", value="tok-0123456789abcdef", secret=True)
run = Run.objects.create(project=project, harness=harness, price_cents=50, created_by=owner, status="succeeded", score=0.5)
secrets = run_secrets(run.pk)
for place in (Place.LOG, Place.SPANS):
    redactor = Redactor(secrets.values)
    redactor.text("printed tok-0123456789abcdef")
    note_found(secrets, redactor, place)
run.refresh_from_db()
print("secret_places", run.secret_places)
deployment = Deployment.objects.get(project=project)
ev = Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=1, status="succeeded", score=0.5,
                         sample_limit=2, total=2, done_count=2, finished_at=timezone.now(), cost=Decimal(0))
for i, score in enumerate((1.0, 0.0)):
    Sample.objects.create(eval=ev, row_index=i, input=f"question {i}", reference="7", output="#### 7", score=score)
"""


def manage(env, *arguments) -> str:
    done = subprocess.run([sys.executable, "manage.py", *arguments], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def on_sqlite(tmp_path_factory):
    """The environment of `make run` on a fresh SQLite file, migrated, with the demo login and the seeded project; its password."""
    database = tmp_path_factory.mktemp("sqlite") / "belvedir.sqlite3"
    env = {**subprocess_environ(), "DATABASE_URL": f"sqlite:///{database}", "BELVEDIR_ALLOW_PRIVATE_DEPLOYMENTS": "1"}
    manage(env, "migrate", "--noinput")
    password = re.search(r"password: (\S+)", manage(env, "demo_setup")).group(1)
    seeded = manage(env, "shell", "--command", SEED)
    return env, password, seeded


def test_a_run_records_which_of_its_secrets_it_printed_on_sqlite(on_sqlite):
    _, _, seeded = on_sqlite
    assert "secret_places {'API_TOKEN': 5}" in seeded  # log (1) | spans (4)


def test_every_page_the_demo_login_reaches_answers_without_a_server_error(on_sqlite):
    env, password, _ = on_sqlite
    with web_server("make-run", environ=env) as url:
        session = requests.Session()
        login = session.get(f"{url}/login/", timeout=30)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
        home = session.post(
            f"{url}/login/", data={"username": "demo", "password": password, "csrfmiddlewaretoken": token}, headers={"Referer": f"{url}/login/"}, timeout=30
        )
        assert home.status_code == 200 and "seeded" in home.text and "0.5000" in home.text, home.text[-2000:]
        seen, failed = crawl(session, url)
    assert len(seen) > 50 and {"/", "/harnesses/", "/evals/", "/admin/"} <= seen
    assert failed == [], failed


def crawl(session, url: str) -> tuple[set[str], list]:
    """Every same-site page linked from the home page, breadth first (GET only); those that answered 5xx."""
    seen, queue, failed = set(), ["/"], []
    while queue and len(seen) < MAX_PAGES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        page = session.get(url + path, timeout=60)
        if page.status_code >= 500:
            failed.append((path, page.status_code, page.text[:300]))
        if "html" not in page.headers.get("content-type", ""):
            continue
        for href in re.findall(r'href="([^"#]+)"', page.text):
            link = urlsplit(urljoin(url + path, href.replace("&amp;", "&")))
            if link.netloc == urlsplit(url).netloc and not NOT_FOLLOWED.search(link.path):
                queue.append(link.path + (f"?{link.query}" if link.query else ""))
    return seen, failed


# The eval engine's own writes, which take a path of their own on SQLite (evals/sample_writes.py, the response cache's
# _store): a second pass's row stored meanwhile is kept, not doubled; a fresh answer replaces the one kept for its key.
ENGINE_WRITES = """
from evals.models import CachedResponse, Deployment, Eval, Sample
from evals.response_cache import Key, _store
from evals.sample_writes import NewSample, store

ev = Eval.objects.get(benchmark="gsm8k", sample_limit=2)
def row(index, output):
    return NewSample(eval_id=ev.pk, row_index=index, input="q", reference="7", category={"subject": "é"}, output=output, scores={"n": 2})
store([row(5, "first pass"), row(6, "first pass")])
store([row(6, "second pass"), row(7, "second pass")])
print("samples", sorted(Sample.objects.filter(eval=ev, row_index__gte=5).values_list("row_index", "output", "scores", "category")))
deployment = Deployment.objects.get(pk=ev.deployment_id)
_store(ev.project_id, deployment, [(Key('{"k": 1}', "a" * 64), b"old", "")])
_store(ev.project_id, deployment, [(Key('{"k": 1}', "a" * 64), b"new", "fp"), (Key('{"k": 2}', "b" * 64), b"two", "")])
print("cached", sorted((c.key_hash[:1], bytes(c.body), c.system_fingerprint) for c in CachedResponse.objects.filter(project_id=ev.project_id)))
"""


def test_the_eval_engines_batched_writes_skip_and_replace_as_on_postgresql(on_sqlite):
    env, _, _ = on_sqlite
    out = manage(env, "shell", "--command", ENGINE_WRITES)
    assert (
        "samples [(5, 'first pass', {'n': 2}, {'subject': 'é'}), (6, 'first pass', {'n': 2}, {'subject': 'é'}), (7, 'second pass', {'n': 2}, {'subject': 'é'})]"
        in out
    )
    assert "cached [('a', b'new', 'fp'), ('b', b'two', '')]" in out
