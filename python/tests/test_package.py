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
    # The plan, not the answer: the saved neighbors walks its relation breadth-first.
    plan = store.run("neighbors", params={"node": "bot", "depth": 4}, explain=True)
    assert "rows" not in plan
    assert any(op.get("Expand", {}).get("reach") for op in plan["ops"]), plan
    with pytest.raises(loci.InputError):
        store.run("neighbors", params={"node": "bot", "depth": 5}, explain=True)

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
    # As the CLI and the server answer a misspelled name: with the name meant, and those saved.
    with pytest.raises(loci.NotFoundError) as e:
        store.run("neighbours", params={"node": "bot"})
    assert 'did you mean "neighbors"?' in str(e.value) and "find_trade" in str(e.value), e.value
    with pytest.raises(loci.InputError):
        store.run(query="MATCH (n RETURN n")
    with pytest.raises(loci.InputError):
        store.retrieve("x", kinds=["nonsense"])
    assert issubclass(loci.QueryLimitError, loci.LociError)

    # helper-100 (session 46): an integer no 64-bit type holds was kept as the nearest float.
    with pytest.raises(loci.InputError) as e:
        store.ingest([{"ts": 1, "actor": "bot", "kind": "NOTE", "payload": {"x": 2**70}}])
    assert "payload.x" in str(e.value), e.value
    with pytest.raises(loci.InputError) as e:
        store.run(query="MATCH (n) RETURN $p LIMIT 1", params={"p": 2**64})
    assert "params.p" in str(e.value), e.value


def test_errors_cross_processes_pickled(store):
    # helper-100 (session 46): the errors named their module `_loci`, which pickle could not
    # import back, so an error raised in a worker process could not reach its parent.
    import pickle

    with pytest.raises(loci.InputError) as e:
        store.retrieve("x", kinds=["nonsense"])
    assert type(e.value).__module__ == "loci"
    again = pickle.loads(pickle.dumps(e.value))
    assert type(again) is loci.InputError and str(again) == str(e.value)


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


def test_a_forked_child_is_refused_the_parents_handle_and_leaves_it_working(tmp_path):
    # The child's writes had hung on a text writer thread it does not have, and its close
    # raised a PanicException (a panic joining that thread), which kills a worker.
    import os

    s = loci.Store.create(str(tmp_path / "s"))
    s.ingest([{"ts": 1, "actor": "a", "kind": "K", "payload": {"text": "before the fork"}}])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it met on the pipe, then leave without cleanup
        code = 0
        try:
            try:
                s.ingest([{"ts": 2, "actor": "child", "kind": "K"}])
                os.write(write, b"ingest accepted\n")
                code = 1
            except loci.StoreError as e:
                if "os.fork()" not in str(e):
                    os.write(write, f"ingest: {e}\n".encode())
                    code = 1
            try:
                s.stats()
                os.write(write, b"stats accepted\n")
                code = 1
            except loci.StoreError:
                pass
            s.close()
            del s
            import gc

            gc.collect()
            os.write(write, b"closed\n")
        except BaseException as e:  # a PanicException is a BaseException
            os.write(write, f"{type(e).__name__}: {e}\n".encode())
            code = 1
        os._exit(code)
    os.close(write)
    import time

    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(read)
        pytest.fail("the child did not finish in 60 s (its write waited on the parent's threads)")
    status = done[1]
    said = os.read(read, 65536).decode()
    os.close(read)
    assert os.waitstatus_to_exitcode(status) == 0 and said == "closed\n", said
    # The parent's handle is untouched by the child's close.
    assert s.ingest([{"ts": 3, "actor": "a", "kind": "K"}])["events"] == 1
    assert s.stats()["events"] == 2
    s.close()


def test_what_is_not_an_event_list_or_a_handle_is_a_type_error(store, tmp_path):
    before = store.stats()["events"]
    from collections import UserDict

    event = {"ts": 1, "actor": "a", "kind": "K"}
    for bad in [event, UserDict(event), b'{"ts": 1}', [5], [None]]:
        with pytest.raises(TypeError):
            store.ingest(bad)
    assert store.stats()["events"] == before
    # An empty batch commits nothing, as `loci ingest` of an empty file does; a mapping
    # that is not a dict is an event like a dict.
    assert store.ingest([])["events"] == 0
    assert store.ingest((e for e in []))["events"] == 0
    assert store.ingest([UserDict(event)])["events"] == 1
    with pytest.raises(TypeError) as e:
        loci.Store(str(tmp_path / "s"))
    assert "Store.open" in str(e.value)


def test_a_closed_store_refuses_its_saved_queries_too(tmp_path):
    s = loci.Store.create(str(tmp_path / "s"))
    assert s.queries()
    s.close()
    with pytest.raises(loci.StoreError):
        s.queries()


def test_a_long_name_is_shown_shortened_in_its_error(store):
    with pytest.raises(loci.NotFoundError) as e:
        store.run("q" * 10_000_000)
    assert len(str(e.value)) < 400 and "(10000000 bytes)" in str(e.value), str(e.value)[:300]


def test_a_store_that_is_not_there_is_not_found_and_a_second_handle_says_whose_lock(tmp_path):
    # The CLI exits 4 (not found) for a store that is not there; the package raised StoreError.
    with pytest.raises(loci.NotFoundError):
        loci.Store.open(str(tmp_path / "nowhere"))
    # A second handle in the process that holds the store was told another process held it
    # (its own pid), with no hint that the first handle is the holder.
    s = loci.Store.create(str(tmp_path / "s"))
    with pytest.raises(loci.StoreError) as e:
        loci.Store.open(str(tmp_path / "s"))
    assert "this process" in str(e.value) and "close" in str(e.value), str(e.value)
    s.close()
    loci.Store.open(str(tmp_path / "s")).close()


def test_a_value_json_cannot_hold_is_an_input_error_naming_where(store):
    # Python's json writes NaN and Infinity, which JSON has not: the line was refused as
    # "expected value" at a column of text the caller never wrote.
    before = store.stats()["events"]
    for bad in [float("nan"), float("inf"), -float("inf")]:
        with pytest.raises(loci.InputError) as e:
            store.ingest([{"ts": 1, "actor": "a", "kind": "K"}, {"ts": bad, "actor": "a", "kind": "K"}])
        assert "events[1]" in str(e.value) and "NaN or an infinity" in str(e.value), str(e.value)
        with pytest.raises(loci.InputError) as e:
            store.run("find_trade", params={"want": bad, "give": "stick"})
        assert "params" in str(e.value) and "NaN or an infinity" in str(e.value), str(e.value)
    assert store.stats()["events"] == before


def test_a_file_that_is_not_there_is_not_found(store, tmp_path):
    # The CLI exits 4 (not found) for an input file that is not there; the package raised
    # StoreError (a helper's probe).
    with pytest.raises(loci.NotFoundError) as e:
        store.ingest_file(str(tmp_path / "nonexistent.jsonl"))
    assert "nonexistent.jsonl" in str(e.value), str(e.value)
