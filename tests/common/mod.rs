//! Helpers shared by the tests that run the `loci` binary.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `bin` with `args`, writing `input` to its standard input and then closing it.
pub fn run_with_stdin(bin: &str, args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A child that exits before reading everything closes the pipe: that is its answer, not
    // a failure of the test's write.
    let _ = child.stdin.take().unwrap().write_all(input);
    child.wait_with_output().unwrap()
}
