"""A throwaway PostgreSQL database for a bench script: created, migrated, Django set up on it, dropped after."""

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
ADMIN_URL = os.environ.get("BENCH_DATABASE_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


@contextlib.contextmanager
def throwaway_database(default_name: str):
    """Yields the database URL. `BENCH_DATABASE_NAME` picks another name, so two people can bench on one server."""
    name = os.environ.get("BENCH_DATABASE_NAME", default_name)
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    url = f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    os.environ.update(DATABASE_URL=url, DJANGO_SETTINGS_MODULE="belvedir.settings", LOG_LEVEL="WARNING", DEBUG="0", SECRET_KEY="bench-" + "x" * 40)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, check=True)
    import django

    django.setup()
    try:
        yield url
    finally:
        from django.db import connection

        connection.close()
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
