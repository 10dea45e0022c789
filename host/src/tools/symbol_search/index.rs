//! The symbol index: tags per (language, blob id), persisted in a redb file and cached in
//! memory.
//!
//! A blob's tags never change, so the key is the blob's object id (plus the language, since a
//! blob parses differently as `.js` and `.ts`) and the tables are named after
//! [`INDEX_VERSION`](super::languages::INDEX_VERSION): a grammar, query or layout change bumps
//! the version and starts fresh tables (older ones are dropped on the next writable open). A
//! commit's tree and the work tree share the key space, the work tree's ids being computed with
//! gix's blob hashing of the file's bytes, so an uncommitted copy of a committed file is
//! already indexed.
//!
//! **Tables.** `symbol_tags_v*`: blob key -> postcard-encoded [`FileTags`].
//! `symbol_blobs_v*`: blob key -> tag count, the set of indexed blobs (small, so asking whether
//! a blob is indexed does not read its tags). `symbol_names_v*`: ([`fold`]ed name, name, batch)
//! -> the keys of the blobs of that write batch with a tag of that name: one entry per name and
//! batch rather than per name and blob, so a batch adds one entry per distinct name (a
//! multimap entry per blob made a first index of 120,000 files rewrite most of the table at
//! each batch). The three are written together, in one transaction per batch of parsed blobs
//! ([`WRITE_BATCH_FILES`]), so a blob is in all or none. `symbol_stamps_v*`: absolute path of a
//! work tree file -> its [`Stamp`] and blob id. `symbol_trees_v*`: a commit's root tree id ->
//! its supported files (path, blob id), so a new process does not traverse the tree (at most
//! [`MAX_STORED_TREES`]).
//!
//! **Lookups.** A lookup says which names it wants ([`Wanted`]: one name, the names whose fold
//! starts with a string, all, or none): from the file it reads the matching keys of the names
//! table, decodes the tags of those blobs only, and for the other entries only checks the
//! blobs table (answering them as empty). On tokio (793 files) an exact query decodes ~40
//! blobs' tags instead of 793. A lookup may also be given a filter on file bytes
//! (`symbol_search`'s prefilter): files not indexed that the filter refuses are not parsed and
//! not stored, and stay unindexed (their tags unknown) until a lookup whose filter accepts
//! them, or one without a filter, parses them.
//!
//! **Processes.** The file is opened in redb's `MultiWriter` mode, so the daemon and
//! command-line calls share it. When it already has the current tables it is opened
//! read-only (a writable redb handle writes and syncs the file at open and at close); a
//! writable handle is opened on the first write. In memory, decoded tags are kept per key, and
//! a commit's list of indexed files per tree id, so a warm query in a long-running process
//! reads neither redb nor the object database. For the work tree, the blob id computed for a
//! file is kept with its [`Stamp`] (size, modification time, inode), in memory and in the
//! stamps table, so a warm work tree query (also in a new process) stats files instead of
//! reading and hashing them; files modified within the last two seconds are not trusted by
//! stamp (git's "racy" files). The caches are bounded (cleared when over [`MAX_CACHED_TAGS`]
//! tags, [`MAX_CACHED_TREES`] trees or [`MAX_CACHED_STAMPS`] files; the stamps table is
//! emptied when it would hold more than [`MAX_CACHED_STAMPS`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use redb::{
    ConcurrencyMode, Database, MultimapTableHandle, ReadableDatabase, ReadableTable,
    ReadableTableMetadata, TableDefinition, TableHandle,
};

use super::languages::{Extractor, FileTags, INDEX_VERSION, Lang, extract};
use crate::error::{GatewayError, codes};

/// File name of the index in the state dir.
pub const FILE_NAME: &str = "symbols.redb";
/// The in-memory tag cache is cleared when it would hold more tags than this.
pub const MAX_CACHED_TAGS: usize = 4_000_000;
/// The in-memory tree listing cache is cleared when it would hold more trees than this.
pub const MAX_CACHED_TREES: usize = 64;
/// The trees table of the index file is emptied when it would hold more trees than this
/// (a listing is ~50 KB for 800 files).
pub const MAX_STORED_TREES: u64 = 256;
/// The work tree stamp cache is cleared when it would hold more files than this.
pub const MAX_CACHED_STAMPS: usize = 1_000_000;
/// A file modified this recently is not trusted by its stamp (it may change again within the
/// file system's timestamp granularity: git's "racy" files).
const RACY_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);
/// Parsed tags are stored in one write transaction per this many files (a lookup's writer
/// thread): each commit syncs the file, and what waits (two batches at most) is in memory.
pub const WRITE_BATCH_FILES: usize = 4096;
/// ... or per this many bytes of encoded tags, whichever comes first.
pub const WRITE_BATCH_BYTES: usize = 32 * 1024 * 1024;
/// Page cache of the redb file.
const CACHE_BYTES: usize = 32 * 1024 * 1024;
/// Table prefixes; the full names end with the index version. Tags: blob key -> postcard
/// [`FileTags`]. Names: (folded name, name) -> blob keys of the blobs with a tag of that name
/// (see [`fold`]). Blobs: blob key -> number of tags, the blobs indexed (a small table, so
/// that asking whether a blob is indexed does not read its tags).
const TAGS_PREFIX: &str = "symbol_tags_v";
const NAMES_PREFIX: &str = "symbol_names_v";
const BLOBS_PREFIX: &str = "symbol_blobs_v";
/// Stamps: absolute path of a work tree file -> [`Stamp`] and blob id (see
/// [`Stamp::encode`]), so that a new process does not hash a settled file again.
const STAMPS_PREFIX: &str = "symbol_stamps_v";
/// Trees: a commit's root tree id -> its supported files, postcard `[(path, blob id)]`, so a
/// new process does not traverse the tree again.
const TREES_PREFIX: &str = "symbol_trees_v";

/// The names table: (folded name, name, batch) -> the blob keys of that batch holding the name
/// (see [`postings`]).
type NamesTable<'a> = TableDefinition<'a, (&'static str, &'static str, u64), &'static [u8]>;

/// The current (tags, names, blobs) table names.
fn table_names() -> (String, String, String) {
    (
        format!("{TAGS_PREFIX}{INDEX_VERSION}"),
        format!("{NAMES_PREFIX}{INDEX_VERSION}"),
        format!("{BLOBS_PREFIX}{INDEX_VERSION}"),
    )
}

/// The current stamps table.
fn stamps_table() -> String {
    format!("{STAMPS_PREFIX}{INDEX_VERSION}")
}

/// The current trees table.
fn trees_table() -> String {
    format!("{TREES_PREFIX}{INDEX_VERSION}")
}

/// How the file is opened: `MultiWriter`, so the daemon and command-line calls share it.
fn builder() -> redb::Builder {
    let mut builder = redb::Builder::new();
    builder
        .set_concurrency_mode(ConcurrencyMode::MultiWriter)
        .set_cache_size(CACHE_BYTES);
    builder
}

/// Whether the file has the current tables and none of an older version.
fn ready(db: &impl ReadableDatabase) -> Result<bool, redb::Error> {
    let txn = db.begin_read()?;
    let (tags, names, blobs) = table_names();
    let single = [tags, names, blobs, stamps_table(), trees_table()];
    let mut current = 0;
    for table in txn.list_tables()? {
        if single.iter().any(|name| table.name() == name) {
            current += 1;
        } else if is_ours(table.name()) {
            return Ok(false);
        }
    }
    // The names table of versions before 4 was a multimap.
    for table in txn.list_multimap_tables()? {
        if is_ours(table.name()) {
            return Ok(false);
        }
    }
    Ok(current == single.len())
}

/// The index file: read through a read-only handle when it was ready at open (a writable
/// redb handle writes and syncs the file when opened and when dropped, ~2 ms per process),
/// written through a writable handle opened on the first write.
struct Store {
    path: PathBuf,
    reader: Option<redb::ReadOnlyDatabase>,
    // Invariant: set (to `Some`) at open when `reader` is `None`.
    writer: OnceLock<Option<Database>>,
}

impl Store {
    fn begin_read(&self) -> Result<redb::ReadTransaction, redb::Error> {
        match (&self.reader, self.writer.get()) {
            (Some(reader), _) => Ok(reader.begin_read()?),
            (None, Some(Some(writer))) => Ok(writer.begin_read()?),
            (None, _) => Err(redb::Error::DatabaseAlreadyOpen),
        }
    }

    /// The writable handle, opened on first use; `None` when it cannot be opened (the tags
    /// are then not stored).
    fn writer(&self) -> Option<&Database> {
        self.writer
            .get_or_init(|| builder().create(&self.path).ok())
            .as_ref()
    }
}

/// Whether a table of the file is one of the index's (of any version).
fn is_ours(name: &str) -> bool {
    [
        TAGS_PREFIX,
        NAMES_PREFIX,
        BLOBS_PREFIX,
        STAMPS_PREFIX,
        TREES_PREFIX,
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
}

/// The key of a name in the names table: ASCII letters lower-cased, U+212A KELVIN SIGN to `k`
/// and U+0130 (capital I with dot) to `i`, every other character kept. Character by character,
/// so a name starting with `q` has a fold starting with `fold(q)`; and a name that
/// `symbol_search` takes for a case-insensitive prefix match of an ASCII lower-case query `q`
/// (its first bytes equal `q` ignoring ASCII case, or its `to_lowercase()` starts with `q`)
/// has a fold starting with `q`: the only characters whose lower case starts with an ASCII
/// letter are the ASCII letters and those two.
pub(crate) fn fold(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '\u{212A}' => 'k',
            '\u{130}' => 'i',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// Which names a [`SymbolIndex::lookup`] wants: from the file, only the tags of blobs with a
/// tag so named are read (the others are known to be indexed, and answered as empty).
pub(crate) struct Wanted<'a> {
    /// Where in the names table to look.
    pub scan: NameScan,
    /// Whether a name (among those `scan` visits) is wanted.
    pub accepts: &'a mut dyn FnMut(&str) -> bool,
}

impl Wanted<'_> {
    /// Whether a blob with these tags holds a name this lookup wants: one that the names table
    /// lists for it (see [`file_names`]), that [`Wanted::scan`] visits and that
    /// [`Wanted::accepts`]; what reading the table would find, for tags just parsed.
    fn wants(&mut self, file_tags: &FileTags) -> bool {
        let accepts = &mut *self.accepts;
        let visits = |name: &str| match &self.scan {
            NameScan::Nothing => false,
            NameScan::Exact(wanted) => name == wanted,
            NameScan::FoldedPrefix(prefix) => fold(name).starts_with(prefix.as_str()),
            NameScan::All => true,
        };
        file_names(file_tags).any(|name| visits(name) && accepts(name))
    }
}

/// The part of the names table a [`Wanted`] visits.
pub(crate) enum NameScan {
    /// The names equal to this one.
    Exact(String),
    /// The names whose [`fold`] starts with this (already folded) string.
    FoldedPrefix(String),
    /// Every name.
    All,
    /// None: the lookup only finds which blobs are indexed (and parses the others).
    Nothing,
}

/// One indexed file of a snapshot: where it is, its language and its blob id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Repository-relative path with `/` separators.
    pub path: Arc<str>,
    /// The language, by extension.
    pub lang: Lang,
    /// The blob id of the file's content.
    pub oid: gix::ObjectId,
}

impl FileEntry {
    fn key(&self) -> Key {
        Key {
            lang: self.lang.id(),
            oid: self.oid,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    lang: u8,
    oid: gix::ObjectId,
}

impl Key {
    fn bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(1 + self.oid.as_bytes().len());
        bytes.push(self.lang);
        bytes.extend_from_slice(self.oid.as_bytes());
        bytes
    }
}

/// Reads an entry's bytes for parsing, one per parsing thread (see [`SymbolIndex::lookup`]).
pub(crate) type Loader<'a> = Box<dyn FnMut(&FileEntry) -> Option<Vec<u8>> + 'a>;

/// Says from a file's language and bytes whether it may hold a wanted tag; a file it refuses
/// is not parsed (see [`SymbolIndex::lookup`]).
pub(crate) type Filter<'a> = dyn Fn(Lang, &[u8]) -> bool + Sync + 'a;

/// Where an index keeps its tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexMode {
    /// A redb file: a second process (or call) finds what this one parsed.
    Persistent,
    /// Memory only: the file could not be opened (e.g. an unwritable state dir).
    Memory,
}

impl IndexMode {
    /// `persistent` or `memory`, as in the tool's output.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexMode::Persistent => "persistent",
            IndexMode::Memory => "memory",
        }
    }
}

/// The tags of a snapshot's files, in the order asked, how many were parsed to get them and
/// how many are still unknown.
#[derive(Debug)]
pub struct Lookup {
    /// The tags of each entry asked for, in order; empty for an unindexed entry, and for an
    /// indexed one (read from the file or just parsed) that holds no name the lookup's
    /// [`Wanted`] accepts.
    pub tags: Vec<Arc<FileTags>>,
    /// Distinct blobs parsed by this call (not found in memory or in the file).
    pub parsed: usize,
    /// Entries whose tags are unknown: not indexed before, and their bytes were refused by the
    /// lookup's filter, so they were not parsed.
    pub unindexed: usize,
}

/// What a work tree file's metadata said when its blob id was computed: a file whose stamp is
/// unchanged is not read again to find its id (as git's index does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    len: u64,
    modified: std::time::SystemTime,
    inode: u64,
}

impl Stamp {
    /// The stamp of `meta`; `None` when the platform reports no modification time.
    pub fn of(meta: &std::fs::Metadata) -> Option<Stamp> {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        Some(Stamp {
            len: meta.len(),
            modified: meta.modified().ok()?,
            inode,
        })
    }
}

impl Stamp {
    /// The stamp and blob id as stored: length, seconds and nanoseconds of the modification
    /// time since the Unix epoch, inode (little-endian u64, u64, u32, u64), then the id's
    /// bytes. `None` for a modification time before the epoch.
    fn encode(&self, oid: &gix::ObjectId) -> Option<Vec<u8>> {
        let since = self.modified.duration_since(std::time::UNIX_EPOCH).ok()?;
        let mut out = Vec::with_capacity(28 + oid.as_bytes().len());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&since.as_secs().to_le_bytes());
        out.extend_from_slice(&since.subsec_nanos().to_le_bytes());
        out.extend_from_slice(&self.inode.to_le_bytes());
        out.extend_from_slice(oid.as_bytes());
        Some(out)
    }

    /// The inverse of [`Stamp::encode`]; `None` when malformed.
    fn decode(bytes: &[u8]) -> Option<(Stamp, gix::ObjectId)> {
        let (head, id) = bytes.split_at_checked(28)?;
        let u64_at = |at: usize| head[at..at + 8].try_into().ok().map(u64::from_le_bytes);
        let nanos = u32::from_le_bytes(head[16..20].try_into().ok()?);
        let modified =
            std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(u64_at(8)?, nanos))?;
        let oid = gix::ObjectId::try_from(id).ok()?;
        Some((
            Stamp {
                len: u64_at(0)?,
                modified,
                inode: u64_at(20)?,
            },
            oid,
        ))
    }
}

/// Key of a path in the stamps table: its bytes (on Unix; lossy UTF-8 elsewhere).
fn path_key(path: &Path) -> Vec<u8> {
    #[cfg(unix)]
    return std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec();
    #[cfg(not(unix))]
    return path.to_string_lossy().as_bytes().to_vec();
}

#[derive(Default)]
struct StampCache {
    map: HashMap<PathBuf, (Stamp, gix::ObjectId)>,
    // Work tree roots whose stored stamps were loaded from the file.
    loaded: HashSet<PathBuf>,
    // Remembered since the last save: (key, encoded stamp and id).
    unsaved: Vec<(Vec<u8>, Vec<u8>)>,
}

#[derive(Default)]
struct BlobCache {
    map: HashMap<Key, Arc<FileTags>>,
    tags: usize,
}

/// A symbol index (module docs). `Send + Sync`: the daemon opens one and shares it behind an
/// `Arc` through [`ToolContext::with_symbol_index`](crate::tools::ToolContext::with_symbol_index).
pub struct SymbolIndex {
    db: Option<Store>,
    // Invariant: why the index is memory-only; `None` when `db` is open.
    note: Option<String>,
    path: Option<PathBuf>,
    blobs: Mutex<BlobCache>,
    trees: Mutex<HashMap<gix::ObjectId, Arc<Vec<FileEntry>>>>,
    stamps: Mutex<StampCache>,
}

impl std::fmt::Debug for SymbolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymbolIndex")
            .field("path", &self.path)
            .field("mode", &self.mode())
            .finish()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves a cache that is still consistent (inserts are
    // single operations), so a poisoned lock is used as is.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl SymbolIndex {
    /// Opens (creating it, not its directory) the index file at `path`, in redb's
    /// `MultiWriter` mode so other processes may use it at the same time. Tables of older
    /// index versions are dropped.
    ///
    /// # Errors
    /// `store.unavailable` when the file cannot be created or opened (a missing or read-only
    /// directory, not a redb file, a process of another redb locking generation).
    pub fn open(path: &Path) -> Result<SymbolIndex, GatewayError> {
        let unavailable = |e: &dyn std::fmt::Display| {
            GatewayError::new(
                codes::STORE_UNAVAILABLE,
                format!("cannot open the symbol index {}: {e}", path.display()),
                "Check that the state directory is writable, or delete the index file (it is a \
                 cache and is rebuilt).",
            )
        };
        // Created 0600 before redb opens it (it would use the umask's mode); an existing one
        // that others may read is repaired (issue 12 §3: tags quote the repository's code).
        crate::security::fs::ensure_private_file(path).map_err(|e| unavailable(&e))?;
        // A warm open only reads: a read-only handle (no write, no fsync, at open or at
        // close) when the file already has the current tables and no stale ones.
        if path.is_file()
            && let Ok(reader) = builder().open_read_only(path)
            && ready(&reader).unwrap_or(false)
        {
            return Ok(SymbolIndex::with_store(Store {
                path: path.to_owned(),
                reader: Some(reader),
                writer: OnceLock::new(),
            }));
        }
        let db = builder().create(path).map_err(|e| unavailable(&e))?;
        let write = || -> Result<(), redb::Error> {
            if ready(&db)? {
                return Ok(());
            }
            let txn = db.begin_write()?;
            let (tags, names, blobs) = table_names();
            let (stamps, trees) = (stamps_table(), trees_table());
            let single = [&tags, &names, &blobs, &stamps, &trees];
            let stale: Vec<_> = txn
                .list_tables()?
                .filter(|t| is_ours(t.name()) && !single.iter().any(|name| t.name() == *name))
                .collect();
            for table in stale {
                txn.delete_table(table)?;
            }
            let stale: Vec<_> = txn
                .list_multimap_tables()?
                .filter(|t| is_ours(t.name()))
                .collect();
            for table in stale {
                txn.delete_multimap_table(table)?;
            }
            txn.open_table(TableDefinition::<&[u8], &[u8]>::new(&tags))?;
            txn.open_table(TableDefinition::<&[u8], u32>::new(&blobs))?;
            txn.open_table(TableDefinition::<&[u8], &[u8]>::new(&stamps))?;
            txn.open_table(TableDefinition::<&[u8], &[u8]>::new(&trees))?;
            txn.open_table(NamesTable::new(&names))?;
            txn.commit()?;
            Ok(())
        };
        write().map_err(|e| unavailable(&e))?;
        Ok(SymbolIndex::with_store(Store {
            path: path.to_owned(),
            reader: None,
            writer: OnceLock::from(Some(db)),
        }))
    }

    fn with_store(store: Store) -> SymbolIndex {
        SymbolIndex {
            path: Some(store.path.clone()),
            db: Some(store),
            note: None,
            blobs: Mutex::default(),
            trees: Mutex::default(),
            stamps: Mutex::default(),
        }
    }

    /// An index that keeps its tags in memory only; `note` says why (shown to callers).
    pub fn in_memory(note: impl Into<String>) -> SymbolIndex {
        SymbolIndex {
            db: None,
            note: Some(note.into()),
            path: None,
            blobs: Mutex::default(),
            trees: Mutex::default(),
            stamps: Mutex::default(),
        }
    }

    /// [`SymbolIndex::open`] at `path`, creating its directory; when that fails, an index in
    /// memory whose note says why. Never fails.
    pub fn open_or_memory(path: &Path) -> SymbolIndex {
        if let Some(dir) = path.parent()
            && let Err(e) = crate::security::fs::create_private_dir(dir)
        {
            return SymbolIndex::in_memory(format!("cannot create {}: {e}", dir.display()));
        }
        SymbolIndex::open(path).unwrap_or_else(|e| SymbolIndex::in_memory(e.message))
    }

    /// The index of this user: `<state dir>/symbols.redb` (`REVIEW_AGENT_GATEWAY_HOME`
    /// relocates the state dir, see [`crate::config::Paths`]), or memory as
    /// [`SymbolIndex::open_or_memory`].
    pub fn open_default() -> SymbolIndex {
        match crate::config::Paths::discover() {
            Ok(paths) => {
                // The state dir is ours: private whichever command creates it first.
                if let Err(e) = crate::security::fs::ensure_private_dir(paths.state_dir()) {
                    return SymbolIndex::in_memory(format!(
                        "cannot make {} private: {e}",
                        paths.state_dir().display()
                    ));
                }
                SymbolIndex::open_or_memory(&paths.state_dir().join(FILE_NAME))
            }
            Err(e) => SymbolIndex::in_memory(format!("no state directory: {e}")),
        }
    }

    /// Whether tags outlive this process.
    pub fn mode(&self) -> IndexMode {
        if self.db.is_some() {
            IndexMode::Persistent
        } else {
            IndexMode::Memory
        }
    }

    /// Why the index is memory-only (`None` when persistent).
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// The blob id last computed for the work tree file at `path`, if its stamp is unchanged.
    pub(crate) fn stamped_id(&self, path: &Path, stamp: Stamp) -> Option<gix::ObjectId> {
        lock(&self.stamps)
            .map
            .get(path)
            .filter(|(known, _)| *known == stamp)
            .map(|(_, oid)| *oid)
    }

    /// Remember the blob id of the work tree file at `path` with its stamp, unless it was
    /// modified too recently to trust the stamp.
    pub(crate) fn remember_id(&self, path: PathBuf, stamp: Stamp, oid: gix::ObjectId) {
        let settled = stamp.modified.elapsed().is_ok_and(|age| age >= RACY_WINDOW);
        if !settled {
            return;
        }
        let mut stamps = lock(&self.stamps);
        if stamps.map.len() >= MAX_CACHED_STAMPS {
            stamps.map.clear();
        }
        if self.db.is_some()
            && let Some(encoded) = stamp.encode(&oid)
        {
            stamps.unsaved.push((path_key(&path), encoded));
        }
        stamps.map.insert(path, (stamp, oid));
    }

    /// The file list of a commit's tree stored by [`SymbolIndex::store_tree`] (here or in
    /// another process); `None` when not stored or unreadable.
    pub(crate) fn stored_tree(&self, tree: gix::ObjectId) -> Option<Vec<FileEntry>> {
        let db = self.db.as_ref()?;
        let txn = db.begin_read().ok()?;
        let name = trees_table();
        let table = txn
            .open_table(TableDefinition::<&[u8], &[u8]>::new(&name))
            .ok()?;
        let value = table.get(tree.as_bytes()).ok()??;
        let stored: Vec<(String, Vec<u8>)> = postcard::from_bytes(value.value()).ok()?;
        stored
            .into_iter()
            .map(|(path, oid)| {
                Some(FileEntry {
                    lang: Lang::from_path(&path)?,
                    path: path.into(),
                    oid: gix::ObjectId::try_from(oid.as_slice()).ok()?,
                })
            })
            .collect()
    }

    /// Store the file list of a commit's tree (see [`SymbolIndex::stored_tree`]); the table
    /// is emptied first when it would hold more than [`MAX_STORED_TREES`] trees. A write
    /// failure only costs speed.
    pub(crate) fn store_tree(&self, tree: gix::ObjectId, files: &[FileEntry]) {
        let Some(writer) = self.db.as_ref().and_then(Store::writer) else {
            return;
        };
        let stored: Vec<(&str, &[u8])> =
            files.iter().map(|f| (&*f.path, f.oid.as_bytes())).collect();
        let Ok(encoded) = postcard::to_allocvec(&stored) else {
            return;
        };
        let write = || -> Result<(), redb::Error> {
            let txn = writer.begin_write()?;
            let name = trees_table();
            {
                let mut table = txn.open_table(TableDefinition::<&[u8], &[u8]>::new(&name))?;
                if table.len()? >= MAX_STORED_TREES {
                    table.retain(|_, _| false)?;
                }
                table.insert(tree.as_bytes(), encoded.as_slice())?;
            }
            txn.commit()?;
            Ok(())
        };
        let _ = write();
    }

    /// Load the stamps stored for the work tree files under `root` (an absolute path), once
    /// per process and root, so that [`SymbolIndex::stamped_id`] knows the files an earlier
    /// process hashed. A read failure only costs speed.
    pub(crate) fn load_stamps(&self, root: &Path) {
        let Some(db) = &self.db else { return };
        if !lock(&self.stamps).loaded.insert(root.to_owned()) {
            return;
        }
        let mut found = Vec::new();
        let mut read = || -> Result<(), redb::Error> {
            let txn = db.begin_read()?;
            let name = stamps_table();
            let table = txn.open_table(TableDefinition::<&[u8], &[u8]>::new(&name))?;
            // The paths under `root/`: from `root/` up to (excluded) `root0` ('0' follows '/').
            let mut low = path_key(root);
            low.push(b'/');
            let mut high = low.clone();
            *high.last_mut().expect("not empty") = b'0';
            for item in table.range(low.as_slice()..high.as_slice())? {
                let (key, value) = item?;
                #[cfg(unix)]
                let path = PathBuf::from(
                    <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(key.value()),
                );
                #[cfg(not(unix))]
                let path = PathBuf::from(String::from_utf8_lossy(key.value()).into_owned());
                if let Some(stamp) = Stamp::decode(value.value()) {
                    found.push((path, stamp));
                }
            }
            Ok(())
        };
        let _ = read();
        let mut stamps = lock(&self.stamps);
        if stamps.map.len() + found.len() > MAX_CACHED_STAMPS {
            stamps.map.clear();
        }
        for (path, stamp) in found {
            stamps.map.entry(path).or_insert(stamp);
        }
    }

    /// Store the stamps remembered since the last save, in one write transaction (none when
    /// there are none). The table is emptied first when it would hold more than
    /// [`MAX_CACHED_STAMPS`] files. A write failure only costs speed.
    pub(crate) fn save_stamps(&self) {
        let Some(db) = &self.db else { return };
        let unsaved = std::mem::take(&mut lock(&self.stamps).unsaved);
        if unsaved.is_empty() {
            return;
        }
        let Some(writer) = db.writer() else { return };
        let write = || -> Result<(), redb::Error> {
            let txn = writer.begin_write()?;
            let name = stamps_table();
            let definition = TableDefinition::<&[u8], &[u8]>::new(&name);
            {
                let mut table = txn.open_table(definition)?;
                if table.len()? + unsaved.len() as u64 > MAX_CACHED_STAMPS as u64 {
                    table.retain(|_, _| false)?;
                }
                for (key, value) in &unsaved {
                    table.insert(key.as_slice(), value.as_slice())?;
                }
            }
            txn.commit()?;
            Ok(())
        };
        let _ = write();
    }

    /// The cached file list of a commit's tree.
    pub(crate) fn cached_tree(&self, tree: gix::ObjectId) -> Option<Arc<Vec<FileEntry>>> {
        lock(&self.trees).get(&tree).cloned()
    }

    /// Remember the file list of a commit's tree.
    pub(crate) fn cache_tree(&self, tree: gix::ObjectId, files: Arc<Vec<FileEntry>>) {
        let mut trees = lock(&self.trees);
        if trees.len() >= MAX_CACHED_TREES {
            trees.clear();
        }
        trees.insert(tree, files);
    }

    /// The tags of `entries`, from memory, then the file, then by parsing what neither has.
    /// `loader` is called once per parsing thread and answers a function reading an entry's
    /// bytes (`None` when unreadable or over
    /// [`MAX_FILE_BYTES`](super::languages::MAX_FILE_BYTES): indexed as no symbols). With a
    /// `filter`, a file not yet indexed is parsed only when the filter accepts its bytes; the
    /// others stay unindexed (their tags unknown: not stored, empty in the answer, counted in
    /// [`Lookup::unindexed`]). With `wanted`, only the tags of blobs holding a wanted name
    /// (a tag's name, or an identifier of a macro invocation not indexed) are answered, read
    /// from the file through the names table or kept from parsing; the other indexed entries
    /// answer no tags (and are not cached as such). Without, every entry's tags are answered.
    /// Tags in memory are answered whole; the tags answered are cached in memory. A
    /// memory-only index answers and caches every blob it parses (its cache is the index).
    ///
    /// Reading, filtering, parsing and encoding run on up to `available_parallelism` threads while
    /// another stores what they parsed, in one write transaction per [`WRITE_BATCH_FILES`] files
    /// (or [`WRITE_BATCH_BYTES`] of encoded tags), so the tags of a whole snapshot are never in
    /// memory at once unless answered. A failure to read or write the file only costs speed (tags
    /// are parsed, or not stored), never the answer.
    pub(crate) fn lookup<'a, F>(
        &self,
        entries: &[FileEntry],
        loader: &F,
        filter: Option<&Filter<'_>>,
        mut wanted: Option<Wanted<'_>>,
    ) -> Lookup
    where
        F: Fn() -> Loader<'a> + Sync,
    {
        let mut tags: Vec<Option<Arc<FileTags>>> = {
            let blobs = lock(&self.blobs);
            entries
                .iter()
                .map(|e| blobs.map.get(&e.key()).cloned())
                .collect()
        };
        let mut new_entries: Vec<(Key, Arc<FileTags>)> = Vec::new();
        if let Some(db) = &self.db
            && tags.iter().any(Option::is_none)
        {
            let _ = read_file(db, entries, &mut tags, &mut new_entries, wanted.as_mut());
        }
        // Each distinct key once (the same content may sit at several paths); `first_of` maps
        // a key to its position in `missing`, set by its first entry only.
        let mut first_of: HashMap<Key, usize> = HashMap::new();
        let mut missing: Vec<usize> = Vec::new();
        for (i, slot) in tags.iter().enumerate() {
            if slot.is_some() {
                continue;
            }
            if let std::collections::hash_map::Entry::Vacant(vacant) =
                first_of.entry(entries[i].key())
            {
                vacant.insert(missing.len());
                missing.push(i);
            }
        }
        // What parsing found, by position in `missing`: `None` when the filter refused the
        // file, the tags when answered, an empty set when not wanted.
        let mut parsed: Vec<Option<Arc<FileTags>>> = vec![None; missing.len()];
        let mut parsed_count = 0;
        let empty = Arc::new(FileTags::default());
        std::thread::scope(|scope| {
            // Batches go to a writer thread (one fills while another is written), so the
            // parsing threads do not wait for the file.
            let writer = self.db.as_ref().map(|db| {
                let (sender, receiver) = std::sync::mpsc::sync_channel::<Vec<Encoded>>(0);
                let handle = scope.spawn(move || {
                    let mut ok = true;
                    for files in receiver {
                        // After a failed write nothing more is written (it only costs speed).
                        ok = ok && write_file(db, &files).is_ok();
                    }
                });
                (sender, handle)
            });
            let mut batch: Vec<Encoded> = Vec::new();
            let mut batch_bytes = 0;
            let encode = writer.is_some();
            parse_all(
                entries,
                &missing,
                loader,
                filter,
                encode,
                &mut |at, file_tags, encoded| {
                    parsed_count += 1;
                    if let (Some((sender, _)), Some(encoded)) = (&writer, encoded) {
                        batch_bytes += encoded.value.len();
                        batch.push(encoded);
                        if batch.len() >= WRITE_BATCH_FILES || batch_bytes >= WRITE_BATCH_BYTES {
                            let _ = sender.send(std::mem::take(&mut batch));
                            batch_bytes = 0;
                        }
                    }
                    // A memory-only index keeps every blob it parsed: its cache is the index.
                    let answered = !encode || wanted.as_mut().is_none_or(|w| w.wants(&file_tags));
                    parsed[at] = Some(if answered {
                        let file_tags = Arc::new(file_tags);
                        new_entries.push((entries[missing[at]].key(), file_tags.clone()));
                        file_tags
                    } else {
                        empty.clone()
                    });
                },
            );
            if let Some((sender, handle)) = writer {
                if !batch.is_empty() {
                    let _ = sender.send(batch);
                }
                drop(sender);
                let _ = handle.join();
            }
        });
        for (entry, slot) in entries.iter().zip(tags.iter_mut()) {
            if slot.is_none()
                && let Some(&at) = first_of.get(&entry.key())
            {
                slot.clone_from(&parsed[at]);
            }
        }
        if !new_entries.is_empty() {
            let mut blobs = lock(&self.blobs);
            for (key, file_tags) in new_entries {
                let count = file_tags.tags.len();
                if blobs.tags + count > MAX_CACHED_TAGS {
                    blobs.map.clear();
                    blobs.tags = 0;
                }
                if blobs.map.insert(key, file_tags).is_none() {
                    blobs.tags += count;
                }
            }
        }
        let unindexed = tags.iter().filter(|t| t.is_none()).count();
        Lookup {
            tags: tags.into_iter().map(Option::unwrap_or_default).collect(),
            parsed: parsed_count,
            unindexed,
        }
    }
}

/// Fill the gaps of `tags` from the file (one read transaction), recording the tags decoded.
/// With `wanted`, only the tags of blobs holding a wanted name are decoded; the other indexed
/// blobs are answered as empty and not recorded (they are not their tags).
fn read_file(
    db: &Store,
    entries: &[FileEntry],
    tags: &mut [Option<Arc<FileTags>>],
    found: &mut Vec<(Key, Arc<FileTags>)>,
    wanted: Option<&mut Wanted<'_>>,
) -> Result<(), redb::Error> {
    let txn = db.begin_read()?;
    let (tags_name, names_name, blobs_name) = table_names();
    let table = match txn.open_table(TableDefinition::<&[u8], &[u8]>::new(&tags_name)) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let decode = |key: &Key| -> Result<Option<Arc<FileTags>>, redb::Error> {
        Ok(table
            .get(key.bytes().as_slice())?
            .and_then(|value| postcard::from_bytes::<FileTags>(value.value()).ok())
            .map(Arc::new))
    };
    // Each key once: the same content may sit at several paths.
    let mut known: HashMap<Key, Option<Arc<FileTags>>> = HashMap::new();
    let Some(wanted) = wanted else {
        for (slot, entry) in tags.iter_mut().zip(entries) {
            if slot.is_some() {
                continue;
            }
            let key = entry.key();
            let decoded = match known.get(&key) {
                Some(decoded) => decoded.clone(),
                None => {
                    let decoded = decode(&key)?;
                    if let Some(decoded) = &decoded {
                        found.push((key, decoded.clone()));
                    }
                    known.insert(key, decoded.clone());
                    decoded
                }
            };
            *slot = decoded;
        }
        return Ok(());
    };
    let blobs = txn.open_table(TableDefinition::<&[u8], u32>::new(&blobs_name))?;
    let names = txn.open_table(NamesTable::new(&names_name))?;
    let candidates = candidates(&names, wanted)?;
    let empty = Arc::new(FileTags::default());
    for (slot, entry) in tags.iter_mut().zip(entries) {
        if slot.is_some() {
            continue;
        }
        let key = entry.key();
        if let Some(decoded) = known.get(&key) {
            slot.clone_from(decoded);
            continue;
        }
        let bytes = key.bytes();
        let decoded = if candidates.contains(&bytes) {
            let decoded = decode(&key)?;
            if let Some(decoded) = &decoded {
                found.push((key, decoded.clone()));
            }
            decoded
        } else if blobs.get(bytes.as_slice())?.is_some() {
            Some(empty.clone())
        } else {
            None
        };
        known.insert(key, decoded.clone());
        *slot = decoded;
    }
    Ok(())
}

/// The blob keys (as stored) of the names `wanted` visits and accepts.
fn candidates(
    names: &redb::ReadOnlyTable<(&'static str, &'static str, u64), &'static [u8]>,
    wanted: &mut Wanted<'_>,
) -> Result<HashSet<Vec<u8>>, redb::Error> {
    let mut out = HashSet::new();
    let mut add = |value: &[u8]| {
        for key in postings(value) {
            out.insert(key.to_vec());
        }
    };
    let accepts = &mut *wanted.accepts;
    match &wanted.scan {
        NameScan::Nothing => {}
        NameScan::Exact(name) => {
            if accepts(name) {
                let folded = fold(name);
                let range = (folded.as_str(), name.as_str(), 0)
                    ..=(folded.as_str(), name.as_str(), u64::MAX);
                for item in names.range(range)? {
                    add(item?.1.value());
                }
            }
        }
        NameScan::FoldedPrefix(prefix) => {
            // A name's entries (one per batch) follow each other: ask `accepts` once per name.
            let mut last: Option<(String, bool)> = None;
            for item in names.range((prefix.as_str(), "", 0)..)? {
                let (key, value) = item?;
                let (folded, name, _) = key.value();
                if !folded.starts_with(prefix.as_str()) {
                    break;
                }
                if accepted(&mut last, name, &mut *accepts) {
                    add(value.value());
                }
            }
        }
        NameScan::All => {
            let mut last: Option<(String, bool)> = None;
            for item in names.iter()? {
                let (key, value) = item?;
                if accepted(&mut last, key.value().1, &mut *accepts) {
                    add(value.value());
                }
            }
        }
    }
    Ok(out)
}

/// `accepts(name)`, remembered for the last name asked (`last`), since a name's entries follow
/// each other in the names table.
fn accepted(
    last: &mut Option<(String, bool)>,
    name: &str,
    accepts: &mut dyn FnMut(&str) -> bool,
) -> bool {
    match last {
        Some((known, answer)) if known == name => *answer,
        _ => {
            let answer = accepts(name);
            *last = Some((name.to_owned(), answer));
            answer
        }
    }
}

/// The blob keys of a names table value: each key's length (one byte), then its bytes.
fn postings(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = value;
    std::iter::from_fn(move || {
        let (&len, tail) = rest.split_first()?;
        let (key, tail) = tail.split_at_checked(usize::from(len))?;
        rest = tail;
        Some(key)
    })
}

/// One parsed blob as stored: its key, its encoded tags, their count, and its distinct names
/// with their [`fold`] (see [`file_names`]).
struct Encoded {
    key: Vec<u8>,
    value: Vec<u8>,
    count: u32,
    names: Vec<(String, String)>,
}

impl Encoded {
    /// `None` when the tags cannot be encoded (they are then not stored).
    fn new(key: Key, file_tags: &FileTags) -> Option<Encoded> {
        let value = postcard::to_allocvec(file_tags).ok()?;
        let distinct: BTreeSet<&str> = file_names(file_tags).collect();
        Some(Encoded {
            key: key.bytes(),
            value,
            count: u32::try_from(file_tags.tags.len()).unwrap_or(u32::MAX),
            names: distinct
                .into_iter()
                .map(|name| (fold(name), name.to_owned()))
                .collect(),
        })
    }
}

/// What a parsing thread hands over: the file's position in `missing`, and its tags (with
/// their encoding when asked), or `None` when the filter refused the file.
type Parsed = (usize, Option<(FileTags, Option<Encoded>)>);

/// Parse `entries[missing[..]]` (those `filter` accepts, all without one) on up to
/// `available_parallelism` threads, encoding each file's tags for the index file when
/// `encode`, and give them to `sink` on this thread with the file's position in `missing`, in
/// no particular order. Files the filter refuses are not given. At most a few hundred parsed
/// files wait for `sink` at a time (a bounded channel), so memory does not grow with the
/// number of files.
fn parse_all<'a, F>(
    entries: &[FileEntry],
    missing: &[usize],
    loader: &F,
    filter: Option<&Filter<'_>>,
    encode: bool,
    sink: &mut dyn FnMut(usize, FileTags, Option<Encoded>),
) where
    F: Fn() -> Loader<'a> + Sync,
{
    if missing.is_empty() {
        return;
    }
    let one = |load: &mut Loader<'a>, extractor: &mut Extractor, at: usize| -> Parsed {
        let entry = &entries[missing[at]];
        let file_tags = match load(entry) {
            Some(bytes) if filter.is_some_and(|f| !f(entry.lang, &bytes)) => return (at, None),
            Some(bytes) => extract(extractor, entry.lang, &bytes),
            None => FileTags::default(),
        };
        let encoded = if encode {
            Encoded::new(entry.key(), &file_tags)
        } else {
            None
        };
        (at, Some((file_tags, encoded)))
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(missing.len().div_ceil(4))
        .max(1);
    let next = AtomicUsize::new(0);
    // Which positions were done (given to `sink` or refused), to redo those of a thread that
    // panicked (a grammar bug).
    let mut done = vec![false; missing.len()];
    std::thread::scope(|scope| {
        let (sender, receiver) = std::sync::mpsc::sync_channel::<Parsed>(256);
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let sender = sender.clone();
                let (next, one) = (&next, &one);
                scope.spawn(move || {
                    let mut load = loader();
                    let mut extractor = Extractor::new();
                    loop {
                        let at = next.fetch_add(1, Ordering::Relaxed);
                        if at >= missing.len()
                            || sender.send(one(&mut load, &mut extractor, at)).is_err()
                        {
                            break;
                        }
                    }
                })
            })
            .collect();
        drop(sender);
        for (at, parsed) in receiver {
            done[at] = true;
            if let Some((file_tags, encoded)) = parsed {
                sink(at, file_tags, encoded);
            }
        }
        for handle in handles {
            let _ = handle.join();
        }
    });
    // A thread that panicked left its file out: parse what is left here, once more.
    let mut load = None;
    let mut extractor = None;
    for at in (0..missing.len()).filter(|&at| !done[at]) {
        let load = load.get_or_insert_with(loader);
        let extractor = extractor.get_or_insert_with(Extractor::new);
        if let (_, Some((file_tags, encoded))) = one(load, extractor, at) {
            sink(at, file_tags, encoded);
        }
    }
}

/// The names a blob's tags make it hold in the names table: its tags' names and the
/// identifiers of its macro invocations not indexed (with repeats). The identifiers count so
/// that a lookup finds the blob and can say where a name may hide.
fn file_names(file_tags: &FileTags) -> impl Iterator<Item = &str> {
    file_tags.tags.iter().map(|t| t.name.as_str()).chain(
        file_tags
            .macros
            .iter()
            .flat_map(|m| m.idents.iter().map(String::as_str)),
    )
}

/// Store parsed tags in one write transaction: each blob's tags, its entry in the blobs table,
/// and for each distinct name of the batch one entry of the names table listing the batch's
/// blobs that hold it. The batch number is the number of blobs indexed before it (read in the
/// transaction, which redb runs alone): a batch that stores a new blob makes the next number
/// larger, and when two batches meet on a number (the first stored only blobs another process
/// had stored) their lists are merged, so no posting is lost.
fn write_file(db: &Store, files: &[Encoded]) -> Result<(), redb::Error> {
    let Some(db) = db.writer() else {
        return Ok(());
    };
    // (folded name, name) -> the batch's blob keys holding it, in sorted order so the inserts
    // walk the names table once.
    let mut postings: BTreeMap<(&str, &str), Vec<u8>> = BTreeMap::new();
    for file in files {
        for (folded, name) in &file.names {
            let list = postings
                .entry((folded.as_str(), name.as_str()))
                .or_default();
            list.push(u8::try_from(file.key.len()).expect("a blob key is 1 + 20 or 32 bytes"));
            list.extend_from_slice(&file.key);
        }
    }
    let txn = db.begin_write()?;
    {
        let (tags_name, names_name, blobs_name) = table_names();
        let mut table = txn.open_table(TableDefinition::<&[u8], &[u8]>::new(&tags_name))?;
        let mut blobs = txn.open_table(TableDefinition::<&[u8], u32>::new(&blobs_name))?;
        let mut names = txn.open_table(NamesTable::new(&names_name))?;
        let batch = blobs.len()?;
        for file in files {
            table.insert(file.key.as_slice(), file.value.as_slice())?;
            blobs.insert(file.key.as_slice(), file.count)?;
        }
        for ((folded, name), list) in &postings {
            let key = (*folded, *name, batch);
            let merged = names
                .insert(key, list.as_slice())?
                .map(|old| [old.value(), list.as_slice()].concat());
            if let Some(merged) = merged {
                names.insert(key, merged.as_slice())?;
            }
        }
    }
    txn.commit()?;
    Ok(())
}
