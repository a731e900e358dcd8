//! Snapshot records of hash values (key record type 3).
//!
//! A hash is written as one or more key records, each with the key's deadline and name and a run of its pairs:
//! `expire i64 | type u8 = 3 | key | count u32 | count x (field, value)` (lengths-prefixed as every snapshot string).
//! A record takes pairs until it holds about [`CHUNK_BYTES`] (a single larger pair goes alone), so no record
//! outgrows the format's 32-bit length however large the hash, and the snapshot writer's buffer stays bounded as
//! for every other value. The loader creates the hash from the first record and adds the pairs of the next ones
//! (keys are unique within a snapshot, so a record for a key that already holds a hash continues it), then the
//! encoding follows the limits in force at load (`hash-max-listpack-*`), as Redis re-encodes what it loads.

use crate::journal::format::{encode_record, put_bytes, Cursor, RecordKind};
use crate::keyspace::hash::Limits;
use crate::keyspace::{Data, Db, Entry, HashValue};

/// Pairs per record are cut at about this many payload bytes.
pub const CHUNK_BYTES: usize = 1 << 20;

/// The value-type byte of a hash in a key record.
pub const TYPE_HASH: u8 = 3;

/// Appends the records of hash `h` at `key` (deadline `expire`, Unix ms, 0 = none).
pub fn encode(buf: &mut Vec<u8>, lsn: u64, wall: i64, db: u32, key: &[u8], expire: i64, h: &HashValue) {
    let mut pairs = h.iter().peekable();
    // An empty hash is never stored, but write one record anyway so the key is not lost if one ever is.
    let mut first = true;
    while first || pairs.peek().is_some() {
        first = false;
        encode_record(buf, lsn, wall, db, RecordKind::Key, |o| {
            o.extend_from_slice(&expire.to_le_bytes());
            o.push(TYPE_HASH);
            put_bytes(o, key);
            let count_at = o.len();
            o.extend_from_slice(&0u32.to_le_bytes());
            let start = o.len();
            let mut count = 0u32;
            while let Some((f, v)) = pairs.peek() {
                if count > 0 && o.len() - start + f.len() + v.len() + 8 > CHUNK_BYTES {
                    break;
                }
                put_bytes(o, f);
                put_bytes(o, v);
                count += 1;
                pairs.next();
            }
            o[count_at..count_at + 4].copy_from_slice(&count.to_le_bytes());
        });
    }
}

/// Reads the pairs of one hash record (after its key), encoded for the default limits: the loader re-encodes.
pub fn decode(c: &mut Cursor<'_>) -> Result<HashValue, String> {
    let n = c.u32()?;
    let mut h = HashValue::new();
    for _ in 0..n {
        let f = c.bytes()?;
        let v = c.bytes()?;
        if !h.set(f, v, &Limits::default()) {
            return Err("a field appears twice in a hash record".into());
        }
    }
    Ok(h)
}

/// Loads a decoded hash record at `key`: a record that continues a hash already loaded adds its pairs to it and
/// returns true (nothing left to insert); else `entry`'s hash is encoded for `limits` and false is returned (the
/// caller inserts it).
pub fn merge(db: &mut Db, key: &[u8], entry: &mut Entry, limits: &Limits) -> bool {
    let Data::Hash(chunk) = &mut entry.data else { return false };
    if matches!(db.peek(key), Some(Entry { data: Data::Hash(_), .. })) {
        // now = 0: nothing counts as expired while a snapshot loads (expiry runs after loading).
        if let Some(Data::Hash(h)) = db.get_mut(key, 0) {
            for (f, v) in chunk.iter() {
                h.set(f, v, limits);
            }
        }
        return true;
    }
    *chunk = std::mem::take(chunk).fit(limits);
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::format::RecordReader;

    #[test]
    fn a_large_hash_is_split_into_bounded_records_and_loads_back() {
        let limits = Limits::default();
        let mut h = HashValue::new();
        let value = vec![b'v'; 1000];
        for i in 0..5000 {
            h.set(format!("field:{i}").as_bytes(), &value, &limits);
        }
        let mut buf = crate::journal::format::FileHeader { kind: crate::journal::format::FileKind::Snapshot, lsn: 1, created_wall_ms: 1 }.encode().to_vec();
        encode(&mut buf, 1, 1, 0, b"big", 0, &h);
        let len = buf.len() as u64;
        let mut r = RecordReader::new(&buf[..], len).unwrap();
        let mut db = Db::new();
        let mut records = 0;
        while let Some(rec) = r.next_record().unwrap() {
            assert!(rec.payload.len() <= CHUNK_BYTES + 2048, "record of {} bytes", rec.payload.len());
            records += 1;
            let (key, mut entry) = crate::persistence::loader::decode_key(&rec.payload).unwrap();
            if !merge(&mut db, key, &mut entry, &limits) {
                db.insert(key, entry);
            }
        }
        assert!(records >= 5, "{records} records");
        let Some(Entry { data: Data::Hash(back), .. }) = db.peek(b"big") else { panic!("no hash loaded") };
        assert_eq!(back.len(), 5000);
        assert_eq!(back.encoding(), "hashtable");
        assert_eq!(back.get(b"field:4999"), Some(&value[..]));
        // A small one loads packed again.
        let mut small = HashValue::new();
        small.set(b"a", b"1", &limits);
        let mut buf = Vec::new();
        encode(&mut buf, 1, 1, 0, b"small", 42, &small);
        let (key, mut entry) = crate::persistence::loader::decode_key(&buf[crate::journal::format::RECORD_HEADER_LEN..]).unwrap();
        assert!(!merge(&mut db, key, &mut entry, &limits));
        let Data::Hash(h) = &entry.data else { panic!() };
        assert_eq!((h.encoding(), h.get(b"a")), ("listpack", Some(&b"1"[..])));
        assert_ne!(entry.expire_at, 0);
    }
}
