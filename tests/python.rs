//! The Python suite (`python/tests`) under `cargo test`: the MCP SDK for Python as a client of
//! `loci mcp` and `loci serve`, and the `loci` Python package. It needs what
//! `python/requirements-test.txt` lists (`.ci/run` installs it); without it this test fails,
//! saying what to install, rather than passing without having run.

use std::process::Command;

#[test]
fn python_suite_passes() {
    let root = env!("CARGO_MANIFEST_DIR");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = Command::new(&python)
        .args(["-c", "import pytest, mcp, loci"])
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        _ => panic!(
            "the Python tests need pytest, mcp and the loci package: `{python} -m pip install -r {root}/python/requirements-test.txt {root}/python` (what .ci/run does)"
        ),
    }
    let out = Command::new(&python)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "python/tests",
        ])
        .current_dir(root)
        .env("LOCI_BIN", env!("CARGO_BIN_EXE_loci"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pytest failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
