//! The index's files read through a check of each block's checksum, at the block's first
//! read, as the state snapshot's blocks are (`mapped::Section`).
//!
//! Every tantivy file ends with a checksum of its whole body, which only a read of the whole
//! file can check: an open once did it for every file, which was most of the open at 100M
//! edges (0.4 s warm, 1 s from disk), so an open checks a file only the first time it meets
//! it as it is (by length and modification time). A byte changed later in place, with the
//! file's length and time kept (a disk's own damage), was then read by tantivy unchecked, and
//! tantivy panics on some damage, loops forever on other (a seek past its last document id,
//! met in a skip list), and serves the rest as wrong hits. So the pass that checks a file's
//! checksum also records the checksum of each of its blocks of [`BLOCK`] bytes, in the index's
//! directory ([`Checked`]), and later opens read the file through a handle ([`Verified`])
//! that checks each block the first time a read covers it: a read of damage fails with an
//! error, before tantivy decodes it. A process pays once for what its reads ask for: a term's
//! postings list, and whole structures where tantivy asks for them whole (a field's norms, the
//! term dictionary's index). A file tantivy writes has its blocks' checksums taken as it is
//! written ([`Checksumming`]), so the segments a long-running writer commits and merges are
//! checked the same way.

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::footer::Footer;
use tantivy::directory::{
    AntiCallToken, Directory, DirectoryLock, FileHandle, FileSlice, Lock, MmapDirectory,
    OwnedBytes, TerminatingWrite, WatchCallback, WatchHandle, WritePtr,
};
use tantivy::HasLen;

/// Bytes per checked block, a page: a search's first read of a short posting list checks
/// little more than it reads; 4 bytes of checksum per block, 0.1% of the index.
pub(crate) const BLOCK: usize = 4096;

/// The checksums of one file's blocks, and which of them a read has checked.
#[derive(Debug)]
pub(crate) struct FileBlocks {
    len: u64,
    crcs: Vec<u32>,
    checked: Vec<AtomicU64>,
    unchecked: AtomicUsize,
    /// Set once every block is checked: the usual read then costs one load.
    all_checked: AtomicBool,
}

impl FileBlocks {
    pub(crate) fn new(len: u64, crcs: Vec<u32>) -> FileBlocks {
        let words = crcs.len().div_ceil(64);
        FileBlocks {
            len,
            unchecked: AtomicUsize::new(crcs.len()),
            all_checked: AtomicBool::new(crcs.is_empty()),
            checked: (0..words).map(|_| AtomicU64::new(0)).collect(),
            crcs,
        }
    }

    /// The checksums of `bytes`' blocks.
    #[cfg(test)]
    fn of(bytes: &[u8]) -> FileBlocks {
        let crcs = bytes.chunks(BLOCK).map(crc32fast::hash).collect();
        FileBlocks::new(bytes.len() as u64, crcs)
    }

    /// The checksums of a file's blocks, every block taken as checked: the file was just
    /// checked whole against its checksum. (A read looks at the blocks' marks only until
    /// `all_checked` is set.)
    fn checked(len: u64, crcs: Vec<u32>) -> FileBlocks {
        let blocks = FileBlocks::new(len, crcs);
        blocks.all_checked.store(true, Ordering::Release);
        blocks
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    pub(crate) fn crcs(&self) -> &[u32] {
        &self.crcs
    }

    fn is_checked(&self, block: usize) -> bool {
        self.checked[block / 64].load(Ordering::Acquire) & (1 << (block % 64)) != 0
    }

    /// Checks the blocks `range` covers that no read has checked yet, reading them from
    /// `file`.
    fn check(&self, file: &dyn FileHandle, name: &Path, range: &Range<usize>) -> io::Result<()> {
        if self.all_checked.load(Ordering::Acquire) || range.is_empty() {
            return Ok(());
        }
        let len = self.len as usize;
        let end = range.end.div_ceil(BLOCK);
        // Past these, a block would have no checksum and no mark (`checked` has a bit for
        // each of `crcs`): the indexing below stays in bounds.
        if range.end > len || file.len() != len || end > self.crcs.len() {
            return Err(damaged(name, "it is not the length it was checked at"));
        }
        let mut block = range.start / BLOCK;
        while block < end {
            // A read of a whole column passes its checked blocks 64 at a time.
            if block.is_multiple_of(64)
                && block + 64 <= end
                && self.checked[block / 64].load(Ordering::Acquire) == u64::MAX
            {
                block += 64;
                continue;
            }
            if self.is_checked(block) {
                block += 1;
                continue;
            }
            let at = block * BLOCK;
            let bytes = file.read_bytes(at..(at + BLOCK).min(len))?;
            if self.crcs.get(block) != Some(&crc32fast::hash(bytes.as_slice())) {
                return Err(damaged(
                    name,
                    &format!("block {block} (bytes {at}..) does not match its checksum"),
                ));
            }
            let bit = 1 << (block % 64);
            // Two readers may check one block at once: only the one that sets the bit counts it.
            if self.checked[block / 64].fetch_or(bit, Ordering::AcqRel) & bit == 0
                && self.unchecked.fetch_sub(1, Ordering::AcqRel) == 1
            {
                self.all_checked.store(true, Ordering::Release);
            }
            block += 1;
        }
        Ok(())
    }
}

fn damaged(name: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}: the file is damaged", name.display()),
    )
}

/// The block checksums of every file checked so far, by file name: shared by the directory
/// (its handles) and the open that checks the files.
pub(crate) type BlockTable = Arc<RwLock<HashMap<PathBuf, Arc<FileBlocks>>>>;

/// A file whose reads check the blocks they cover.
#[derive(Debug)]
struct Verified {
    inner: Arc<dyn FileHandle>,
    blocks: Arc<FileBlocks>,
    name: PathBuf,
}

impl HasLen for Verified {
    fn len(&self) -> usize {
        self.inner.len()
    }
}

impl FileHandle for Verified {
    fn read_bytes(&self, range: Range<usize>) -> io::Result<OwnedBytes> {
        self.blocks.check(&*self.inner, &self.name, &range)?;
        self.inner.read_bytes(range)
    }
}

/// tantivy's memory-mapped directory, whose files with known block checksums are read through
/// [`Verified`]: those an open checked, and those written through it. Files without (not yet
/// checked, which the open checks whole first) are read as they are.
#[derive(Clone, Debug)]
pub(crate) struct VerifiedDirectory {
    inner: MmapDirectory,
    /// The directory `inner` maps (for the lock files, which tantivy's directory keeps private).
    root: PathBuf,
    blocks: BlockTable,
}

impl VerifiedDirectory {
    pub(crate) fn new(inner: MmapDirectory, root: &Path) -> VerifiedDirectory {
        VerifiedDirectory {
            inner,
            root: root.to_path_buf(),
            blocks: Arc::default(),
        }
    }

    pub(crate) fn blocks(&self) -> &BlockTable {
        &self.blocks
    }

    /// Checks the file at `path` whole against the checksum in its footer, in one pass that
    /// also takes its blocks' checksums (the whole file, footer and all, as the handles read
    /// it): `None` where the file is damaged.
    pub(crate) fn check_whole(&self, path: &Path) -> io::Result<Option<FileBlocks>> {
        let file = self
            .regular(path)
            .and_then(|()| self.inner.get_file_handle(path))
            .map_err(|e| io::Error::other(e.to_string()))?;
        let bytes = file.read_bytes(0..file.len())?;
        let Ok((footer, body)) = Footer::extract_footer(FileSlice::new(file)) else {
            return Ok(None);
        };
        let body_len = body.len();
        let mut whole = crc32fast::Hasher::new();
        let mut crcs = Vec::with_capacity(bytes.len().div_ceil(BLOCK));
        for (i, block) in bytes.as_slice().chunks(BLOCK).enumerate() {
            crcs.push(crc32fast::hash(block));
            let in_body = body_len.saturating_sub(i * BLOCK).min(block.len());
            whole.update(&block[..in_body]);
        }
        Ok((whole.finalize() == footer.crc).then(|| FileBlocks::checked(bytes.len() as u64, crcs)))
    }
}

impl Directory for VerifiedDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        self.regular(path)?;
        let inner = self.inner.get_file_handle(path)?;
        let blocks = self
            .blocks
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(path)
            .cloned();
        Ok(match blocks {
            Some(blocks) => Arc::new(Verified {
                inner,
                blocks,
                name: path.to_path_buf(),
            }),
            None => inner,
        })
    }
    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.blocks
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(path);
        self.inner.delete(path)
    }
    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.inner.exists(path)
    }
    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        let inner = self
            .inner
            .open_write(path)?
            .into_inner()
            .map_err(|e| OpenWriteError::wrap_io_error(e.into_error(), path.to_path_buf()))?;
        Ok(io::BufWriter::new(Box::new(Checksumming {
            inner,
            name: path.to_path_buf(),
            blocks: Arc::clone(&self.blocks),
            crcs: Vec::new(),
            block: crc32fast::Hasher::new(),
            in_block: 0,
            len: 0,
        })))
    }
    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.regular(path)?;
        self.inner.atomic_read(path)
    }
    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        self.inner.atomic_write(path, data)?;
        self.readable_as_the_directory(path)
    }
    fn sync_directory(&self) -> io::Result<()> {
        self.inner.sync_directory()
    }
    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        match self.inner.acquire_lock(lock) {
            Err(LockError::IoError(e)) if crate::error::is_refusal(&e) => {
                self.lock_without_writing(lock, e)
            }
            other => other,
        }
    }
    fn watch(&self, callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.inner.watch(callback)
    }
}

impl VerifiedDirectory {
    /// Refuses a file that is there but is not a regular file: tantivy's open of a FIFO put
    /// in place of `meta.json` or a segment file waited for a writer forever (helper-111
    /// probe). Refused, it is damage like any other, and the index is rebuilt. A file not
    /// there is left to tantivy, which says so in its own terms.
    fn regular(&self, path: &Path) -> Result<(), OpenReadError> {
        match std::fs::metadata(self.root.join(path)) {
            Ok(meta) if !meta.is_file() => Err(OpenReadError::wrap_io_error(
                io::Error::new(io::ErrorKind::InvalidData, "not a regular file"),
                path.to_path_buf(),
            )),
            _ => Ok(()),
        }
    }

    /// Gives a file tantivy wrote whole (`meta.json`, `.managed.json`) the read permissions
    /// of the index's directory: tantivy writes it through a temporary file, which is made
    /// readable by its owner alone whatever the umask, so another user who may read the
    /// store (a reader on a shared machine) could not open its index. A directory kept
    /// private keeps its files private.
    #[cfg(unix)]
    fn readable_as_the_directory(&self, path: &Path) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let dir_mode = std::fs::metadata(&self.root)?.permissions().mode();
        let file = self.root.join(path);
        let mode = std::fs::metadata(&file)?.permissions().mode();
        let wanted = mode | (dir_mode & 0o044);
        if wanted != mode {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(wanted))?;
        }
        Ok(())
    }

    #[cfg(not(unix))]
    fn readable_as_the_directory(&self, _path: &Path) -> io::Result<()> {
        Ok(())
    }

    /// A lock taken by a reader that cannot write the index's directory (a store on a read-only
    /// mount, or another user's): tantivy opens a lock file for writing, creating it, even for
    /// the lock a reader takes while it opens segments (`META_LOCK`, which keeps a writer's
    /// garbage collection from deleting them meanwhile). A lock on a file opened for reading
    /// excludes a writer's just the same, so the file is opened so when it is there; when it is
    /// not, no writer has collected garbage here since the index was made, and the reader's
    /// lock guards nothing. A writer's lock is refused as before.
    fn lock_without_writing(
        &self,
        lock: &Lock,
        refused: Arc<io::Error>,
    ) -> Result<DirectoryLock, LockError> {
        if !lock.is_blocking {
            return Err(LockError::IoError(refused));
        }
        match std::fs::File::open(self.root.join(&lock.filepath)) {
            Ok(file) => {
                file.lock().map_err(LockError::wrap_io_error)?;
                Ok(DirectoryLock::from(Box::new(file)))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(DirectoryLock::from(Box::new(()))),
            Err(e) => Err(LockError::wrap_io_error(e)),
        }
    }
}

/// A file tantivy writes (a commit's or a merge's segment), whose blocks' checksums are taken
/// as the bytes go by and registered when it is done: its reads are checked like those of a
/// file an open checked (its bytes are the ones written; damage made in place afterwards fails
/// the read). The next open checks it whole and lists it.
struct Checksumming {
    inner: Box<dyn TerminatingWrite + Send + Sync>,
    name: PathBuf,
    blocks: BlockTable,
    crcs: Vec<u32>,
    block: crc32fast::Hasher,
    in_block: usize,
    len: u64,
}

impl Checksumming {
    fn take(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (head, rest) = bytes.split_at((BLOCK - self.in_block).min(bytes.len()));
            self.block.update(head);
            self.in_block += head.len();
            self.len += head.len() as u64;
            if self.in_block == BLOCK {
                self.crcs.push(std::mem::take(&mut self.block).finalize());
                self.in_block = 0;
            }
            bytes = rest;
        }
    }
}

impl io::Write for Checksumming {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.take(&buf[..written.min(buf.len())]);
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl TerminatingWrite for Checksumming {
    fn terminate_ref(&mut self, token: AntiCallToken) -> io::Result<()> {
        self.inner.terminate_ref(token)?;
        if self.in_block > 0 {
            self.crcs.push(std::mem::take(&mut self.block).finalize());
            self.in_block = 0;
        }
        let blocks = FileBlocks::new(self.len, std::mem::take(&mut self.crcs));
        self.blocks
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(self.name.clone(), Arc::new(blocks));
        Ok(())
    }
}

/// What `text/loci-checked` records: each file an open has checked whole, as it was then
/// (length and modification time) and the checksums of its blocks. Binary, versioned by its
/// first line; closed by a CRC-32 of what precedes it. A list that does not read (damaged, or
/// of an older build, which listed no blocks) reads as empty: every file is checked again.
#[derive(Default)]
pub(crate) struct Checked {
    pub(crate) files: HashMap<String, (u128, Arc<FileBlocks>)>,
}

const CHECKED_MAGIC: &[u8] = b"loci-checked 2\n";

/// The longest list read: that of a 256 GiB index.
const MAX_CHECKED_BYTES: u64 = 256 << 20;

impl Checked {
    pub(crate) fn read(path: &Path) -> Checked {
        // Only a regular file, of a size a list can have (4 bytes per 4 KiB of index): a FIFO
        // in its place would wait for a writer forever, a device or a huge file read on.
        let readable =
            std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() <= MAX_CHECKED_BYTES);
        readable
            .then(|| std::fs::read(path).ok())
            .flatten()
            .and_then(|bytes| Checked::decode(&bytes))
            .unwrap_or_default()
    }

    fn decode(bytes: &[u8]) -> Option<Checked> {
        let body_len = bytes.len().checked_sub(4)?;
        let (body, crc) = bytes.split_at(body_len);
        if crc32fast::hash(body).to_le_bytes() != crc {
            return None;
        }
        let mut r = body.strip_prefix(CHECKED_MAGIC)?;
        let mut take = |n: usize| -> Option<&[u8]> {
            let (head, rest) = r.split_at_checked(n)?;
            r = rest;
            Some(head)
        };
        let mut files = HashMap::new();
        let count = u32::from_le_bytes(take(4)?.try_into().ok()?);
        for _ in 0..count {
            let name_len = u16::from_le_bytes(take(2)?.try_into().ok()?) as usize;
            let name = std::str::from_utf8(take(name_len)?).ok()?.to_string();
            let len = u64::from_le_bytes(take(8)?.try_into().ok()?);
            let time = u128::from_le_bytes(take(16)?.try_into().ok()?);
            let blocks = usize::try_from(len.div_ceil(BLOCK as u64)).ok()?;
            // Bounded by what is there: a damaged count cannot make a huge allocation.
            let crcs = take(blocks.checked_mul(4)?)?
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            files.insert(name, (time, Arc::new(FileBlocks::new(len, crcs))));
        }
        Some(Checked { files })
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        // A name too long for its two-byte length is left out: its file is checked again.
        let mut names: Vec<&String> = self
            .files
            .keys()
            .filter(|n| u16::try_from(n.len()).is_ok())
            .collect();
        names.sort();
        let mut out = CHECKED_MAGIC.to_vec();
        out.extend((names.len() as u32).to_le_bytes());
        for name in names {
            let (time, blocks) = &self.files[name];
            out.extend((name.len() as u16).to_le_bytes());
            out.extend(name.as_bytes());
            out.extend(blocks.len().to_le_bytes());
            out.extend(time.to_le_bytes());
            for crc in blocks.crcs() {
                out.extend(crc.to_le_bytes());
            }
        }
        let crc = crc32fast::hash(&out);
        out.extend(crc.to_le_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read checks the blocks it covers, once each, and fails on a block whose bytes are
    /// not those its checksum was taken of; every block checked, reads cost a load.
    #[test]
    fn a_read_checks_the_blocks_it_covers_and_fails_on_a_changed_one() {
        let original: Vec<u8> = (0..(200 * BLOCK + 100) as u32)
            .map(|i| (i % 251) as u8)
            .collect();
        let blocks = FileBlocks::of(&original);
        let name = Path::new("f.idx");
        let mut changed = original.clone();
        changed[130 * BLOCK + 7] ^= 1;
        let changed = OwnedBytes::new(changed);
        let sound = OwnedBytes::new(original.clone());
        // Blocks 0..130 and the last one read sound; a read of block 130 fails.
        blocks.check(&changed, name, &(0..130 * BLOCK)).unwrap();
        blocks
            .check(&changed, name, &(200 * BLOCK..200 * BLOCK + 100))
            .unwrap();
        let e = blocks
            .check(&changed, name, &(130 * BLOCK + 5..130 * BLOCK + 6))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("block 130"), "{e}");
        // Checked blocks are not read again: the changed file passes where they lie.
        blocks.check(&changed, name, &(64..129 * BLOCK)).unwrap();
        assert!(!blocks.all_checked.load(Ordering::Acquire));
        blocks.check(&sound, name, &(0..sound.len())).unwrap();
        assert!(blocks.all_checked.load(Ordering::Acquire));
        assert_eq!(blocks.unchecked.load(Ordering::Acquire), 0);
        // A read past the length it was checked at is damage, not a panic.
        let longer = FileBlocks::of(&original[..BLOCK]);
        assert!(longer.check(&sound, name, &(0..10)).is_err());
        blocks.check(&sound, name, &(5..5)).unwrap();
    }

    #[test]
    fn the_checked_list_reads_back_and_a_damaged_one_reads_as_empty() {
        let mut checked = Checked::default();
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        checked
            .files
            .insert("a.idx".into(), (17, Arc::new(FileBlocks::of(&bytes))));
        checked
            .files
            .insert("b.term".into(), (u128::MAX, Arc::new(FileBlocks::of(&[]))));
        let encoded = checked.encode();
        let back = Checked::decode(&encoded).unwrap();
        assert_eq!(back.files.len(), 2);
        let (time, blocks) = &back.files["a.idx"];
        assert_eq!((*time, blocks.len()), (17, 10_000));
        assert_eq!(blocks.crcs(), FileBlocks::of(&bytes).crcs());
        assert_eq!(blocks.crcs().len(), 3);
        for at in 0..encoded.len() {
            let mut damaged = encoded.clone();
            damaged[at] ^= 0x10;
            assert!(Checked::decode(&damaged).is_none(), "byte {at}");
        }
        assert!(Checked::decode(&encoded[..encoded.len() - 1]).is_none());
        assert!(
            Checked::decode(b"40 17 a.idx\n").is_none(),
            "the list of an older build"
        );
    }
}
