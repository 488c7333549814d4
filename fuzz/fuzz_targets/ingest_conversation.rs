//! Any bytes read as the `conversation` ingest format end in a batch checked against a store or
//! in an error naming its line, never in a panic (session times and relative dates included).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| loci_fuzz::check_input(Some(loci::ingest::Format::Conversation), data));
