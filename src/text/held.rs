//! BM25's statistics of the documents the index holds now, whatever it held before.
//!
//! tantivy's own (a [`Searcher`] as [`Bm25StatisticsProvider`]) count a document deleted but not
//! yet merged away in the number of documents, in each term's document frequency and in the
//! field's tokens; and a merge of segments with deletes records the tokens it keeps as
//! estimated from the lengths it keeps. Scores then followed the index's history: a store
//! answered otherwise than its own index rebuilt by `replay` or a repair, and than itself after
//! a background merge. Here each statistic is of the documents held, and every document's
//! length is the one BM25 scores it with (its field norm), so a set of documents scores alike
//! however it came to be.

use std::collections::HashMap;
use std::sync::Mutex;

use tantivy::fieldnorm::FieldNormReader;
use tantivy::index::SegmentId;
use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocSet, Searcher, SegmentReader, Term, TERMINATED};

/// Each segment's total of its held documents' lengths in a field, kept for the segment's
/// deletes as they were when it was counted: a segment never changes but by more deletes, so
/// only a new segment, or one with new deletes, is counted again (a byte a document, the
/// first search after an open counts the whole index once).
///
/// And each term's count of held documents in a segment with deletes, which reads the term's
/// postings: a search asks for it twice (tantivy's weight, and the hits scored again), and an
/// agent asks of the same words again and again.
#[derive(Default)]
pub(crate) struct HeldCounts {
    /// By segment and field: the deleted documents counted, and the total.
    totals: Mutex<HashMap<(SegmentId, Field), (u32, u64)>>,
    /// By segment and term: the deleted documents counted, and the term's held documents.
    doc_freqs: Mutex<HashMap<(SegmentId, Term), (u32, u64)>>,
}

/// Most term counts kept; past it they are all forgotten and counted again as asked.
const MOST_DOC_FREQS: usize = 1 << 16;

impl HeldCounts {
    /// The total length in `field` of the documents `segment` holds.
    fn lengths(
        &self,
        searcher: &Searcher,
        segment: &SegmentReader,
        field: Field,
    ) -> tantivy::Result<u64> {
        let key = (segment.segment_id(), field);
        let deleted = segment.num_deleted_docs();
        let known = self
            .totals
            .lock()
            .ok()
            .and_then(|totals| totals.get(&key).copied());
        if let Some((_, total)) = known.filter(|(counted, _)| *counted == deleted) {
            return Ok(total);
        }
        let total = lengths_held(segment, field)?;
        // A poisoned lock only loses the cache: each total is counted again.
        if let Ok(mut totals) = self.totals.lock() {
            // Segments merged away are forgotten, so that the map stays the size of the index.
            let current: std::collections::HashSet<SegmentId> = searcher
                .segment_readers()
                .iter()
                .map(SegmentReader::segment_id)
                .collect();
            totals.retain(|(id, _), _| current.contains(id));
            totals.insert(key, (deleted, total));
        }
        Ok(total)
    }

    /// [`doc_freq_held`], kept for the segment's deletes as they were when it was counted.
    fn doc_freq(&self, segment: &SegmentReader, term: &Term) -> tantivy::Result<u64> {
        if !segment.has_deletes() {
            return doc_freq_held(segment, term);
        }
        let key = (segment.segment_id(), term.clone());
        let deleted = segment.num_deleted_docs();
        let known = (self.doc_freqs.lock().ok())
            .and_then(|counts| counts.get(&key).copied())
            .filter(|(counted, _)| *counted == deleted);
        if let Some((_, held)) = known {
            return Ok(held);
        }
        let held = doc_freq_held(segment, term)?;
        if let Ok(mut counts) = self.doc_freqs.lock() {
            if counts.len() >= MOST_DOC_FREQS {
                counts.clear();
            }
            counts.insert(key, (deleted, held));
        }
        Ok(held)
    }
}

/// The sum of the field norms of the documents `segment` holds in `field`. A field without
/// norms scores every document as of length 1 (tantivy's constant norm).
fn lengths_held(segment: &SegmentReader, field: Field) -> tantivy::Result<u64> {
    let Some(norms) = segment.fieldnorms_readers().get_field(field)? else {
        return Ok(u64::from(segment.num_docs()));
    };
    let mut of_norm = [0u64; 256];
    match segment.alive_bitset() {
        None => {
            for doc in 0..segment.max_doc() {
                of_norm[usize::from(norms.fieldnorm_id(doc))] += 1;
            }
        }
        Some(alive) => {
            for doc in alive.iter_alive() {
                of_norm[usize::from(norms.fieldnorm_id(doc))] += 1;
            }
        }
    }
    Ok((0..=u8::MAX)
        .map(|id| of_norm[usize::from(id)] * u64::from(FieldNormReader::id_to_fieldnorm(id)))
        .sum())
}

/// How many of the documents `segment` holds contain `term`: its postings counted where the
/// segment has deletes (they list deleted documents until a merge drops them).
fn doc_freq_held(segment: &SegmentReader, term: &Term) -> tantivy::Result<u64> {
    let inverted = segment.inverted_index(term.field())?;
    let Some(alive) = segment.alive_bitset() else {
        return Ok(u64::from(inverted.doc_freq(term)?));
    };
    let Some(mut postings) = inverted.read_postings(term, IndexRecordOption::Basic)? else {
        return Ok(0);
    };
    let mut held = 0;
    let mut doc = postings.doc();
    while doc != TERMINATED {
        held += u64::from(alive.is_alive(doc));
        doc = postings.advance();
    }
    Ok(held)
}

/// The statistics of what `searcher` holds, for its scoring.
pub(crate) struct HeldStatistics<'a> {
    pub(crate) searcher: &'a Searcher,
    pub(crate) counts: &'a HeldCounts,
}

impl Bm25StatisticsProvider for HeldStatistics<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        self.searcher
            .segment_readers()
            .iter()
            .map(|segment| self.counts.lengths(self.searcher, segment, field))
            .sum()
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.searcher.num_docs())
    }

    /// How many held documents contain `term`.
    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.searcher
            .segment_readers()
            .iter()
            .map(|segment| self.counts.doc_freq(segment, term))
            .sum()
    }
}
