"""Human review: how many labels active calibration takes against a random sample to reach the same κ interval
width, and the next-item and review-page latency with 100,000 items queued and 20 reviewers at once.

1. Synthetic judges and people with a known κ (review/simulation.py): a pass/fail judge that people overturn 35 % of
   the time on its close calls (a fifth of its verdicts) and 4 % elsewhere. For each of --seeds populations of 5,000
   verdicts, label one at a time (checking every 5 labels) until κ's 95 % interval is narrower than --width: at
   random, and by active calibration (review/active.py). Labels needed (median, quartiles) and how often the final
   interval held the true κ.
2. 100,000 items in one queue in PostgreSQL (the first 2,000 real eval samples), 20 reviewer threads each on its own
   connection, each asking for its next item and labelling it --per-reviewer times, once a second (a person reads
   the item first) and then with no pause at all (20 threads of one process saturating 2 cores): next_item latency
   p50/p95/p99, beside one reviewer alone; then the review page (GET, Django's test client, in one thread) --pages
   times: p50/p95/p99.

Targets (issue #57): next item p95 <= 50 ms; review page p95 <= 100 ms.

Usage: .venv/bin/python bench/review.py [--seeds 30] [--width 0.2] [--per-reviewer 25] [--pages 100]   (~3 min here)
Creates and drops a database `belvedir_bench_review` (BENCH_DATABASE_NAME).
"""

import argparse
import random
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from throwaway import throwaway_database  # noqa: E402


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return f"p50 {pick(0.5) * 1000:.1f} ms, p95 {pick(0.95) * 1000:.1f} ms, p99 {pick(0.99) * 1000:.1f} ms (n {len(ordered)})"


def simulation_part(seeds: int, width: float) -> None:
    import numpy as np

    from review import simulation

    started = time.perf_counter()
    found = simulation.compare(seeds, target_width=width)
    print(f"1. Labels to a κ interval {width} wide, {seeds} populations of 5,000 verdicts ({time.perf_counter() - started:.0f} s):")
    for name, result in found.items():
        q1, q3 = np.percentile(result["labels"], [25, 75])
        print(
            f"   {name:7s} median {result['median_labels']:.0f} labels (quartiles {q1:.0f}-{q3:.0f}); interval held the true κ in {result['coverage']:.0%} of runs"
        )
    print(f"   active / random: {found['active']['median_labels'] / found['random']['median_labels']:.2f}× the labels")


def queue_part(per_reviewer: int, pages: int) -> None:
    from django.db import connection
    from django.test import Client

    from belvedir.core.actions import create_account
    from belvedir.core.models import Membership
    from evals.models import Deployment, Eval, Sample
    from review import handout, queues
    from review.models import Item

    owner = create_account(username="owner", password="pw-owner-123")
    project = owner.memberships.get().project
    deployment = Deployment.objects.create(project=project, name="d", base_url="http://127.0.0.2:9/v1", model="m")
    ev = Eval.objects.create(project=project, deployment=deployment, benchmark="gsm8k", seed=1, status="succeeded")
    samples = Sample.objects.bulk_create(
        [Sample(eval=ev, row_index=i, input=f"question {i} " * 20, output=f"answer {i} " * 20, reference=str(i)) for i in range(2000)]
    )
    queue = queues.create_queue(
        project, owner, {"name": "big", "overlap": 1, "scores": [{"name": "ok", "kind": "boolean"}, {"name": "grade", "kind": "numeric", "min": 1, "max": 5}]}
    )
    ids = [s.pk for s in samples] + list(range(10**9, 10**9 + 98_000))
    started = time.perf_counter()
    for start in range(0, len(ids), 5000):
        Item.objects.bulk_create([Item(queue=queue, kind="sample", object_id=pk) for pk in ids[start : start + 5000]])
    print(f"2. 100,000 items queued in {time.perf_counter() - started:.1f} s")
    alone = []
    for _ in range(per_reviewer):
        began = time.perf_counter()
        item = handout.next_item(queue, owner)
        alone.append(time.perf_counter() - began)
        handout.submit(queue, item, owner, {"ok": True, "grade": 3})
    print(f"   next item, one reviewer alone: {percentiles(alone)}")
    people = [owner]
    for i in range(19):
        user = create_account(username=f"reviewer{i}", password="pw-reviewer-123")
        Membership.objects.create(project=project, user=user, role=Membership.Role.REVIEWER)
        people.append(user)

    def at_once(pause: float) -> list[float]:
        """Each of the 20 asks for its next item and labels it, `per_reviewer` times, pausing about `pause` s between
        labels (a person reads the item first: 0.5 to 1.5 × pause, so that they do not all ask in the same instant;
        0: as fast as the machine goes)."""
        rng = random.Random(7)
        latencies, lock = [], threading.Lock()
        barrier = threading.Barrier(len(people))

        def work(person):
            try:
                barrier.wait()
                for _ in range(per_reviewer):
                    began = time.perf_counter()
                    item = handout.next_item(queue, person)
                    took = time.perf_counter() - began
                    with lock:
                        latencies.append(took)
                    time.sleep(pause * rng.uniform(0.5, 1.5))
                    handout.submit(queue, item, person, {"ok": True, "grade": 3})
            finally:
                connection.close()

        threads = [threading.Thread(target=work, args=(p,)) for p in people]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return latencies

    print(f"   next item, 20 reviewers each labelling once a second: {percentiles(at_once(1.0))}")
    print(f"   next item, 20 reviewers labelling with no pause (the machine saturated): {percentiles(at_once(0.0))}")
    from django.conf import settings

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    client = Client()
    client.force_login(owner)
    page_times = []
    for _ in range(pages):
        began = time.perf_counter()
        response = client.get(f"/review/{queue.pk}/label/", secure=True)
        page_times.append(time.perf_counter() - began)
        assert response.status_code == 200 and b"label-form" in response.content, (response.status_code, response.content[:300])
        item = Item.objects.get(queue=queue, held_by=owner, done=False)
        handout.submit(queue, item, owner, {"ok": True, "grade": 4})
    print(f"   review page (next item, its sample, the rubric): {percentiles(page_times)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--width", type=float, default=0.2)
    parser.add_argument("--per-reviewer", type=int, default=25)
    parser.add_argument("--pages", type=int, default=100)
    args = parser.parse_args()
    with throwaway_database("belvedir_bench_review"):
        simulation_part(args.seeds, args.width)
        queue_part(args.per_reviewer, args.pages)


if __name__ == "__main__":
    main()
