//! `warden audit verify`: walks the journal's segments, recomputes the hash chain, and compares
//! it with the hashes the database holds for every folded record; names the first record that
//! was altered, removed or reordered.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use rusqlite::OpenFlags;

use crate::audit::AuditError;
use crate::journal::{GENESIS, JournalError, JournalPaths, Segment, line_hash, parse_header};

/// What a walk of the trail found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Records in the chain (checkpoints included), up to the first break.
    pub records: u64,
    /// SHA-256 (hex) of the last record (the chain's head); None when there is none.
    pub head: Option<String>,
    /// Records whose hash the database holds and that were compared.
    pub compared_with_database: u64,
    /// The first break, if the trail is broken.
    pub broken: Option<ChainBreak>,
}

/// The first record found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainBreak {
    /// Its sequence number.
    pub seq: u64,
    /// The segment file and its line (1-based) where it is, or where it should be.
    pub file: Option<PathBuf>,
    /// The line.
    pub line: u64,
    /// What is wrong.
    pub kind: BreakKind,
}

/// How a record breaks the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BreakKind {
    /// Its bytes changed: the next record's `prev`, or the database's copy of its hash, no
    /// longer matches.
    Altered,
    /// The line is not a record at all.
    NotARecord,
    /// It is missing: records `seq` through `through` are gone (found before `file:line`).
    Removed {
        /// The last missing one.
        through: u64,
    },
    /// It is out of place: record `seq` stands at `file:line`, where `expected` belongs.
    OutOfOrder {
        /// The record that belongs there.
        expected: u64,
    },
    /// The journal's last line is unfinished (a write cut short by power loss).
    Unfinished,
    /// The database holds its hash but the journal ends before it: removed from the end.
    MissingFromJournal,
}

impl std::fmt::Display for ChainBreak {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = match &self.file {
            Some(file) => format!("{}:{}", file.display(), self.line),
            None => "the journal's end".to_owned(),
        };
        match &self.kind {
            BreakKind::Altered => write!(formatter, "record {} at {place} was altered", self.seq),
            BreakKind::NotARecord => write!(
                formatter,
                "record {} at {place} was altered: the line is not a record",
                self.seq
            ),
            BreakKind::Removed { through } if *through == self.seq => {
                write!(
                    formatter,
                    "record {} was removed (before {place})",
                    self.seq
                )
            }
            BreakKind::Removed { through } => write!(
                formatter,
                "records {} to {through} were removed (before {place})",
                self.seq
            ),
            BreakKind::OutOfOrder { expected } => write!(
                formatter,
                "record {} at {place} is out of order: record {expected} belongs there",
                self.seq
            ),
            BreakKind::Unfinished => write!(
                formatter,
                "record {} at {place} is unfinished (a write cut short)",
                self.seq
            ),
            BreakKind::MissingFromJournal => write!(
                formatter,
                "record {} was removed from the journal's end (the database holds its hash)",
                self.seq
            ),
        }
    }
}

/// Where each record is: its segment (an index) and line.
type Place = (usize, u64);

/// Verifies the trail of the database `database`: its journal's chain, then each hash the
/// database holds against the journal's. Reads only; folds nothing.
pub fn verify_trail(database: &Path) -> Result<Verification, AuditError> {
    let paths = JournalPaths::beside(database);
    let segments = paths.segments()?;
    let walk = walk_chain(&segments)?;
    let mut broken = walk.broken.clone();
    let mut compared = 0;
    let limit = broken.as_ref().map_or(u64::MAX, |found| found.seq);
    if database.exists() {
        let (count, found) = compare_with_database(database, &walk, &segments, limit)?;
        compared = count;
        if found.is_some() {
            broken = found;
        }
    }
    let records = match &broken {
        Some(found) => found
            .seq
            .saturating_sub(walk.start)
            .min(walk.hashes.len() as u64),
        None => walk.hashes.len() as u64,
    };
    let head = usize::try_from(records)
        .ok()
        .and_then(|count| count.checked_sub(1))
        .and_then(|last| walk.hashes.get(last))
        .map(hex::encode);
    Ok(Verification {
        records,
        head,
        compared_with_database: compared,
        broken,
    })
}

/// The journal's chain as walked: each whole record's hash and place, in order.
struct Walk {
    /// The first record's number.
    start: u64,
    hashes: Vec<[u8; 32]>,
    places: Vec<Place>,
    broken: Option<ChainBreak>,
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> AuditError + '_ {
    move |source| {
        AuditError::Journal(JournalError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// Calls `visit(segment index, line number, line)` for each line of each segment (`None` for an
/// unfinished last line) until it returns false.
fn each_line(
    segments: &[Segment],
    mut visit: impl FnMut(usize, u64, Option<&[u8]>) -> bool,
) -> Result<(), AuditError> {
    let mut buffer = Vec::with_capacity(4096);
    for (index, segment) in segments.iter().enumerate() {
        let file = File::open(&segment.path).map_err(io_error(&segment.path))?;
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let mut line = 0u64;
        loop {
            buffer.clear();
            let read = reader
                .read_until(b'\n', &mut buffer)
                .map_err(io_error(&segment.path))?;
            if read == 0 {
                break;
            }
            line += 1;
            let whole = buffer.strip_suffix(b"\n");
            if !visit(index, line, whole) {
                return Ok(());
            }
        }
    }
    Ok(())
}

fn walk_chain(segments: &[Segment]) -> Result<Walk, AuditError> {
    let mut hashes: Vec<[u8; 32]> = Vec::new();
    let mut places: Vec<Place> = Vec::new();
    let mut broken: Option<(u64, Place, BreakKind)> = None;
    let mut running = GENESIS;
    // The first record's number (a journal started beside older records numbers after them).
    let mut start = None;
    each_line(segments, |segment, line, text| {
        let here = (segment, line);
        let expected = start.map_or(1, |first| first + hashes.len() as u64);
        let Some(text) = text else {
            broken = Some((expected, here, BreakKind::Unfinished));
            return false;
        };
        let Some((seq, prev)) = parse_header(text) else {
            broken = Some((expected, here, BreakKind::NotARecord));
            return false;
        };
        let Some(first) = start else {
            if prev != GENESIS {
                // The first record links to one before it: the journal's head was cut off.
                let missing = seq.saturating_sub(1);
                broken = Some((missing, here, BreakKind::Removed { through: missing }));
                return false;
            }
            start = Some(seq);
            running = line_hash(text);
            hashes.push(running);
            places.push(here);
            return true;
        };
        let expected = first + hashes.len() as u64;
        let linked = prev == running;
        match (seq == expected, linked) {
            (true, true) => {}
            // The record before this one changed (or, for the first, this one's link).
            (true, false) => {
                broken = Some(match places.last() {
                    Some(previous) => (expected - 1, *previous, BreakKind::Altered),
                    None => (expected, here, BreakKind::Altered),
                });
                return false;
            }
            // Linked to the right record but numbered wrong: its number was changed.
            (false, true) => {
                broken = Some((expected, here, BreakKind::Altered));
                return false;
            }
            (false, false) if seq < expected => {
                broken = Some((seq, here, BreakKind::OutOfOrder { expected }));
                return false;
            }
            (false, false) => {
                // Told apart below: the missing record stands later (reordered) or nowhere.
                broken = Some((expected, here, BreakKind::Removed { through: seq - 1 }));
                return false;
            }
        }
        running = line_hash(text);
        hashes.push(running);
        places.push(here);
        true
    })?;
    let broken = match broken {
        Some((expected, here, BreakKind::Removed { through })) => {
            let mut later = None;
            each_line(segments, |segment, line, text| {
                let found = text
                    .and_then(parse_header)
                    .is_some_and(|(seq, _)| seq == expected);
                if found && (segment, line) > here {
                    later = Some(());
                    return false;
                }
                true
            })?;
            if later.is_some() {
                // The record that stands where `expected` belongs is the first one out of place.
                let standing = read_header_at(segments, here)?.map_or(expected, |(seq, _)| seq);
                Some((standing, here, BreakKind::OutOfOrder { expected }))
            } else {
                Some((expected, here, BreakKind::Removed { through }))
            }
        }
        other => other,
    };
    Ok(Walk {
        start: start.unwrap_or(1),
        hashes,
        places,
        broken: broken.map(|(seq, (segment, line), kind)| ChainBreak {
            seq,
            file: segments.get(segment).map(|found| found.path.clone()),
            line,
            kind,
        }),
    })
}

/// The header of the line at `place`.
fn read_header_at(
    segments: &[Segment],
    place: Place,
) -> Result<Option<(u64, [u8; 32])>, AuditError> {
    let mut header = None;
    each_line(segments, |segment, line, text| {
        if (segment, line) == place {
            header = text.and_then(parse_header);
            return false;
        }
        true
    })?;
    Ok(header)
}

/// Compares every hash the database holds (records below `limit`) with the journal's: returns
/// how many were compared and the first that differs or that the journal lacks.
fn compare_with_database(
    database: &Path,
    walk: &Walk,
    segments: &[Segment],
    limit: u64,
) -> Result<(u64, Option<ChainBreak>), AuditError> {
    let sqlite = |source| AuditError::Sqlite {
        path: database.to_path_buf(),
        source,
    };
    let connection = rusqlite::Connection::open_with_flags(
        database,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite)?;
    let has_chain: bool = connection
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE name = 'audit_chain'",
            [],
            |row| row.get(0),
        )
        .map_err(sqlite)?;
    if !has_chain {
        return Ok((0, None));
    }
    let mut statement = connection
        .prepare("SELECT seq, hash FROM audit_chain WHERE seq < ?1 ORDER BY seq")
        .map_err(sqlite)?;
    let mut rows = statement
        .query([i64::try_from(limit).unwrap_or(i64::MAX)])
        .map_err(sqlite)?;
    let mut compared = 0;
    while let Some(row) = rows.next().map_err(sqlite)? {
        let seq: i64 = row.get(0).map_err(sqlite)?;
        let hash: Vec<u8> = row.get(1).map_err(sqlite)?;
        let Some(seq) = u64::try_from(seq).ok().filter(|seq| *seq > 0) else {
            continue;
        };
        let Some(index) = seq
            .checked_sub(walk.start)
            .and_then(|index| usize::try_from(index).ok())
        else {
            // Folded, but before the journal's first record: the journal's head was cut off.
            return Ok((
                compared,
                Some(ChainBreak {
                    seq,
                    file: segments.first().map(|found| found.path.clone()),
                    line: 1,
                    kind: BreakKind::Removed { through: seq },
                }),
            ));
        };
        let Some(journal_hash) = walk.hashes.get(index) else {
            return Ok((
                compared,
                Some(ChainBreak {
                    seq,
                    file: None,
                    line: 0,
                    kind: BreakKind::MissingFromJournal,
                }),
            ));
        };
        if journal_hash[..] != hash[..] {
            let (segment, line) = walk.places[index];
            return Ok((
                compared,
                Some(ChainBreak {
                    seq,
                    file: segments.get(segment).map(|found| found.path.clone()),
                    line,
                    kind: BreakKind::Altered,
                }),
            ));
        }
        compared += 1;
    }
    Ok((compared, None))
}
