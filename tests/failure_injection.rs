//! Failure injection on the commit path, redb-style: the redb backend runs over a simulated
//! disk that fails the N-th write or sync and, on "power loss", forgets everything not synced.
//! For every N until a commit gets through, a failed commit must leave the previous state
//! exactly, and a commit reported as done must be complete after the crash.

use std::io;
use std::sync::{Arc, Mutex};

use loci::storage::{Backend, RedbBackend, Table, WriteBatch};
use redb::{Database, StorageBackend};

#[derive(Debug, Default)]
struct Disk {
    durable: Vec<u8>,
    volatile: Vec<u8>,
    /// Writes and syncs allowed before every later one fails.
    budget: Option<usize>,
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
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        let mut d = self.0.lock().unwrap();
        Self::spend(&mut d)?;
        let end = offset as usize + data.len();
        if d.volatile.len() < end {
            d.volatile.resize(end, 0);
        }
        d.volatile[offset as usize..end].copy_from_slice(data);
        Ok(())
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
        w.put(Table::Log, i.to_be_bytes().to_vec(), vec![tag; 300]);
        w.put(Table::Edges, i.to_be_bytes().to_vec(), vec![tag; 40]);
    }
    w.put(Table::Meta, b"counters".to_vec(), vec![tag]);
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
