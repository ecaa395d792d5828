"""The database refuses UPDATE and DELETE of ledger rows, not only the model.

`LedgerEntry.save()`/`delete()` already refuse, but `QuerySet.update()`,
`.delete()`, raw SQL, `dbshell` and other programs on the same database go
around Python. A trigger does not.

One change is allowed: `user_id` set to NULL with every other column unchanged,
which is what Django's ON DELETE SET_NULL does when a user is deleted (who
made an entry is personal data; the money columns never change).

PostgreSQL: one BEFORE UPDATE OR DELETE row trigger; TRUNCATE (test flushes)
is not a row change and is not refused. SQLite: two BEFORE triggers that
RAISE(ABORT); they compare the columns listed here, and SQLite drops a
table's triggers when a migration remakes the table (AlterField and most
other schema changes there), so such a migration must install them again.
`manage.py flush` on SQLite (DELETE FROM) is refused by them.

A later migration that truly must rewrite ledger rows disables the guard
explicitly, in itself, for its own statements only (a migration is one
transaction on PostgreSQL, so a failure leaves the guard on):

    operations = [
        migrations.RunSQL("ALTER TABLE billing_ledgerentry DISABLE TRIGGER billing_ledger_append_only"),
        migrations.RunSQL("UPDATE billing_ledgerentry SET ..."),  # say why in the migration
        migrations.RunSQL("ALTER TABLE billing_ledgerentry ENABLE TRIGGER billing_ledger_append_only"),
    ]

and on SQLite, DROP TRIGGER billing_ledger_no_update / _no_delete before its
statements and CREATE them again (the SQL below) after.
"""

from django.db import migrations

POSTGRES_INSTALL = """
CREATE FUNCTION billing_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.user_id IS NULL AND to_jsonb(NEW) - 'user_id' = to_jsonb(OLD) - 'user_id' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'billing_ledgerentry is append-only: % of entry % refused', TG_OP, OLD.id
        USING ERRCODE = 'restrict_violation', HINT = 'Post a new entry (an adjustment) instead.';
END
$$;
CREATE TRIGGER billing_ledger_append_only BEFORE UPDATE OR DELETE ON billing_ledgerentry
    FOR EACH ROW EXECUTE FUNCTION billing_ledger_append_only();
"""
POSTGRES_REMOVE = """
DROP TRIGGER IF EXISTS billing_ledger_append_only ON billing_ledgerentry;
DROP FUNCTION IF EXISTS billing_ledger_append_only();
"""

SQLITE_COLUMNS = ["id", "account_id", "topup_id", "kind", "amount_cents", "balance_after_cents", "reference", "memo", "created_at"]
SQLITE_INSTALL = [
    """CREATE TRIGGER billing_ledger_no_update BEFORE UPDATE ON billing_ledgerentry
    WHEN NOT (NEW.user_id IS NULL AND {unchanged})
    BEGIN SELECT RAISE(ABORT, 'billing_ledgerentry is append-only: UPDATE refused'); END""".format(
        unchanged=" AND ".join(f"NEW.{c} IS OLD.{c}" for c in SQLITE_COLUMNS)
    ),
    """CREATE TRIGGER billing_ledger_no_delete BEFORE DELETE ON billing_ledgerentry
    BEGIN SELECT RAISE(ABORT, 'billing_ledgerentry is append-only: DELETE refused'); END""",
]
SQLITE_REMOVE = ["DROP TRIGGER IF EXISTS billing_ledger_no_update", "DROP TRIGGER IF EXISTS billing_ledger_no_delete"]


def _run(schema_editor, postgres, sqlite):
    vendor = schema_editor.connection.vendor
    statements = [postgres] if vendor == "postgresql" else sqlite if vendor == "sqlite" else []
    for statement in statements:
        schema_editor.execute(statement, params=None)  # None: the `%` in RAISE is not a placeholder


def install(apps, schema_editor):
    _run(schema_editor, POSTGRES_INSTALL, SQLITE_INSTALL)


def remove(apps, schema_editor):
    _run(schema_editor, POSTGRES_REMOVE, SQLITE_REMOVE)


class Migration(migrations.Migration):
    dependencies = [("billing", "0005_link_topup_credits")]

    operations = [migrations.RunPython(install, remove)]
