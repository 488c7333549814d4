//! Any bytes read as the `toolcalls` ingest format end in a batch checked against a store (every
//! line an event, typed or kept raw) or in an error naming its line, never in a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| loci_fuzz::check_input(Some(loci::ingest::Format::Toolcalls), data));
