"""Shared fixtures: the `loci` binary under test and a store holding the demo world."""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def loci_bin() -> str:
    """The binary `cargo test` built (LOCI_BIN), else target/debug/loci."""
    path = os.environ.get("LOCI_BIN") or str(ROOT / "target" / "debug" / "loci")
    if not os.path.exists(path):
        pytest.fail(f"no loci binary at {path}: run `cargo build` or set LOCI_BIN")
    return path


@pytest.fixture()
def world_store(tmp_path):
    """A store with the synthetic world, and the binary that made it."""
    binary = loci_bin()
    world = tmp_path / "world.jsonl"
    store = tmp_path / "store"
    subprocess.run([binary, "world", "--out", str(world)], check=True, capture_output=True)
    subprocess.run([binary, "init", "--store", str(store)], check=True, capture_output=True)
    subprocess.run([binary, "ingest", "--store", str(store), str(world)], check=True, capture_output=True)
    return binary, store
