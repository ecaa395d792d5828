"""Benchmark overlap: whether a text holds a catalog benchmark's inputs or references (issue #35).

Two rules, as the decontamination literature uses them, over texts
normalised the same way on both sides (NFKC, case-folded, every run of
punctuation and whitespace one space):

- exact: the whole text equals a row's input or reference. Only texts of at
  least MIN_WORDS words and MIN_CHARS characters once normalised take part:
  every gsm8k reference is a bare number, MMLU's, ARC's, HellaSwag's and
  WinoGrande's a letter, IFBench's an instruction id of at most three words,
  and an answer "18" must not be taken for gsm8k. Five words and twenty
  characters is the shortest text specific enough that equality is not
  chance ("left 3 frac pi 2 right", a math500 answer, just passes; "a 0 b 4"
  does not).
- 13-gram: the text shares a run of 13 words with an input or reference, as
  GPT-3's contamination study (Brown et al. 2020, appendix C) and
  lm-evaluation-harness's decontamination count overlap. A 13-gram found in
  more than MAX_ROWS_PER_NGRAM rows of the catalog is left out of the index:
  it is a benchmark's prompt template, not a row's content (MMLU's
  moral-scenarios stem is in 895 rows, MBPP's "You are an expert Python
  programmer, and here is your task" in 499), and GPT-3 dropped 13-grams
  found in more than ten training documents for the same reason. 292 of the
  catalog's 2.5 million 13-grams go.

What it cannot see: a paraphrase that keeps no 13 words in a row (and a
benchmark text under 13 words, unless the whole message equals it), a
question translated, or its numbers changed. tests/test_decontamination.py
shows a reworded gsm8k and MMLU question passing.

The index is built once per catalog version (every benchmark's name and
data version, and the rules above: `index_key`), by `manage.py
install_benchmark_data` or by the first check that finds it missing, into
BENCHMARK_DATA_DIR/overlap-index/<key>/ as numpy files: sorted uint64
hashes of the 13-grams and of the exact texts, each with a uint32 row
number, and the rows' ids. A process opens them memory-mapped, so a check
reads only the pages its binary searches touch, and the page cache holds one
copy for every worker; Python's heap holds none of it.
"""

import hashlib
import json
import logging
import os
import re
import shutil
import time
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import benchmarks
from .benchmarks import data

logger = logging.getLogger(__name__)

NGRAM = 13
MIN_WORDS, MIN_CHARS = 5, 20
MAX_ROWS_PER_NGRAM = 10
# Bumped when the files or the hashing change, so an old index is never read with new rules.
FORMAT = 1
EXACT, NGRAM_MATCH = "exact", "13-gram"
ROOT = "overlap-index"
# How much of an exactly matched text an Overlap quotes (a 13-gram is quoted whole).
QUOTE_CHARS = 200
# Rows hashed at a time while building: bounds the arrays of one pass, not the result.
BUILD_BATCH = 2000

_PUNCTUATION = re.compile(r"[\W_]+")
# Horner's rule over the words' hashes, then splitmix64's finaliser: an odd multiplier keeps
# word order in the hash, the finaliser spreads it over all 64 bits.
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


class IndexUnavailable(Exception):
    """The check cannot run: a benchmark's data is not installed, so its rows cannot be indexed."""

    status_code = 503


@dataclass(frozen=True)
class Overlap:
    """The first match found in a conversation: which benchmark row, by which rule, in which message, and the words that matched."""

    benchmark: str
    row: str
    match: str
    role: str
    text: str

    def as_dict(self) -> dict:
        return {"benchmark": self.benchmark, "row": self.row, "match": self.match, "role": self.role, "text": self.text}


def normalise(text: str) -> str:
    return _PUNCTUATION.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def long_enough(normalised: str) -> bool:
    return len(normalised) >= MIN_CHARS and normalised.count(" ") + 1 >= MIN_WORDS


def exact_hash(normalised: str) -> int:
    return int.from_bytes(hashlib.blake2b(normalised.encode(), digest_size=8).digest(), "little")


def _word_hashes(words: list[str]) -> np.ndarray:
    # Each distinct word hashed once per call: a conversation or a batch of rows repeats most of its words.
    digests = {word: hashlib.blake2b(word.encode(), digest_size=8).digest() for word in dict.fromkeys(words)}
    return np.frombuffer(b"".join(map(digests.__getitem__, words)), dtype="<u8")


def ngram_hashes(word_lists: Sequence[list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """The hash of every run of NGRAM words inside each list (none spans two lists), and where each run starts in the lists laid end to end."""
    lengths = np.fromiter(map(len, word_lists), dtype=np.int64, count=len(word_lists))
    total = int(lengths.sum())
    if total < NGRAM:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
    words = _word_hashes([word for words in word_lists for word in words])
    count = total - NGRAM + 1
    hashes = np.zeros(count, dtype=np.uint64)
    for i in range(NGRAM):
        hashes *= _MULTIPLIER
        hashes += words[i : i + count]
    starts = np.arange(count)
    valid = starts + NGRAM <= np.repeat(np.cumsum(lengths), lengths)[:count]
    return _mix(hashes[valid]), starts[valid]


def _mix(x: np.ndarray) -> np.ndarray:
    x ^= x >> np.uint64(30)
    x *= _MIX1
    x ^= x >> np.uint64(27)
    x *= _MIX2
    x ^= x >> np.uint64(31)
    return x


def index_key() -> str:
    """What the index is built from: the catalog's benchmarks and data versions, and the rules. IndexUnavailable when data is missing."""
    parts = [f"format {FORMAT} ngram {NGRAM} min {MIN_WORDS} {MIN_CHARS} max rows {MAX_ROWS_PER_NGRAM}"]
    for name, benchmark in benchmarks.CATALOG.items():
        try:
            parts.append(f"{name} {benchmark.version()}")
        except data.DataMissing as exc:
            raise IndexUnavailable(f"The benchmark check cannot run: {name}'s data is missing. {exc}") from None
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def index_root() -> Path:
    return data.data_dir() / ROOT


def _lookup(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of `wanted` are in sorted `keys` (positions in `wanted`), and their values."""
    if not keys.size or not wanted.size:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=values.dtype)
    at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
    found = np.flatnonzero(keys[at] == wanted)
    return found, values[at[found]]


class Index:
    """The catalog's index, opened memory-mapped: `find` checks a conversation's texts."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.meta = json.loads((directory / "meta.json").read_text())
        self.key = self.meta["key"]
        # Plain arrays over the maps: np.memmap's own indexing costs more than the searches it wraps.
        self.ngrams, self.ngram_rows, self.exact, self.exact_rows, self.row_ids = (
            np.asarray(np.load(directory / f"{name}.npy", mmap_mode="r")) for name in ("ngrams", "ngram_rows", "exact", "exact_rows", "row_ids")
        )
        self._firsts = np.array([b["first_row"] for b in self.meta["benchmarks"]])

    def row(self, ordinal: int) -> tuple[str, str]:
        """(benchmark, row id) of a row number."""
        benchmark = self.meta["benchmarks"][int(np.searchsorted(self._firsts, ordinal, side="right")) - 1]["name"]
        return benchmark, bytes(self.row_ids[ordinal]).decode()

    def find(self, texts: Iterable[tuple[str, str]]) -> Overlap | None:
        """The first overlap in one conversation's (role, text) pairs; None when clean."""
        return self.find_many([texts])[0]

    def find_many(self, conversations: Sequence[Iterable[tuple[str, str]]]) -> list[Overlap | None]:
        """The first overlap in each conversation's (role, text) pairs: an exact match before a 13-gram, earlier texts before later.

        Several conversations at a time, so that the searches' fixed costs are paid once for all of them.
        """
        owners, roles, normalised = [], [], []
        for n, texts in enumerate(conversations):
            for role, text in texts:
                owners.append(n)
                roles.append(role)
                normalised.append(normalise(text))
        found: list[Overlap | None] = [None] * len(conversations)
        candidates = [i for i, text in enumerate(normalised) if long_enough(text)]
        hits, rows = _lookup(self.exact, self.exact_rows, np.array([exact_hash(normalised[i]) for i in candidates], dtype=np.uint64))
        for hit, row in zip(hits.tolist(), rows.tolist(), strict=True):
            i = candidates[hit]
            if found[owners[i]] is None:
                found[owners[i]] = Overlap(*self.row(row), EXACT, roles[i], normalised[i][:QUOTE_CHARS])
        word_lists = [text.split() for text in normalised]
        hashes, starts = ngram_hashes(word_lists)
        hits, rows = _lookup(self.ngrams, self.ngram_rows, hashes)
        if hits.size:
            ends = np.cumsum([len(words) for words in word_lists])
            for start, row in zip(starts[hits].tolist(), rows.tolist(), strict=True):
                i = int(np.searchsorted(ends, start, side="right"))
                if found[owners[i]] is None:
                    offset = start - (int(ends[i - 1]) if i else 0)
                    found[owners[i]] = Overlap(*self.row(row), NGRAM_MATCH, roles[i], " ".join(word_lists[i][offset : offset + NGRAM]))
        return found


_open: Index | None = None


def ensure_built() -> tuple[Path, bool]:
    """The index's directory for the installed catalog, and whether it was built just now. IndexUnavailable when data is missing."""
    directory = index_root() / index_key()
    if (directory / "meta.json").is_file():
        return directory, False
    return build(), True


def current() -> Index:
    """The index for the installed catalog, opened once per process; built first if missing (seconds: install_benchmark_data builds it ahead)."""
    global _open
    key = index_key()
    if _open is None or _open.key != key:
        directory, built = ensure_built()
        if built:
            logger.warning("The benchmark overlap index %s was missing and was built on demand (manage.py install_benchmark_data builds it ahead).", key)
        _open = Index(directory)
    return _open


def _unique_by_hash(hashes: np.ndarray, rows: np.ndarray, max_rows: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct hashes, each with its first row; those in more than `max_rows` distinct rows dropped."""
    order = np.lexsort((rows, hashes))
    hashes, rows = hashes[order], rows[order]
    distinct = np.ones(hashes.size, dtype=bool)
    distinct[1:] = (hashes[1:] != hashes[:-1]) | (rows[1:] != rows[:-1])
    hashes, rows = hashes[distinct], rows[distinct]
    firsts = np.flatnonzero(np.r_[True, hashes[1:] != hashes[:-1]]) if hashes.size else np.empty(0, dtype=np.int64)
    if max_rows is not None:
        counts = np.diff(np.r_[firsts, hashes.size])
        firsts = firsts[counts <= max_rows]
    return hashes[firsts], rows[firsts]


def build() -> Path:
    """Index every catalog benchmark's inputs and references; the index's directory. IndexUnavailable when a benchmark's data is missing."""
    started = time.perf_counter()
    key = index_key()
    ngrams, ngram_rows, exact, exact_rows, row_ids, listed = [], [], [], [], [], []
    for name, benchmark in benchmarks.CATALOG.items():
        first = len(row_ids)
        try:
            # load(), not rows(): the rows are not kept in this process once indexed.
            rows = benchmark.load()
        except data.DataMissing as exc:
            raise IndexUnavailable(f"The benchmark check cannot run: {name}'s data is missing. {exc}") from None
        for at in range(0, len(rows), BUILD_BATCH):
            texts, owners = [], []
            for row in rows[at : at + BUILD_BATCH]:
                ordinal = len(row_ids)
                row_ids.append(row.id.encode())
                for text in (row.input, row.reference):
                    text = normalise(text)
                    if long_enough(text):
                        exact.append(exact_hash(text))
                        exact_rows.append(ordinal)
                    texts.append(text.split())
                    owners.append(ordinal)
            hashes, starts = ngram_hashes(texts)
            owner = np.searchsorted(np.cumsum([len(words) for words in texts]), starts, side="right")
            ngrams.append(hashes)
            ngram_rows.append(np.asarray(owners, dtype=np.uint32)[owner])
        listed.append({"name": name, "version": benchmark.version(), "first_row": first, "rows": len(row_ids) - first})
    all_ngrams = np.concatenate(ngrams)
    kept_ngrams, kept_ngram_rows = _unique_by_hash(all_ngrams, np.concatenate(ngram_rows), MAX_ROWS_PER_NGRAM)
    kept_exact, kept_exact_rows = _unique_by_hash(np.array(exact, dtype=np.uint64), np.array(exact_rows, dtype=np.uint32), None)
    arrays = {"ngrams": kept_ngrams, "ngram_rows": kept_ngram_rows, "exact": kept_exact, "exact_rows": kept_exact_rows, "row_ids": np.array(row_ids)}
    root = index_root()
    final = root / key
    staging = root / f".{key}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name, array in arrays.items():
        np.save(staging / f"{name}.npy", array)
    meta = {
        "key": key,
        "format": FORMAT,
        "ngram": NGRAM,
        "min_words": MIN_WORDS,
        "min_chars": MIN_CHARS,
        "max_rows_per_ngram": MAX_ROWS_PER_NGRAM,
        "benchmarks": listed,
        "ngrams": int(kept_ngrams.size),
        "ngrams_dropped_as_templates": int(np.unique(all_ngrams).size - kept_ngrams.size),
        "exact_texts": int(kept_exact.size),
        "bytes": sum(int(array.nbytes) for array in arrays.values()),
        "build_seconds": round(time.perf_counter() - started, 2),
    }
    (staging / "meta.json").write_text(json.dumps(meta, indent=1))
    try:
        # Appears whole or not at all; a process that built the same key at the same time wins instead.
        os.rename(staging, final)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not (final / "meta.json").is_file():
            raise
    for old in root.iterdir():
        if old.name != final.name and not old.name.startswith("."):
            shutil.rmtree(old, ignore_errors=True)
    return final
