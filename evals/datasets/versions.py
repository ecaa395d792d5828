"""Versioned datasets: every change to a dataset's rows is a new immutable version, and old versions stay readable.

A row is stored once for the range of versions it holds, [since_version,
until_version), at a stable `position`. Adding rows stores only them; an edit
closes the row and stores its new content at the same position; a removal
only closes it. So a version costs the rows it changed, never a copy of the
rest, and a version's rows are one query on the (dataset, position) index.
Positions are never reused: "row 12" names one row's history.

An eval pins the version it scores (Eval.dataset_version) and reads that
version's rows in position order: its samples' row_index counts them.

Each change is one transaction on the dataset locked: two edits at once make
two versions, one after the other, never one number twice.
"""

from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Max, Q

from ..models import Dataset, DatasetRow, DatasetVersion
from .rows import MAX_ROWS, MESSAGES, DatasetError, clean_row, is_messages, parse_upload

ROW_FIELDS = ("input", "input_format", "expected", "metadata")


class RowNotFound(DatasetError):
    status_code = 404


def rows_at(dataset: Dataset, number: int | None = None):
    """The rows of version `number` (the latest when None), in position order."""
    number = dataset.version if number is None else number
    return (
        DatasetRow.objects.filter(dataset=dataset, since_version__lte=number)
        .filter(Q(until_version__isnull=True) | Q(until_version__gt=number))
        .order_by("position")
    )


def version_of(dataset: Dataset, number) -> DatasetVersion:
    """The version `number` of the dataset, or DatasetError saying which versions it has."""
    try:
        number = int(number)
    except (TypeError, ValueError):
        raise DatasetError(f"A version is a number, 1 to {dataset.version}, not {number!r}.") from None
    found = DatasetVersion.objects.filter(dataset=dataset, number=number).first()
    if found is None:
        raise RowNotFound(f"Dataset {dataset.name} has versions 1 to {dataset.version}; there is no version {number}.")
    return found


def new_dataset(project, user, name: str, rows: list[dict], note: str) -> Dataset:
    """A dataset whose version 1 holds `rows` (checked with clean_row)."""
    if not rows:
        raise DatasetError("A dataset needs at least one row.")
    if len(rows) > MAX_ROWS:
        raise DatasetError(f"A dataset holds at most {MAX_ROWS:,} rows.")
    rows = checked(rows)
    with transaction.atomic():
        dataset = Dataset.objects.create(project=project, name=name, created_by=user, row_count=len(rows), version=1)
        DatasetRow.objects.bulk_create([DatasetRow(dataset=dataset, position=i, since_version=1, **row) for i, row in enumerate(rows)], batch_size=2000)
        DatasetVersion.objects.create(dataset=dataset, number=1, row_count=len(rows), added=len(rows), note=note[:200], created_by=user)
    return dataset


def add_rows(dataset: Dataset, user, rows: list[dict], note: str = "") -> DatasetVersion:
    if not rows:
        raise DatasetError("No rows to add.")
    return _change(dataset, user, note or f"{len(rows)} row{'s' if len(rows) != 1 else ''} added", add=checked(rows))


def edit_row(dataset: Dataset, user, position: int, changes: dict) -> DatasetVersion:
    """The row at `position` with `changes` (input, expected, metadata) as the next version; its place is kept."""
    with transaction.atomic():
        current = _current(_lock(dataset), [position])[position]
        edited = {name: getattr(current, name) for name in ROW_FIELDS}
        edited.update({name: value for name, value in changes.items() if name in ROW_FIELDS and value is not None})
        if "input_format" not in changes and is_messages(changes.get("input")):
            edited["input_format"] = MESSAGES
        row = clean_row(edited, f"Row {position}")
        if all(row[name] == getattr(current, name) for name in ROW_FIELDS):
            raise DatasetError(f"Row {position} already reads so: nothing changed, so no new version.")
        return _change(dataset, user, f"Row {position} edited", edit={position: row})


def remove_rows(dataset: Dataset, user, positions: list[int]) -> DatasetVersion:
    positions = sorted(set(positions))
    if not positions:
        raise DatasetError("No rows to remove.")
    what = f"Row {positions[0]}" if len(positions) == 1 else f"{len(positions)} rows"
    return _change(dataset, user, f"{what} removed", remove=positions)


def replace_rows(dataset: Dataset, user, rows: list[dict], note: str = "") -> DatasetVersion:
    """The dataset's rows become `rows`, matched by place: the i-th row of the file against the i-th of the dataset.

    A row that reads the same is kept as it is; one that differs is an edit
    (its position kept); rows past the end of the shorter side are added or
    removed. A corrected file so makes a diff of the rows it corrected.
    """
    if not rows:
        raise DatasetError("A dataset needs at least one row.")
    rows = checked(rows)
    with transaction.atomic():
        locked = _lock(dataset)
        current = list(rows_at(locked).only("position", *ROW_FIELDS))
        edits = {old.position: row for old, row in zip(current, rows, strict=False) if any(row[name] != getattr(old, name) for name in ROW_FIELDS)}
        removed = [old.position for old in current[len(rows) :]]
        added = rows[len(current) :]
        if not (edits or removed or added):
            raise DatasetError("The file holds exactly the rows of the latest version: nothing changed, so no new version.")
        return _change(dataset, user, note or "Rows replaced", add=added, edit=edits, remove=removed)


def checked(rows: list[dict]) -> list[dict]:
    """Every row through clean_row (a file's or a request's rows already were: it takes them as they are)."""
    return [clean_row(row, f"Row {n}") for n, row in enumerate(rows, 1)]


def _lock(dataset: Dataset) -> Dataset:
    """The dataset as it is now, locked until the transaction ends: changes to it wait for each other."""
    return Dataset.objects.select_for_update().get(pk=dataset.pk)


def _current(dataset: Dataset, positions) -> dict[int, DatasetRow]:
    found = {r.position: r for r in DatasetRow.objects.filter(dataset=dataset, position__in=positions, until_version__isnull=True)}
    missing = sorted(set(positions) - set(found))
    if missing:
        raise RowNotFound(f"Row {missing[0]} is not in the latest version (version {dataset.version}) of dataset {dataset.name}.")
    return found


def _change(dataset: Dataset, user, note: str, *, add=(), edit=None, remove=()) -> DatasetVersion:
    """The next version: `add` new rows, `edit` {position: row}, `remove` positions; one transaction."""
    edit = edit or {}
    with transaction.atomic():
        locked = _lock(dataset)
        number = locked.version + 1
        closing = _current(locked, [*edit, *remove])
        row_count = locked.row_count + len(add) - len(remove)
        if row_count < 1:
            raise DatasetError("A dataset keeps at least one row: delete the dataset instead of removing all its rows.")
        if row_count > MAX_ROWS:
            raise DatasetError(f"A dataset holds at most {MAX_ROWS:,} rows; this would make {row_count:,}.")
        DatasetRow.objects.filter(pk__in=[row.pk for row in closing.values()]).update(until_version=number)
        # After every position ever used, removed ones included: a position is never reused.
        start = (DatasetRow.objects.filter(dataset=locked).aggregate(last=Max("position"))["last"] or 0) + 1
        new = [DatasetRow(dataset=locked, position=position, since_version=number, **row) for position, row in edit.items()]
        new += [DatasetRow(dataset=locked, position=start + i, since_version=number, **row) for i, row in enumerate(add)]
        DatasetRow.objects.bulk_create(new, batch_size=2000)
        version = DatasetVersion.objects.create(
            dataset=locked, number=number, row_count=row_count, added=len(add), edited=len(edit), removed=len(remove), note=note[:200], created_by=user
        )
        Dataset.objects.filter(pk=locked.pk).update(version=number, row_count=row_count)
    for changed in (dataset, locked):
        changed.version, changed.row_count = number, row_count
    return version


@dataclass
class Diff:
    """What changed from version `base` to version `number`: rows added, edited (before, after) and removed, by position."""

    base: int
    number: int
    added: list[DatasetRow] = field(default_factory=list)
    edited: list[tuple[DatasetRow, DatasetRow]] = field(default_factory=list)
    removed: list[DatasetRow] = field(default_factory=list)

    @property
    def counts(self) -> dict:
        return {"added": len(self.added), "edited": len(self.edited), "removed": len(self.removed)}


def diff(dataset: Dataset, number: int, base: int | None = None) -> Diff:
    """Version `number` against `base` (the version before it when None): two queries, on the rows either version started or ended between them."""
    base = number - 1 if base is None else base
    if not 0 <= base < number <= dataset.version:
        raise DatasetError(f"Compare two versions of dataset {dataset.name}, the older first: 1 to {dataset.version} (0 for before the first).")
    rows = DatasetRow.objects.filter(dataset=dataset)
    # Live at `number` but not at `base`, and the other way round.
    started = rows.filter(since_version__gt=base, since_version__lte=number).filter(Q(until_version__isnull=True) | Q(until_version__gt=number))
    ended = rows.filter(until_version__gt=base, until_version__lte=number, since_version__lte=base)
    after = {row.position: row for row in started.order_by("position")}
    before = {row.position: row for row in ended.order_by("position")}
    result = Diff(base=base, number=number)
    for position in sorted(after.keys() | before.keys()):
        old, new = before.get(position), after.get(position)
        if old is None:
            result.added.append(new)
        elif new is None:
            result.removed.append(old)
        elif any(getattr(old, name) != getattr(new, name) for name in ROW_FIELDS):
            # Edited and edited back between the two would read the same: no change then.
            result.edited.append((old, new))
    return result


def create_dataset(project, user, name: str, data, filename: str = "") -> Dataset:
    """A new dataset, version 1, of an uploaded file's rows (JSONL, or CSV when `filename` ends in .csv)."""
    return new_dataset(project, user, name, parse_upload(data, filename), note=f"Uploaded {filename}".strip())


def upload_into(dataset: Dataset, user, data, filename: str = "", *, replace: bool = False) -> DatasetVersion:
    """A file's rows as the dataset's next version: added after its rows, or in their place (replace_rows matches them by place)."""
    rows = parse_upload(data, filename)
    how = "replacing its rows" if replace else "appended"
    note = f"Uploaded {filename or 'a file'}, {how}"
    return replace_rows(dataset, user, rows, note) if replace else add_rows(dataset, user, rows, note)
