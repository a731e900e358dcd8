//! The on-disk format shared by log files (`.incr`) and snapshots (`.base`): a versioned header, then records, each
//! with its length and a CRC32, so a torn tail and corruption are told apart (docs/persistence.md has the layout).

use std::io::{self, Read};

pub const MAGIC: &[u8; 8] = b"RUVIOAOF";
/// The version this build writes. 2 added hashes (the HSET family in logs, key records of type 3 in snapshots), 3
/// lists, sets and sorted sets (their commands in logs, key records of types 4, 5 and 6); each version's files are
/// valid files of the next, so all are read. Older builds refuse newer files instead of loading a data set they
/// cannot represent.
pub const VERSION: u16 = 3;
/// The oldest version this build reads.
pub const MIN_VERSION: u16 = 1;
pub const HEADER_LEN: usize = 32;
/// payload length u32, crc u32, lsn u64, wall ms i64, db u32, kind u8.
pub const RECORD_HEADER_LEN: usize = 29;
/// The largest payload a record can carry: its length field is 32 bits. The writer never makes a larger one (the
/// dispatch refuses a write whose record would not fit, see [`command_record_fits`], and proto-max-bulk-len is
/// capped so a key and its value fit one snapshot record), and the reader accepts every length up to it: whatever
/// was acknowledged can be loaded. A corrupt length cannot make the reader allocate more than the file holds.
pub const MAX_PAYLOAD: u64 = u32::MAX as u64;

/// Whether the log record of a command with these arguments fits [`MAX_PAYLOAD`], with room for what a command may
/// add when it is logged in its replayable form (an absolute deadline, KEEPTTL, ...).
pub fn command_record_fits(args: &[bytes::Bytes]) -> bool {
    const ROOM: u64 = 4096;
    // Per argument: `$`, up to 20 length digits, two CRLFs; the array header likewise.
    let framed: u64 = args.iter().map(|a| a.len() as u64 + 25).sum::<u64>() + 23;
    framed + ROOM <= MAX_PAYLOAD
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Commands, one per record, in execution order.
    Log = 1,
    /// The whole data set as of one LSN.
    Snapshot = 2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    pub kind: FileKind,
    /// Log: LSN of its first record. Snapshot: the last LSN whose effect it contains.
    pub lsn: u64,
    pub created_wall_ms: i64,
}

impl FileHeader {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(MAGIC);
        h[8..10].copy_from_slice(&VERSION.to_le_bytes());
        h[10..12].copy_from_slice(&(self.kind as u16).to_le_bytes());
        h[12..20].copy_from_slice(&self.lsn.to_le_bytes());
        h[20..28].copy_from_slice(&self.created_wall_ms.to_le_bytes());
        let crc = crc32fast::hash(&h[0..28]);
        h[28..32].copy_from_slice(&crc.to_le_bytes());
        h
    }

    pub fn decode(h: &[u8; HEADER_LEN]) -> Result<FileHeader, String> {
        if &h[0..8] != MAGIC {
            return Err("not a Ruvio data file (bad magic)".into());
        }
        if crc32fast::hash(&h[0..28]) != u32::from_le_bytes(h[28..32].try_into().unwrap()) {
            return Err("file header checksum mismatch".into());
        }
        let version = u16::from_le_bytes([h[8], h[9]]);
        if !(MIN_VERSION..=VERSION).contains(&version) {
            return Err(format!("unsupported format version {version} (this build reads {MIN_VERSION} to {VERSION})"));
        }
        let kind = match u16::from_le_bytes([h[10], h[11]]) {
            1 => FileKind::Log,
            2 => FileKind::Snapshot,
            k => return Err(format!("unknown file kind {k}")),
        };
        Ok(FileHeader {
            kind,
            lsn: u64::from_le_bytes(h[12..20].try_into().unwrap()),
            created_wall_ms: i64::from_le_bytes(h[20..28].try_into().unwrap()),
        })
    }
}

/// What a record's payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// A command as a RESP array, replayed through the command dispatcher.
    Command = 0,
    /// Snapshot: one key with its value and deadline.
    Key = 1,
    /// Snapshot: one IFGT fence.
    Fence = 2,
    /// Snapshot: the token epoch and high-water mark.
    Tokens = 3,
    /// Snapshot: the end; a snapshot without it is incomplete.
    End = 4,
    /// Snapshot: one function library's code, as FUNCTION LOAD took it.
    Library = 5,
}

impl RecordKind {
    fn from_u8(b: u8) -> Option<RecordKind> {
        Some(match b {
            0 => RecordKind::Command,
            1 => RecordKind::Key,
            2 => RecordKind::Fence,
            3 => RecordKind::Tokens,
            4 => RecordKind::End,
            5 => RecordKind::Library,
            _ => return None,
        })
    }
}

/// Appends one framed record to `out`.
pub fn encode_record(out: &mut Vec<u8>, lsn: u64, wall_ms: i64, db: u32, kind: RecordKind, payload: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0u8; RECORD_HEADER_LEN]);
    out[start + 8..start + 16].copy_from_slice(&lsn.to_le_bytes());
    out[start + 16..start + 24].copy_from_slice(&wall_ms.to_le_bytes());
    out[start + 24..start + 28].copy_from_slice(&db.to_le_bytes());
    out[start + 28] = kind as u8;
    payload(out);
    // Unreachable past MAX_PAYLOAD: the dispatch and the size limits keep every record within it (see there).
    let len = u32::try_from(out.len() - start - RECORD_HEADER_LEN).expect("log record over 4 GiB");
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    let crc = crc32fast::hash(&out[start + 8..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// A command as a RESP array (what redis-cli would send), so a log payload reads like Redis's AOF.
pub fn encode_command(out: &mut Vec<u8>, args: &[bytes::Bytes]) {
    let mut n = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(n.format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        out.extend_from_slice(n.format(a.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Parses a payload written by [`encode_command`].
pub fn decode_command(p: &[u8]) -> Result<Vec<bytes::Bytes>, String> {
    let mut pos = 0;
    let line = |pos: &mut usize, prefix: u8| -> Result<usize, String> {
        if p.get(*pos) != Some(&prefix) {
            return Err("malformed command payload".into());
        }
        let end = memchr::memchr(b'\r', &p[*pos..]).ok_or("malformed command payload")? + *pos;
        let n: usize = std::str::from_utf8(&p[*pos + 1..end]).ok().and_then(|s| s.parse().ok()).ok_or("malformed command payload")?;
        *pos = end + 2;
        Ok(n)
    };
    let count = line(&mut pos, b'*')?;
    if count == 0 || count > p.len() {
        return Err("malformed command payload".into());
    }
    let mut args = Vec::with_capacity(count);
    for _ in 0..count {
        let len = line(&mut pos, b'$')?;
        let end = pos.checked_add(len).filter(|e| e + 2 <= p.len()).ok_or("malformed command payload")?;
        args.push(bytes::Bytes::copy_from_slice(&p[pos..end]));
        pos = end + 2;
    }
    if pos != p.len() {
        return Err("trailing bytes after command payload".into());
    }
    Ok(args)
}

/// Small helpers for snapshot payloads: little-endian integers and length-prefixed bytes.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len()).ok_or("payload too short")?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }
    pub fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    pub fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    pub fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub fn done(&self) -> bool {
        self.pos == self.buf.len()
    }
}

#[derive(Debug)]
pub struct Record {
    pub offset: u64,
    pub lsn: u64,
    pub wall_ms: i64,
    pub db: u32,
    pub kind: RecordKind,
    pub payload: Vec<u8>,
}

/// Why reading stopped before the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The file ends inside a record, or its last record is torn (checksum fails on a record reaching the end of
    /// the file): what a crash during a write leaves.
    Truncated { offset: u64, reason: String },
    /// Anything else: bad bytes with good data after them.
    Corrupt { offset: u64, reason: String },
}

impl ReadError {
    pub fn offset(&self) -> u64 {
        match self {
            ReadError::Truncated { offset, .. } | ReadError::Corrupt { offset, .. } => *offset,
        }
    }
    pub fn reason(&self) -> &str {
        match self {
            ReadError::Truncated { reason, .. } | ReadError::Corrupt { reason, .. } => reason,
        }
    }
}

/// Reads a data file record by record, checking framing and checksums.
pub struct RecordReader<R: Read> {
    inner: R,
    pub header: FileHeader,
    /// Offset of the next record: after a successful read, everything before it is good.
    pub offset: u64,
    file_len: u64,
}

impl<R: Read> RecordReader<R> {
    pub fn new(mut inner: R, file_len: u64) -> Result<Self, ReadError> {
        let mut h = [0u8; HEADER_LEN];
        if file_len < HEADER_LEN as u64 {
            return Err(ReadError::Truncated { offset: 0, reason: "file shorter than its header".into() });
        }
        inner.read_exact(&mut h).map_err(|e| ReadError::Corrupt { offset: 0, reason: e.to_string() })?;
        let header = FileHeader::decode(&h).map_err(|reason| ReadError::Corrupt { offset: 0, reason })?;
        Ok(RecordReader { inner, header, offset: HEADER_LEN as u64, file_len })
    }

    /// The next record, `Ok(None)` at a clean end of file.
    pub fn next_record(&mut self) -> Result<Option<Record>, ReadError> {
        self.next_record_reusing(Vec::new())
    }

    /// [`RecordReader::next_record`], reading the payload into `payload` (a buffer handed back from an earlier
    /// record) so a long load does not allocate per record.
    pub fn next_record_reusing(&mut self, mut payload: Vec<u8>) -> Result<Option<Record>, ReadError> {
        let at = self.offset;
        let left = self.file_len - at;
        if left == 0 {
            return Ok(None);
        }
        let truncated = |reason: &str| ReadError::Truncated { offset: at, reason: reason.to_string() };
        let corrupt = |reason: &str| ReadError::Corrupt { offset: at, reason: reason.to_string() };
        if left < RECORD_HEADER_LEN as u64 {
            return Err(truncated("file ends inside a record header"));
        }
        let mut h = [0u8; RECORD_HEADER_LEN];
        self.inner.read_exact(&mut h).map_err(|e| corrupt(&e.to_string()))?;
        let len = u32::from_le_bytes(h[0..4].try_into().unwrap());
        let total = RECORD_HEADER_LEN as u64 + len as u64;
        if total > left {
            return Err(truncated("file ends inside a record"));
        }
        payload.clear();
        payload.resize(len as usize, 0);
        self.inner.read_exact(&mut payload).map_err(|e| corrupt(&e.to_string()))?;
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&h[8..]);
        hasher.update(&payload);
        if hasher.finalize() != u32::from_le_bytes(h[4..8].try_into().unwrap()) {
            return Err(if total == left { truncated("torn last record (checksum mismatch)") } else { corrupt("record checksum mismatch") });
        }
        let kind = RecordKind::from_u8(h[28]).ok_or_else(|| corrupt("unknown record kind"))?;
        self.offset += total;
        Ok(Some(Record {
            offset: at,
            lsn: u64::from_le_bytes(h[8..16].try_into().unwrap()),
            wall_ms: i64::from_le_bytes(h[16..24].try_into().unwrap()),
            db: u32::from_le_bytes(h[24..28].try_into().unwrap()),
            kind,
            payload,
        }))
    }
}

/// Opens `path` for record reading with a large buffer. A log file's preallocated tail (zeros the writer put ahead
/// of its records, see `writer.rs`) is not part of its records: reading ends where the data ends.
pub fn open_reader(path: &std::path::Path) -> io::Result<Result<RecordReader<io::BufReader<std::fs::File>>, ReadError>> {
    let f = std::fs::File::open(path)?;
    let mut len = f.metadata()?.len();
    if is_log_file(&f, len)? {
        len = end_of_data(&f, len)?;
    }
    Ok(RecordReader::new(io::BufReader::with_capacity(1 << 20, f), len))
}

fn is_log_file(f: &std::fs::File, len: u64) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    if len < HEADER_LEN as u64 {
        return Ok(false);
    }
    let mut h = [0u8; HEADER_LEN];
    f.read_exact_at(&mut h, 0)?;
    Ok(FileHeader::decode(&h).is_ok_and(|h| h.kind == FileKind::Log))
}

/// The offset just after the last non-zero byte (never inside the header). Sound for log files only: every log
/// record ends with the `\n` of its RESP payload, so a record never ends in a zero byte, and a torn record (zeros
/// where its end should be) still ends inside itself and reads as truncated.
fn end_of_data(f: &std::fs::File, len: u64) -> io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 64 * 1024];
    let mut end = len;
    while end > HEADER_LEN as u64 {
        let start = end.saturating_sub(buf.len() as u64).max(HEADER_LEN as u64);
        let chunk = &mut buf[..(end - start) as usize];
        f.read_exact_at(chunk, start)?;
        if let Some(i) = chunk.iter().rposition(|&b| b != 0) {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(HEADER_LEN as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_fits_a_record_up_to_the_32_bit_length() {
        // Cheap clones of one 64 MiB buffer: 4 GiB of arguments without allocating them.
        let chunk = bytes::Bytes::from(vec![0u8; 64 << 20]);
        let args = |n: usize| std::iter::repeat_n(chunk.clone(), n).collect::<Vec<_>>();
        assert!(command_record_fits(&args(16))); // 1 GiB: refused as corrupt on reload before
        assert!(command_record_fits(&args(63)));
        assert!(!command_record_fits(&args(64))); // 4 GiB: does not fit a 32-bit length
        assert!(command_record_fits(&[bytes::Bytes::from_static(b"SET")]));
    }
    use bytes::Bytes;

    fn file_with(records: usize) -> Vec<u8> {
        let mut v = FileHeader { kind: FileKind::Log, lsn: 1, created_wall_ms: 5 }.encode().to_vec();
        for i in 0..records {
            encode_record(&mut v, i as u64 + 1, 7, 0, RecordKind::Command, |o| {
                encode_command(o, &[Bytes::from("SET"), Bytes::from(format!("k{i}")), Bytes::from("v")])
            });
        }
        v
    }

    fn read_all(v: &[u8]) -> (Vec<Record>, Option<ReadError>) {
        drain(RecordReader::new(v, v.len() as u64))
    }

    fn read_file(path: &std::path::Path) -> (Vec<Record>, Option<ReadError>) {
        drain(open_reader(path).unwrap())
    }

    /// Every record a reader yields, and why it stopped, if not at a clean end.
    fn drain<R: Read>(reader: Result<RecordReader<R>, ReadError>) -> (Vec<Record>, Option<ReadError>) {
        let mut r = match reader {
            Ok(r) => r,
            Err(e) => return (vec![], Some(e)),
        };
        let mut out = vec![];
        loop {
            match r.next_record() {
                Ok(Some(rec)) => out.push(rec),
                Ok(None) => return (out, None),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    #[test]
    fn version_1_files_are_read_and_unknown_versions_refused() {
        let mut h = FileHeader { kind: FileKind::Snapshot, lsn: 9, created_wall_ms: 5 }.encode();
        assert_eq!(u16::from_le_bytes([h[8], h[9]]), VERSION);
        for (version, ok) in [(1u16, true), (2, true), (VERSION, true), (VERSION + 1, false), (0, false)] {
            h[8..10].copy_from_slice(&version.to_le_bytes());
            let crc = crc32fast::hash(&h[0..28]);
            h[28..32].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(FileHeader::decode(&h).is_ok(), ok, "version {version}");
        }
    }

    #[test]
    fn round_trip_and_fault_classes() {
        let v = file_with(3);
        let (recs, err) = read_all(&v);
        assert!(err.is_none());
        assert_eq!(recs.len(), 3);
        assert_eq!(decode_command(&recs[2].payload).unwrap()[1], Bytes::from("k2"));
        // Cut anywhere inside the last record: truncated, at the last record's offset.
        for cut in recs[2].offset as usize + 1..v.len() {
            let (recs2, err) = read_all(&v[..cut]);
            assert_eq!(recs2.len(), 2);
            assert!(matches!(err, Some(ReadError::Truncated { offset, .. }) if offset == recs[2].offset));
        }
        // A flipped byte in the middle record: corruption at its offset.
        let mut bad = v.clone();
        bad[recs[1].offset as usize + RECORD_HEADER_LEN + 3] ^= 0x40;
        let (_, err) = read_all(&bad);
        assert_eq!(err, Some(ReadError::Corrupt { offset: recs[1].offset, reason: "record checksum mismatch".into() }));
        // The same flip in the last record looks like a torn write.
        let mut torn = v.clone();
        let last = v.len() - 3;
        torn[last] ^= 0x40;
        assert!(matches!(read_all(&torn).1, Some(ReadError::Truncated { .. })));
    }

    #[test]
    fn a_preallocated_zero_tail_ends_the_log_and_a_torn_record_before_it_is_truncated() {
        let dir = std::env::temp_dir().join(format!("ruvio-format-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tail.incr");
        let v = file_with(3);
        let mut padded = v.clone();
        padded.resize(v.len() + 100_000, 0);
        std::fs::write(&path, &padded).unwrap();
        let (recs, err) = read_file(&path);
        assert_eq!((recs.len(), err), (3, None));
        // Header only, then zeros: an empty log.
        let mut empty = v[..HEADER_LEN].to_vec();
        empty.resize(70_000, 0);
        std::fs::write(&path, &empty).unwrap();
        assert_eq!(read_file(&path).0.len(), 0);
        // The last record written only in part (zeros where the rest should be): a torn tail at its offset.
        let (recs, _) = read_all(&v);
        let last = recs[2].offset as usize;
        for keep in [1, 5, RECORD_HEADER_LEN, v.len() - last - 1] {
            let mut torn = v[..last + keep].to_vec();
            torn.resize(v.len() + 5000, 0);
            std::fs::write(&path, &torn).unwrap();
            let (recs2, err) = read_file(&path);
            assert_eq!(recs2.len(), 2, "keep {keep}");
            assert!(matches!(err, Some(ReadError::Truncated { offset, .. }) if offset == last as u64), "keep {keep}: {err:?}");
        }
        // Damage in the middle is still corruption, zero tail or not.
        let mut bad = padded.clone();
        bad[recs[1].offset as usize + RECORD_HEADER_LEN + 3] ^= 0x40;
        std::fs::write(&path, &bad).unwrap();
        assert!(matches!(read_file(&path).1, Some(ReadError::Corrupt { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
