"""The `loci` Python package (PyO3): a store in process, dicts out, errors as exceptions."""


import pytest

import loci



@pytest.fixture()
def store(world_store, tmp_path):
    """The world, re-ingested into a store the package creates itself."""
    binary, _ = world_store
    world = tmp_path / "world.jsonl"
    s = loci.Store.create(str(tmp_path / "pystore"))
    commit = s.ingest_file(str(world))
    assert commit["events"] == 49
    yield s
    s.close()


def test_retrieve_run_search_context_and_stats(store):
    pack = store.retrieve("who trades emeralds for sticks", limit=3)
    assert 0 < len(pack["snippets"]) <= 3
    assert "OFFERS" in pack["snippets"][0]["text"]
    assert pack["snippets"][0]["provenance"]["events"], pack["snippets"][0]

    rows = store.run("find_trade", params={"want": "emerald", "give": "stick"})
    assert rows["columns"][0] == "villager" and rows["rows"]
    inline = store.run(query="MATCH (n:NPC) WHERE n.key = $k RETURN n.name", params={"k": "npc:fletcher:0"})
    assert inline["rows"] == [["fletcher villager"]]
    assert any(q["name"] == "find_trade" for q in store.queries())

    hits = store.search("fletcher", label="NPC", limit=2)
    assert len(hits) == 2 and all(h["label"] == "NPC" for h in hits)

    ctx = store.context(300, "where is home")
    assert ctx["tokens"] <= 300 and "=== memory above" in ctx["text"]

    stats = store.stats()
    assert stats["events"] == 49 and stats["nodes"] > 0
    assert store.verify()["ok"]


def test_ingest_is_atomic_and_errors_are_exceptions(store):
    before = store.stats()["events"]
    with pytest.raises(loci.InputError) as e:
        store.ingest([{"ts": 1, "actor": "bot", "kind": "NOTE"}, '{"ts": 1, "actor": "bot"}'])
    assert "input:2" in str(e.value) and "kind" in str(e.value)
    assert store.stats()["events"] == before, "a failed batch writes nothing"
    assert store.ingest([{"ts": 1, "actor": "bot", "kind": "NOTE", "payload": {"text": "über 🦀"}}])["events"] == 1

    with pytest.raises(loci.NotFoundError):
        store.run("no_such_query")
    with pytest.raises(loci.InputError):
        store.run(query="MATCH (n RETURN n")
    with pytest.raises(loci.InputError):
        store.retrieve("x", kinds=["nonsense"])
    assert issubclass(loci.QueryLimitError, loci.LociError)


def test_a_closed_store_refuses_and_a_locked_one_says_so(tmp_path):
    path = str(tmp_path / "s")
    s = loci.Store.create(path)
    with pytest.raises(loci.StoreError) as e:
        loci.Store.open(path)
    assert "locked" in str(e.value)
    s.close()
    with pytest.raises(loci.StoreError):
        s.stats()
    with loci.Store.open(path) as again:
        assert again.stats()["events"] == 0


def test_a_read_only_handle_writes_nothing_and_leaves_the_store_to_a_writer(tmp_path):
    # It had opened for writing when no other process held the store: it took the writer
    # lock, shutting the agent's writer (or `loci serve`) out, and accepted writes.
    import subprocess
    import sys

    path = str(tmp_path / "s")
    s = loci.Store.create(path)
    s.ingest([{"ts": 1, "actor": "a", "kind": "K"}])
    s.close()
    with loci.Store.open(path, read_only=True) as reader:
        with pytest.raises(loci.StoreError) as e:
            reader.ingest([{"ts": 2, "actor": "b", "kind": "K"}])
        assert "read-only" in str(e.value)
        writer = subprocess.run(
            [sys.executable, "-c", f"import loci; print(loci.Store.open({path!r}).stats()['events'])"],
            capture_output=True,
            text=True,
        )
        assert writer.returncode == 0, writer.stderr
        assert writer.stdout.strip() == "1"


def test_paths_are_strings_or_path_likes_and_never_empty(tmp_path, monkeypatch):
    # `str(path)` had made `None` a store named "None" in the working directory, and "" made
    # the working directory itself a store.
    monkeypatch.chdir(tmp_path)
    for bad in [None, 5, b"/tmp/x"]:
        with pytest.raises(TypeError):
            loci.Store.create(bad)
    with pytest.raises(loci.InputError):
        loci.Store.create("")
    assert list(tmp_path.iterdir()) == []
    s = loci.Store.create(tmp_path / "ok")
    with pytest.raises(TypeError):
        s.ingest_file(None)
    s.close()


def test_search_refuses_what_the_cli_refuses(store):
    # An empty text or filter and a limit of 0 had answered [], where `loci search` refuses
    # them: a caller could not tell that from a store that knows nothing.
    for text, kwargs, named in [
        ("", {}, "text"),
        ("  ", {}, "text"),
        ("emerald", {"label": ""}, "label"),
        ("emerald", {"kind": " "}, "kind"),
        ("emerald", {"limit": 0}, "limit"),
    ]:
        with pytest.raises(loci.InputError) as e:
            store.search(text, **kwargs)
        assert named in str(e.value)
    assert store.search("emerald", limit=1)


def test_argument_errors_name_the_python_arguments(store):
    # They had named the library's fields: `k` for `limit`, `token_counter` for `tokenizer`.
    with pytest.raises(loci.InputError) as e:
        store.retrieve("who trades emeralds", limit=0)
    assert str(e.value).startswith("limit:"), str(e.value)
    with pytest.raises(loci.InputError) as e:
        store.context(100, "who trades emeralds", tokenizer="nope")
    assert "tokenizer" in str(e.value) and "token_counter" not in str(e.value), str(e.value)
