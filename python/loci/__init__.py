"""loci: a memory for autonomous agents, in process.

    import loci
    store = loci.Store.create("memory")          # or loci.Store.open("memory")
    store.ingest(['{"ts": 1, "actor": "bot", "kind": "DISCOVERY", "payload": {"text": "iron"}}'])
    pack = store.retrieve("where is the iron?", limit=5)
    print(pack["snippets"][0]["text"])

Every call returns plain dicts and lists (what `loci ... --json` prints). Errors are
`loci.LociError` subclasses: `InputError` (a bad line, field or argument), `NotFoundError`,
`QueryLimitError`, `StoreError`. A path is a `str` or an `os.PathLike`, never empty.
"""

import json as _json
import os as _os
from collections.abc import Mapping as _Mapping
from typing import Any, Dict, Iterable, List, Optional, Union

from . import _loci
from ._loci import InputError, LociError, NotFoundError, QueryLimitError, StoreError

__all__ = [
    "Store",
    "LociError",
    "InputError",
    "NotFoundError",
    "QueryLimitError",
    "StoreError",
]


def _lines(events: Union[str, Iterable[Union[str, dict]]]) -> str:
    """JSON Lines text of `events`: a str of JSON Lines, or an iterable of lines and dicts.
    A dict alone, bytes, or an item of another type is a TypeError (a dict had been read as
    its keys, one line each, and failed as a bad format)."""
    if isinstance(events, str):
        return events
    if isinstance(events, _Mapping):
        raise TypeError("events: give a list of events (or JSON Lines text), not one event's dict: [event]")
    if isinstance(events, (bytes, bytearray)):
        raise TypeError("events: give JSON Lines as a str (bytes.decode()), or a list of lines or dicts")
    out = []
    for i, e in enumerate(events):
        if isinstance(e, str):
            out.append(e)
        elif isinstance(e, _Mapping):
            out.append(_dumps(dict(e), f"events[{i}]"))
        else:
            raise TypeError(f"events[{i}]: a line (str) or an event (dict), not {type(e).__name__}")
    return "\n".join(out) + "\n" if out else ""


def _dumps(value: Any, where: str) -> str:
    """`value` as JSON text. NaN and the infinities, which Python's json writes but JSON has
    not, are an InputError naming `where`: the text had been refused as "expected value" at a
    column of a line the caller never wrote."""
    try:
        return _json.dumps(value, allow_nan=False)
    except ValueError as e:
        if "Out of range float" not in str(e):
            raise
        raise InputError(f"{where}: holds NaN or an infinity, which JSON cannot hold") from None


def _path(path: "Union[str, _os.PathLike[str]]") -> str:
    """`path` as a string: a `str` or an `os.PathLike` of one (`str(x)` had made `None` a
    directory named "None"), and not empty (which would be the working directory)."""
    if not isinstance(path, (str, _os.PathLike)):
        raise TypeError(f"a path is a str or an os.PathLike, not {type(path).__name__}")
    text = _os.fspath(path)
    if not isinstance(text, str):
        raise TypeError("a path is a str or an os.PathLike of a str, not of bytes")
    if text == "":
        raise InputError("path: is empty")
    return text


class Store:
    """A loci store directory, open in this process (one writer process at a time)."""

    def __init__(self, inner: "_loci.Store"):
        # `Store("path")` reads as an open, but a handle comes from `Store.open` or
        # `Store.create`; a path here had failed later, at the first call, as an AttributeError.
        if not isinstance(inner, _loci.Store):
            raise TypeError("use loci.Store.open(path) or loci.Store.create(path); Store() takes neither a path nor anything else")
        self._inner = inner

    @classmethod
    def create(cls, path: str, backend: str = "redb") -> "Store":
        """Creates a new, empty store at `path` (redb or sled)."""
        return cls(_loci.Store.create(_path(path), backend))

    @classmethod
    def open(cls, path: str, read_only: bool = False) -> "Store":
        """Opens an existing store. `read_only` takes no lock and writes nothing: it reads
        beside a writer in another process (or none), as of its open."""
        return cls(_loci.Store.open(_path(path), read_only))

    def ingest(self, events: Union[str, Iterable[Union[str, dict]]], format: Optional[str] = None) -> Dict[str, Any]:
        """Appends JSON Lines (a string, or an iterable of lines or dicts) as one atomic batch.

        `format` is events | graph | passages | triples | toolcalls | conversation | journal
        (default: told from the first line). Returns the commit: first_seq, last_seq, events...
        """
        return _json.loads(self._inner.ingest(_lines(events), format))

    def ingest_file(self, path: str, format: Optional[str] = None) -> Dict[str, Any]:
        """Appends a JSON Lines file as one atomic batch."""
        return _json.loads(self._inner.ingest_file(_path(path), format))

    def retrieve(
        self,
        question: str,
        *,
        limit: int = 10,
        budget: Optional[int] = None,
        min_confidence: float = 0.0,
        kinds: Optional[List[str]] = None,
        record: bool = True,
    ) -> Dict[str, Any]:
        """A context pack for a question: ranked snippets with scores and provenance."""
        return _json.loads(self._inner.retrieve(question, limit, budget, min_confidence, kinds or [], record))

    query = retrieve

    def run(self, name: Optional[str] = None, *, query: Optional[str] = None, params: Optional[Dict[str, Any]] = None, explain: bool = False) -> Dict[str, Any]:
        """Runs a planner query: a saved one by `name`, or `query` text, with `params`;
        with `explain`, the plan it would run (`loci run --explain`), not its answer."""
        return _json.loads(self._inner.run(name, query, _dumps(params or {}, "params"), explain))

    def queries(self) -> List[Dict[str, Any]]:
        """The saved queries with their parameters."""
        return _json.loads(self._inner.queries())

    def search(self, text: str, *, label: Optional[str] = None, kind: Optional[str] = None, limit: int = 10) -> List[Dict[str, Any]]:
        """Full-text search over nodes and events."""
        return _json.loads(self._inner.search(text, label, kind, limit))

    def context(
        self,
        budget: int,
        question: Optional[str] = None,
        *,
        mode: str = "all",
        session: Optional[str] = None,
        instructions: Optional[str] = None,
        tokenizer: str = "approx",
        save: bool = False,
    ) -> Dict[str, Any]:
        """This turn's prompt context in a token budget (`text`, `sections`, `tokens`, ...)."""
        return _json.loads(self._inner.context(budget, question, mode, session, instructions, tokenizer, save))

    def stats(self) -> Dict[str, Any]:
        """Counts and sizes."""
        return _json.loads(self._inner.stats())

    def verify(self) -> Dict[str, Any]:
        """Replays the log and compares it with the live state (`ok` is True when equal)."""
        return _json.loads(self._inner.verify())

    def close(self) -> None:
        """Flushes pending uses and closes the store; later calls raise StoreError."""
        self._inner.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
