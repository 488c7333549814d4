//! The query parser and planner must never panic, whatever the text: every input ends in a
//! query or an error with a span inside the text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match loci::query::parse(text) {
            Ok(q) => {
                let _ = loci::query::plan(&q, loci::query::PlanLimits::default());
            }
            Err(e) => {
                assert!(e.span.start <= text.len() && e.span.end <= text.len());
                let _ = e.position(text);
            }
        }
    }
});
