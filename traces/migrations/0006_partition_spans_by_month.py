"""The span table becomes partitioned by month of start_time on PostgreSQL (traces/partitions.py).

A partitioned table's unique constraints must include the partition key, so
`span_once_per_project` gains start_time (and the primary key is (id,
start_time); ids still come from one sequence). PostgreSQL 15 allows no
identity column on a partitioned table, hence the plain sequence. SQLite
keeps a plain table with the same constraint.
"""

from django.db import migrations, models

OLD_UNIQUE = models.UniqueConstraint(fields=["project", "trace_id", "span_id"], name="span_once_per_project")
NEW_UNIQUE = models.UniqueConstraint(fields=["project", "trace_id", "span_id", "start_time"], name="span_once_per_project")
INDEXES = ["traces_span_pkey", "span_once_per_project", "span_task_assigned", "span_trace_id", "traces_span_project_cd8a91_idx"]


def _keys_and_indexes(run, partition_key: str):
    """The span table's keys, indexes and foreign keys, under the names Django knows them by."""
    run(f"ALTER TABLE traces_span ADD CONSTRAINT traces_span_pkey PRIMARY KEY (id{partition_key})")
    run(f"ALTER TABLE traces_span ADD CONSTRAINT span_once_per_project UNIQUE (project_id, trace_id, span_id{partition_key})")
    run("CREATE INDEX traces_span_project_cd8a91_idx ON traces_span (project_id, session_id, start_unix_nano)")
    run("CREATE INDEX span_trace_id ON traces_span (trace_id)")
    run("CREATE INDEX span_task_assigned ON traces_span (task_id) WHERE task_id IS NOT NULL")
    for column, target in [("project_id", "core_project"), ("task_id", "traces_task")]:
        run(
            f"ALTER TABLE traces_span ADD CONSTRAINT traces_span_{column}_fk_{target}_id FOREIGN KEY ({column}) "
            f"REFERENCES {target} (id) DEFERRABLE INITIALLY DEFERRED"
        )


def _months(cursor, table):
    cursor.execute(
        f"SELECT DISTINCT date_trunc('month', start_time AT TIME ZONE 'UTC') FROM {table} "
        "UNION SELECT date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month' * n FROM generate_series(0, 1) n"
    )
    return [row[0] for row in cursor.fetchall()]


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        # SQLite rebuilds the table from the model's state, which already
        # holds the new constraint: one rebuild swaps them.
        schema_editor.remove_constraint(apps.get_model("traces", "Span"), OLD_UNIQUE)
        return
    run = schema_editor.execute
    run("ALTER TABLE traces_span RENAME TO traces_span_plain")
    for index in INDEXES:
        run(f"ALTER INDEX {index} RENAME TO {index}_plain")
    run("CREATE TABLE traces_span (LIKE traces_span_plain INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (start_time)")
    # Set at the end from a new sequence: the plain table's goes with it.
    run("ALTER TABLE traces_span ALTER COLUMN id DROP DEFAULT")
    with schema_editor.connection.cursor() as cursor:
        for month in _months(cursor, "traces_span_plain"):
            cursor.execute(
                f"CREATE TABLE traces_span_{month:%Y_%m} PARTITION OF traces_span "
                "FOR VALUES FROM (%s::timestamp AT TIME ZONE 'UTC') TO ((%s::timestamp + interval '1 month') AT TIME ZONE 'UTC')",
                [month, month],
            )
        cursor.execute("INSERT INTO traces_span SELECT * FROM traces_span_plain")
        cursor.execute("SELECT coalesce(max(id), 0) FROM traces_span_plain")
        (last_id,) = cursor.fetchone()
    run("DROP TABLE traces_span_plain")
    run("CREATE SEQUENCE traces_span_id_seq OWNED BY traces_span.id")
    run(f"SELECT setval('traces_span_id_seq', {int(last_id) + 1}, false)")
    run("ALTER TABLE traces_span ALTER COLUMN id SET DEFAULT nextval('traces_span_id_seq')")
    # After the rows: one pass per index instead of one insertion per row, and
    # no deferred foreign-key checks pending when the table is altered.
    _keys_and_indexes(run, partition_key=", start_time")


def unpartition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.remove_constraint(apps.get_model("traces", "Span"), NEW_UNIQUE)
        return
    run = schema_editor.execute
    run("ALTER TABLE traces_span RENAME TO traces_span_partitioned")
    run("ALTER TABLE traces_span_partitioned ALTER COLUMN id DROP DEFAULT")
    run("ALTER SEQUENCE traces_span_id_seq OWNED BY NONE")
    for index in INDEXES:
        run(f"ALTER INDEX {index} RENAME TO {index}_partitioned")
    run("CREATE TABLE traces_span (LIKE traces_span_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
    run("INSERT INTO traces_span SELECT * FROM traces_span_partitioned")
    run("DROP TABLE traces_span_partitioned")
    run("ALTER TABLE traces_span ALTER COLUMN id SET DEFAULT nextval('traces_span_id_seq')")
    run("ALTER SEQUENCE traces_span_id_seq OWNED BY traces_span.id")
    _keys_and_indexes(run, partition_key="")


class Migration(migrations.Migration):
    dependencies = [("traces", "0005_trace_batches")]
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveConstraint(model_name="span", name="span_once_per_project"),
                migrations.AddConstraint(model_name="span", constraint=NEW_UNIQUE),
            ],
        ),
        migrations.RunPython(partition, unpartition),
    ]
