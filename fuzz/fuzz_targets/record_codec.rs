//! A log record's bytes, as a damaged file gives them: every reader of a record refuses them
//! or decodes them, never panics, and never allocates past the bound a record may claim
//! (`codec::COMPRESS_UP_TO`); a full read and a peek at the kind agree; and a record read is
//! written again as bytes that read back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loci::codec;

fuzz_target!(|data: &[u8]| {
    let full = codec::decode_event("log", data);
    let peek = codec::peek_event_kind("log", data);
    let _ = codec::decode_event_up_to_payload("log", data);
    let _ = codec::decode_event_up_to_payload_without_digest("log", data);
    let _ = codec::decode_event_without_digest("log", data);
    let _ = codec::decode_event_without_payload("log", data);
    let _ = codec::check_record("log", data);
    if let Ok(event) = &full {
        let (seq, kind) = peek.expect("a record read whole is read by a peek");
        assert_eq!((seq, kind.as_str()), (event.seq, event.kind.as_str()));
        let again = codec::encode_event(event);
        let read_again = codec::decode_event("log", &again).expect("written, then read");
        assert_eq!(codec::encode_event(&read_again), again);
    }
});
