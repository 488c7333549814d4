//! Any bytes read as the `journal` ingest format end in a batch checked against a store or in an
//! error naming its line and field, never in a panic (RFC 3339 times and long texts included).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| loci_fuzz::check_input(Some(loci::ingest::Format::Journal), data));
