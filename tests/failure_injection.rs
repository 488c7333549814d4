//! Failure injection on the commit path, redb-style: the redb backend runs over a simulated
//! disk that fails the N-th write or sync and, on "power loss", forgets everything not synced.
//! For every N until a commit gets through, a failed commit must leave the previous state
//! exactly, and a commit reported as done must be complete after the crash.
//!
//! The disk can also tear and reorder: the failing write may persist only a prefix, and a power
//! loss may keep any subset of the writes since the last sync, each possibly cut short, in any
//! order (what a drive with a volatile cache may do). The sled backend's failure path is tested
//! in `tests/sled_failure.rs`, in a process of its own.

use std::io;
use std::sync::{Arc, Mutex};

use loci::storage::{Backend, RedbBackend, Table, WriteBatch};
use loci::world::Rng;
use redb::{Database, StorageBackend};

#[derive(Debug, Default)]
struct Disk {
    durable: Vec<u8>,
    volatile: Vec<u8>,
    /// Writes and syncs allowed before every later one fails.
    budget: Option<usize>,
    /// Writes since the last sync, in order: what a power loss may keep or lose.
    pending: Vec<(usize, Vec<u8>)>,
    /// The failing write persists a prefix of its data (to the volatile state).
    torn: bool,
}

#[derive(Debug, Clone, Default)]
struct SimulatedDisk(Arc<Mutex<Disk>>);

impl SimulatedDisk {
    fn spend(d: &mut Disk) -> io::Result<()> {
        match &mut d.budget {
            Some(0) => Err(io::Error::other("injected failure")),
            Some(n) => {
                *n -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }
    fn power_loss(&self) {
        let mut d = self.0.lock().unwrap();
        d.volatile = d.durable.clone();
        d.pending.clear();
        d.budget = None;
    }
    fn fail_after(&self, n: usize) {
        self.0.lock().unwrap().budget = Some(n);
    }
}

impl StorageBackend for SimulatedDisk {
    fn len(&self) -> Result<u64, io::Error> {
        Ok(self.0.lock().unwrap().volatile.len() as u64)
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        let d = self.0.lock().unwrap();
        let start = offset as usize;
        let src = d
            .volatile
            .get(start..start + out.len())
            .ok_or_else(|| io::Error::other("read past end"))?;
        out.copy_from_slice(src);
        Ok(())
    }
    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        let mut d = self.0.lock().unwrap();
        Self::spend(&mut d)?;
        d.volatile.resize(len as usize, 0);
        Ok(())
    }
    fn sync_data(&self) -> Result<(), io::Error> {
        let mut d = self.0.lock().unwrap();
        Self::spend(&mut d)?;
        d.durable = d.volatile.clone();
        d.pending.clear();
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        let mut d = self.0.lock().unwrap();
        let (data, result) = match Self::spend(&mut d) {
            Ok(()) => (data, Ok(())),
            Err(e) if d.torn => (&data[..data.len() / 2], Err(e)),
            Err(e) => return Err(e),
        };
        apply(&mut d.volatile, offset as usize, data);
        d.pending.push((offset as usize, data.to_vec()));
        result
    }
}

fn apply(bytes: &mut Vec<u8>, offset: usize, data: &[u8]) {
    let end = offset + data.len();
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[offset..end].copy_from_slice(data);
}

impl SimulatedDisk {
    /// A power loss on a drive that reorders and tears: the durable state plus a random subset
    /// of the unsynced writes, in random order, each possibly cut to a prefix.
    fn power_loss_reordered(&self, rng: &mut Rng) {
        let mut d = self.0.lock().unwrap();
        let mut pending = std::mem::take(&mut d.pending);
        let mut state = d.durable.clone();
        while !pending.is_empty() {
            let (offset, data) = pending.swap_remove(rng.below(pending.len() as u64) as usize);
            match rng.below(3) {
                0 => {}
                1 => apply(&mut state, offset, &data),
                _ => {
                    let keep = rng.below(data.len() as u64 + 1) as usize;
                    apply(&mut state, offset, &data[..keep]);
                }
            }
        }
        d.durable = state.clone();
        d.volatile = state;
        d.budget = None;
    }
}

fn open(disk: &SimulatedDisk) -> RedbBackend {
    let db = Database::builder()
        .create_with_backend(disk.clone())
        .expect("database opens after a crash");
    RedbBackend::from_database(db).unwrap()
}

fn batch(tag: u8, n: u64) -> WriteBatch {
    let mut w = WriteBatch::default();
    for i in 0..n {
        w.put(Table::Log, i.to_be_bytes(), vec![tag; 300]);
        w.put(Table::Edges, i.to_be_bytes(), vec![tag; 40]);
    }
    w.put(Table::Meta, b"counters", vec![tag]);
    w
}

/// Every value in Log, Edges and Meta carries the tag of the batch that wrote it.
fn tags(b: &RedbBackend) -> (usize, Vec<u8>) {
    let mut tags = Vec::new();
    let mut n = 0;
    for t in [Table::Log, Table::Edges] {
        b.scan(t, &[], None, &mut |_, v| {
            n += 1;
            tags.push(v[0]);
            Ok(true)
        })
        .unwrap();
    }
    tags.extend(b.get(Table::Meta, b"counters").unwrap().unwrap_or_default());
    tags.sort_unstable();
    tags.dedup();
    (n, tags)
}

#[test]
fn every_failure_point_of_a_commit_is_all_or_nothing() {
    let mut points = 0;
    let mut failed = 0;
    for n in 0.. {
        let disk = SimulatedDisk::default();
        {
            let b = open(&disk);
            b.commit(batch(1, 400)).unwrap();
            disk.fail_after(n);
            // A rewrite of every key, so a partial commit would show as mixed tags.
            let result = b.commit(batch(2, 400));
            points += 1;
            if result.is_ok() {
                // The commit reported success: it must survive the power loss below.
                drop(b);
                disk.power_loss();
                assert_eq!(tags(&open(&disk)), (800, vec![2]));
                break;
            }
            failed += 1;
        }
        disk.power_loss();
        let b = open(&disk);
        assert_eq!(
            tags(&b),
            (800, vec![1]),
            "failure after {n} disk operations left a partial commit"
        );
        // And the store keeps working after the repair.
        b.commit(batch(3, 10)).unwrap();
        assert!(b.get(Table::Log, &5u64.to_be_bytes()).unwrap().unwrap()[0] == 3);
    }
    println!(
        "{failed} injected failure points rolled back; the commit needed {points} disk operations"
    );
    assert!(
        failed > 3,
        "the commit should take several disk operations, took {points}"
    );
}

/// As above, but the failing write is torn and the power loss keeps an arbitrary, reordered,
/// possibly torn subset of everything written since the last sync.
#[test]
fn torn_and_reordered_writes_are_all_or_nothing() {
    let mut rng = Rng::new(99);
    let mut crashes = 0;
    for n in 0.. {
        let mut committed = false;
        for _ in 0..4 {
            let disk = SimulatedDisk::default();
            let b = open(&disk);
            b.commit(batch(1, 400)).unwrap();
            disk.0.lock().unwrap().torn = true;
            disk.fail_after(n);
            let result = b.commit(batch(2, 400));
            drop(b);
            disk.power_loss_reordered(&mut rng);
            crashes += 1;
            let expected = if result.is_ok() { vec![2] } else { vec![1] };
            let b = open(&disk);
            assert_eq!(
                tags(&b),
                (800, expected),
                "failure after {n} disk operations (commit {result:?}) left a partial commit"
            );
            b.commit(batch(3, 10)).unwrap();
            committed |= result.is_ok();
        }
        if committed {
            break;
        }
    }
    println!("{crashes} torn and reordered power losses, none partial");
    assert!(crashes > 12);
}
