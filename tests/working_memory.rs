//! Working memory as events: bounded, cleared by sleep (all but the mainline), persisted,
//! replayed, and recomputed when one of its events is deleted. Both backends.

use loci::dynamics::working::WmOp;
use loci::model::EventDraft;
use loci::{BackendKind, DeleteRequest, Store};

fn assert_verifies(store: &Store) {
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:#?}", report.differences);
}

#[test]
fn working_memory_is_derived_from_its_events() {
    for backend in BackendKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), backend).unwrap();
        let change = |op: WmOp, ts: i64| store.change_working_memory(&op, "bot", Some(ts)).unwrap();
        change(WmOp::Capacity { n: 3 }, 0);
        change(
            WmOp::Mainline {
                text: "reach the stronghold".into(),
            },
            0,
        );
        change(
            WmOp::Intent {
                text: "get iron".into(),
            },
            1,
        );
        change(
            WmOp::PushSubgoal {
                text: "find a cave".into(),
            },
            2,
        );
        change(
            WmOp::AddThreat {
                text: "creeper nearby".into(),
            },
            3,
        );
        change(
            WmOp::Promise {
                text: "bring wheat to Ana".into(),
            },
            3,
        );
        let mut observed = Vec::new();
        for (i, text) in ["torch low", "zombie groan", "ore spotted", "night falls"]
            .iter()
            .enumerate()
        {
            observed.push(
                change(
                    WmOp::Observe {
                        text: text.to_string(),
                    },
                    10 + i as i64,
                )
                .last_seq,
            );
        }
        let wm = store.working_memory();
        let texts: Vec<&str> = wm.observations.iter().map(|h| h.text.as_str()).collect();
        assert_eq!(
            texts,
            ["zombie groan", "ore spotted", "night falls"],
            "{backend}"
        );
        assert_eq!(wm.intent.as_deref(), Some("get iron"));
        assert_eq!(wm.subgoals, ["find a cave"]);
        assert_eq!(wm.threats, ["creeper nearby"]);
        assert_verifies(&store);

        // Deleting an observation recomputes the ring from what remains.
        store.delete(&DeleteRequest::events([observed[3]])).unwrap();
        let texts: Vec<String> = store
            .working_memory()
            .observations
            .iter()
            .map(|h| h.text.clone())
            .collect();
        assert_eq!(
            texts,
            ["torch low", "zombie groan", "ore spotted"],
            "{backend}"
        );
        assert_verifies(&store);

        // Sleep clears everything but the mainline; the state survives a reopen.
        store
            .ingest(vec![EventDraft::new(20, "bot", "SLEEP")])
            .unwrap();
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        let wm = store.working_memory();
        assert!(wm.observations.is_empty() && wm.intent.is_none() && wm.threats.is_empty());
        assert!(wm.promises.is_empty() && wm.subgoals.is_empty());
        assert_eq!(wm.mainline.as_deref(), Some("reach the stronghold"));
        assert_eq!(wm.capacity, 3);
        assert_verifies(&store);
    }
}

#[test]
fn a_capacity_out_of_range_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    assert!(store
        .change_working_memory(&WmOp::Capacity { n: 0 }, "bot", None)
        .is_err());
    assert_eq!(store.stats().events, 0);
}

/// Found by the session 23 probe: `add-threat "creeper "` held "creeper " and `clear-threat
/// creeper` missed it, and an accented name typed decomposed (as macOS file names are) missed
/// the same name composed. A change's text is held trimmed and in NFC, and matched so.
#[test]
fn texts_are_held_trimmed_and_composed_so_they_match_as_typed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), BackendKind::Redb).unwrap();
    let change = |op: WmOp| store.change_working_memory(&op, "bot", Some(1));
    change(WmOp::AddThreat {
        text: " creeper \n".into(),
    })
    .unwrap();
    change(WmOp::Promise {
        text: "meet Ze\u{301}phyr at the cafe\u{301}\u{200b}".into(),
    })
    .unwrap();
    change(WmOp::Intent {
        text: "\u{feff}mine iron\t".into(),
    })
    .unwrap();
    let wm = store.working_memory();
    assert_eq!(wm.threats, ["creeper"]);
    assert_eq!(wm.promises, ["meet Zéphyr at the café"]);
    assert_eq!(wm.intent.as_deref(), Some("mine iron"));
    change(WmOp::ClearThreat {
        text: "creeper".into(),
    })
    .unwrap();
    change(WmOp::KeepPromise {
        text: "meet Zéphyr at the café".into(),
    })
    .unwrap();
    let wm = store.working_memory();
    assert!(wm.threats.is_empty() && wm.promises.is_empty(), "{wm:?}");
    // A mainline of blanks clears it, as an empty one does: it had been held as "   " and
    // shown as an empty line (session 24 probe).
    change(WmOp::Mainline {
        text: "reach the stronghold".into(),
    })
    .unwrap();
    change(WmOp::Mainline { text: "   ".into() }).unwrap();
    assert_eq!(store.working_memory().mainline, None);
    assert_verifies(&store);
}
