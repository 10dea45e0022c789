//! Rename detection as `git diff -M` does it by default, so a review and `git_history log
//! --follow` pair the same files as git (issue 12 §5: gix's line-diff similarity turned two of
//! git's six tokio renames, 50–53 % similar, into a deletion and an addition).
//!
//! The rules, from git's `diffcore-rename.c` and `diffcore-delta.c`:
//! 1. **Exact renames** first: a deleted and an added entry with the same object id (links and
//!    submodules only with the same mode); among several sources, one with the same file name
//!    wins, else the first.
//! 2. **Same file name**: a remaining source and destination whose file name is unique on both
//!    sides pair when their score is at least 75 % (git's basename step).
//! 3. **Similarity**: every remaining regular-file destination is scored against every
//!    remaining regular-file source (at most 1000 × 1000 pairs, git's `diff.renameLimit`); each
//!    destination keeps its 4 best sources; all those pairs are taken best score first (same
//!    file name first among equal scores), each source and destination once, down to **50 %**
//!    (`-M` default).
//!
//! The score is git's: both blobs are cut into chunks ending at a newline or after 64 bytes
//! (CR of a CRLF ignored in text), each chunk hashed; the bytes of the source's chunks found in
//! the destination (per hash, the smaller count) are the "copied" bytes, and
//! `score = copied × 60000 / max(size)`, where 60000 is 100 %. A pair whose sizes differ by more
//! than half the larger one scores 0.

use std::collections::HashMap;

use gix::ObjectId;
use gix::object::tree::EntryKind;

/// 100 % in git's scores.
const MAX_SCORE: u64 = 60_000;
/// `git diff -M`'s default minimum: 50 %.
const MIN_SCORE: u64 = 30_000;
/// The basename step's minimum: halfway between [`MIN_SCORE`] and 100 %.
const BASENAME_MIN_SCORE: u64 = MIN_SCORE + (MAX_SCORE - MIN_SCORE) / 2;
/// `diff.renameLimit`'s default: no similarity search beyond this many sources × destinations
/// (squared).
const RENAME_LIMIT: u64 = 1000;
/// Candidates kept per destination (git's `NUM_CANDIDATE_PER_DST`).
const CANDIDATES_PER_DST: usize = 4;
/// git's chunk hash modulus.
const HASHBASE: u32 = 107_927;

/// One side of a candidate pair: a deleted (source) or added (destination) tree entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry<'a> {
    /// Repository-relative path.
    pub path: &'a str,
    /// Blob, executable blob, link or submodule (trees never take part).
    pub kind: EntryKind,
    /// The object id.
    pub id: ObjectId,
}

/// The renames among deleted `sources` and added `dests`, as `(source index, destination
/// index)` pairs, each index at most once, by git's rules (module docs). `read` returns a blob's
/// bytes.
///
/// # Errors
/// Whatever `read` returns for a blob it cannot read (a partial clone's missing blob): the
/// caller then goes on without rename detection.
pub(crate) fn detect<E>(
    sources: &[Entry<'_>],
    dests: &[Entry<'_>],
    mut read: impl FnMut(ObjectId) -> Result<Vec<u8>, E>,
) -> Result<Vec<(usize, usize)>, E> {
    let mut pairs = Vec::new();
    let mut src_used = vec![false; sources.len()];
    let mut dst_done = vec![false; dests.len()];

    // 1. Exact renames.
    for (d, dst) in dests.iter().enumerate() {
        let mut best: Option<(usize, u8)> = None;
        for (s, src) in sources.iter().enumerate() {
            if src_used[s] || src.id != dst.id {
                continue;
            }
            let regular = is_regular(src.kind) && is_regular(dst.kind);
            if !regular && src.kind != dst.kind {
                continue;
            }
            let score = 1 + u8::from(file_name(src.path) == file_name(dst.path));
            if best.is_none_or(|(_, b)| score > b) {
                best = Some((s, score));
                if score == 2 {
                    break;
                }
            }
        }
        if let Some((s, _)) = best {
            src_used[s] = true;
            dst_done[d] = true;
            pairs.push((s, d));
        }
    }

    let remaining_src: Vec<usize> = (0..sources.len())
        .filter(|&s| !src_used[s] && is_regular(sources[s].kind))
        .collect();
    let remaining_dst: Vec<usize> = (0..dests.len())
        .filter(|&d| !dst_done[d] && is_regular(dests[d].kind))
        .collect();
    if remaining_src.is_empty() || remaining_dst.is_empty() {
        return Ok(pairs);
    }
    let mut blobs: HashMap<ObjectId, Blob> = HashMap::new();
    let mut blob = |blobs: &mut HashMap<ObjectId, Blob>, id: ObjectId| -> Result<(), E> {
        if let std::collections::hash_map::Entry::Vacant(slot) = blobs.entry(id) {
            slot.insert(Blob::new(read(id)?));
        }
        Ok(())
    };

    // 2. Unique file names on both sides.
    let unique = |indices: &[usize], entries: &[Entry<'_>]| {
        let mut count: HashMap<&str, (usize, usize)> = HashMap::new();
        for &i in indices {
            count.entry(file_name(entries[i].path)).or_insert((0, i)).0 += 1;
        }
        count
            .into_iter()
            .filter(|(_, (n, _))| *n == 1)
            .map(|(name, (_, i))| (name.to_owned(), i))
            .collect::<HashMap<String, usize>>()
    };
    let unique_src = unique(&remaining_src, sources);
    let unique_dst = unique(&remaining_dst, dests);
    for &s in &remaining_src {
        let name = file_name(sources[s].path);
        let Some(&d) = unique_src
            .get(name)
            .filter(|&&u| u == s)
            .and_then(|_| unique_dst.get(name))
        else {
            continue;
        };
        blob(&mut blobs, sources[s].id)?;
        blob(&mut blobs, dests[d].id)?;
        let score = score(
            &blobs[&sources[s].id],
            &blobs[&dests[d].id],
            BASENAME_MIN_SCORE,
        );
        if score >= BASENAME_MIN_SCORE {
            src_used[s] = true;
            dst_done[d] = true;
            pairs.push((s, d));
        }
    }

    // 3. Similarity, best pairs first.
    let remaining_src: Vec<usize> = remaining_src
        .into_iter()
        .filter(|&s| !src_used[s])
        .collect();
    let remaining_dst: Vec<usize> = remaining_dst
        .into_iter()
        .filter(|&d| !dst_done[d])
        .collect();
    let (n_src, n_dst) = (remaining_src.len() as u64, remaining_dst.len() as u64);
    if n_src == 0
        || n_dst == 0
        || !((n_dst <= RENAME_LIMIT || n_src <= RENAME_LIMIT)
            && n_dst * n_src <= RENAME_LIMIT * RENAME_LIMIT)
    {
        return Ok(pairs);
    }
    for &i in remaining_src.iter() {
        blob(&mut blobs, sources[i].id)?;
    }
    for &i in remaining_dst.iter() {
        blob(&mut blobs, dests[i].id)?;
    }
    let mut matrix: Vec<Candidate> = Vec::with_capacity(remaining_dst.len() * CANDIDATES_PER_DST);
    for &d in &remaining_dst {
        let mut best = [Candidate::UNUSED; CANDIDATES_PER_DST];
        for &s in &remaining_src {
            let candidate = Candidate {
                dst: Some(d),
                src: s,
                score: score(&blobs[&sources[s].id], &blobs[&dests[d].id], MIN_SCORE),
                same_name: file_name(sources[s].path) == file_name(dests[d].path),
            };
            // git's record_if_better: replace the worst slot if the candidate is better.
            let mut worst = 0;
            for i in 1..CANDIDATES_PER_DST {
                if best[i].cmp_rank(&best[worst]).is_gt() {
                    worst = i;
                }
            }
            if best[worst].cmp_rank(&candidate).is_gt() {
                best[worst] = candidate;
            }
        }
        matrix.extend(best);
    }
    matrix.sort_by(Candidate::cmp_rank); // stable, as git's STABLE_QSORT
    for c in matrix {
        let Some(d) = c.dst.filter(|_| c.score >= MIN_SCORE) else {
            break;
        };
        if dst_done[d] || src_used[c.src] {
            continue;
        }
        dst_done[d] = true;
        src_used[c.src] = true;
        pairs.push((c.src, d));
    }
    Ok(pairs)
}

/// A scored (source, destination) pair of the similarity matrix.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    /// `None`: an unused slot.
    dst: Option<usize>,
    src: usize,
    score: u64,
    same_name: bool,
}

impl Candidate {
    const UNUSED: Candidate = Candidate {
        dst: None,
        src: 0,
        score: 0,
        same_name: false,
    };

    /// git's score_compare: `Less` when `self` ranks before `other` (unused slots last, then
    /// higher score, then same file name).
    fn cmp_rank(&self, other: &Candidate) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        match (self.dst, other.dst) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            _ if self.score == other.score => other.same_name.cmp(&self.same_name),
            _ => other.score.cmp(&self.score),
        }
    }
}

/// A blob's size and its chunk-hash counts, sorted by hash (git's `spanhash_top`).
struct Blob {
    size: u64,
    spans: Vec<(u32, u64)>,
}

impl Blob {
    /// git's hash_chars: chunks end at `\n` or after 64 bytes; a CR before LF is skipped in
    /// text (no NUL in the first 8000 bytes).
    fn new(data: Vec<u8>) -> Blob {
        let is_text = !data[..data.len().min(8000)].contains(&0);
        let mut counts: HashMap<u32, u64> = HashMap::new();
        let (mut accum1, mut accum2, mut n) = (0u32, 0u32, 0u64);
        let mut i = 0;
        while i < data.len() {
            let c = data[i];
            i += 1;
            if is_text && c == b'\r' && data.get(i) == Some(&b'\n') {
                continue;
            }
            let old1 = accum1;
            accum1 = (accum1 << 7) ^ (accum2 >> 25);
            accum2 = (accum2 << 7) ^ (old1 >> 25);
            accum1 = accum1.wrapping_add(u32::from(c));
            n += 1;
            if n < 64 && c != b'\n' {
                continue;
            }
            let hash = accum1.wrapping_add(accum2.wrapping_mul(0x61)) % HASHBASE;
            *counts.entry(hash).or_insert(0) += n;
            n = 0;
            accum1 = 0;
            accum2 = 0;
        }
        if n > 0 {
            let hash = accum1.wrapping_add(accum2.wrapping_mul(0x61)) % HASHBASE;
            *counts.entry(hash).or_insert(0) += n;
        }
        let mut spans: Vec<(u32, u64)> = counts.into_iter().collect();
        spans.sort_unstable();
        Blob {
            size: data.len() as u64,
            spans,
        }
    }
}

/// git's estimate_similarity for two regular files: 0..=[`MAX_SCORE`].
fn score(src: &Blob, dst: &Blob, min_score: u64) -> u64 {
    let max_size = src.size.max(dst.size);
    let delta = max_size - src.size.min(dst.size);
    if max_size * (MAX_SCORE - min_score) < delta * MAX_SCORE || dst.size == 0 {
        return 0;
    }
    // git's diffcore_count_changes: per hash, the bytes both sides have.
    let mut copied = 0;
    let mut d = dst.spans.iter().peekable();
    for &(hash, src_count) in &src.spans {
        while d.next_if(|(h, _)| *h < hash).is_some() {}
        if let Some((_, dst_count)) = d.next_if(|(h, _)| *h == hash) {
            copied += src_count.min(*dst_count);
        }
    }
    copied * MAX_SCORE / max_size
}

fn is_regular(kind: EntryKind) -> bool {
    matches!(kind, EntryKind::Blob | EntryKind::BlobExecutable)
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(text: &str) -> Blob {
        Blob::new(text.as_bytes().to_vec())
    }

    #[test]
    fn identical_text_scores_100_percent_and_crlf_is_ignored() {
        let text = "fn main() {\n    println!(\"hi\");\n}\n";
        assert_eq!(score(&blob(text), &blob(text), MIN_SCORE), MAX_SCORE);
        // git counts the CRLF file's size with its CRs, its chunks without them.
        let crlf = text.replace('\n', "\r\n");
        let s = score(&blob(text), &blob(&crlf), MIN_SCORE);
        assert_eq!(s, text.len() as u64 * MAX_SCORE / crlf.len() as u64);
    }

    #[test]
    fn moved_lines_still_count_as_copied() {
        // A line diff sees two thirds of this file removed and re-added; git's chunk hashes
        // see every line kept.
        let a = "alpha line one\nbeta line two\ngamma line three\n";
        let b = "gamma line three\nbeta line two\nalpha line one\n";
        assert_eq!(score(&blob(a), &blob(b), MIN_SCORE), MAX_SCORE);
    }

    #[test]
    fn sizes_too_different_score_zero() {
        let a = "x\n".repeat(10);
        let b = "x\n".repeat(21);
        assert_eq!(score(&blob(&a), &blob(&b), MIN_SCORE), 0);
    }
}
