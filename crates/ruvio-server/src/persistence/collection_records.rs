//! Snapshot records of lists (key record type 4), sets (type 5) and sorted sets (type 6), chunked as hashes are
//! (see `hash_records.rs`):
//!
//! ```text
//! expire i64 | type u8 | key | count u32 | count x element
//! list element:       bytes                 (in order, head first)
//! set element:        bytes
//! sorted-set element: bytes | score f64 (IEEE 754 bits, little-endian)
//! ```
//!
//! A record takes elements until it holds about [`CHUNK_BYTES`], so none outgrows the format's 32-bit length. The
//! loader creates the value from the first record and appends the elements of the next ones (keys are unique in a
//! snapshot, so a record for a key that already holds a value of the same type continues it). Encodings shown by
//! OBJECT ENCODING are chosen again at load for the limits in force, as Redis does.

use crate::journal::format::{encode_record, put_bytes, Cursor, RecordKind};
use crate::keyspace::{set, zset, CompactBytes, Data, Db, Entry, ListValue, SetValue, ZSetValue};

pub use super::hash_records::CHUNK_BYTES;

pub const TYPE_LIST: u8 = 4;
pub const TYPE_SET: u8 = 5;
pub const TYPE_ZSET: u8 = 6;

/// Writes `items` (each already encoded as its element bytes by `put`) in records of about CHUNK_BYTES.
fn encode_chunked<I: Iterator>(
    buf: &mut Vec<u8>,
    lsn: u64,
    wall: i64,
    db: u32,
    key: &[u8],
    expire: i64,
    ty: u8,
    items: I,
    size: impl Fn(&I::Item) -> usize,
    put: impl Fn(&mut Vec<u8>, &I::Item),
) {
    let mut items = items.peekable();
    let mut first = true;
    while first || items.peek().is_some() {
        first = false;
        encode_record(buf, lsn, wall, db, RecordKind::Key, |o| {
            o.extend_from_slice(&expire.to_le_bytes());
            o.push(ty);
            put_bytes(o, key);
            let count_at = o.len();
            o.extend_from_slice(&0u32.to_le_bytes());
            let start = o.len();
            let mut count = 0u32;
            while let Some(item) = items.peek() {
                if count > 0 && o.len() - start + size(item) + 12 > CHUNK_BYTES {
                    break;
                }
                put(o, item);
                count += 1;
                items.next();
            }
            o[count_at..count_at + 4].copy_from_slice(&count.to_le_bytes());
        });
    }
}

/// Appends the records of a list, set or sorted set; false if `data` is none of those.
pub fn encode(buf: &mut Vec<u8>, lsn: u64, wall: i64, db: u32, key: &[u8], expire: i64, data: &Data) -> bool {
    match data {
        Data::List(l) => encode_chunked(buf, lsn, wall, db, key, expire, TYPE_LIST, l.iter(), |e| e.len(), |o, e| put_bytes(o, e)),
        Data::Set(s) => encode_chunked(buf, lsn, wall, db, key, expire, TYPE_SET, s.iter(), |e| e.len(), |o, e| put_bytes(o, e)),
        Data::ZSet(z) => encode_chunked(buf, lsn, wall, db, key, expire, TYPE_ZSET, z.iter(), |e| e.0.len() + 8, |o, (m, s)| {
            put_bytes(o, m);
            o.extend_from_slice(&s.to_bits().to_le_bytes());
        }),
        _ => return false,
    }
    true
}

/// Decodes the elements of a record of type `ty` (after its key).
pub fn decode(ty: u8, c: &mut Cursor<'_>) -> Result<Data, String> {
    let n = c.u32()?;
    Ok(match ty {
        TYPE_LIST => {
            let mut l = ListValue::new();
            for _ in 0..n {
                l.push_back(CompactBytes::new(c.bytes()?));
            }
            Data::List(Box::new(l))
        }
        TYPE_SET => {
            let mut s = SetValue::new();
            for _ in 0..n {
                if !s.insert(c.bytes()?, &set::Limits::default()) {
                    return Err("a member appears twice in a set record".into());
                }
            }
            Data::Set(Box::new(s))
        }
        TYPE_ZSET => {
            let mut z = ZSetValue::new();
            for _ in 0..n {
                let m = c.bytes()?;
                let score = f64::from_bits(c.i64()? as u64);
                if score.is_nan() {
                    return Err("a NaN score in a sorted-set record".into());
                }
                if z.insert(m, score, &zset::Limits::default()).is_some() {
                    return Err("a member appears twice in a sorted-set record".into());
                }
            }
            Data::ZSet(z)
        }
        t => return Err(format!("unknown value type {t}")),
    })
}

pub use crate::keyspace::CollectionLimits as LoadLimits;

/// Loads a decoded record at `key`: one that continues a value already loaded adds its elements and returns true
/// (nothing left to insert); else the value's encoding is chosen for `limits` and false is returned.
pub fn merge(db: &mut Db, key: &[u8], entry: &mut Entry, limits: &LoadLimits) -> bool {
    let continues = match (db.peek(key).map(|e| &e.data), &entry.data) {
        (Some(Data::List(_)), Data::List(_)) | (Some(Data::Set(_)), Data::Set(_)) | (Some(Data::ZSet(_)), Data::ZSet(_)) => true,
        _ => false,
    };
    if continues {
        // now = 0: nothing counts as expired while a snapshot loads.
        match (db.get_mut(key, 0), &mut entry.data) {
            (Some(Data::List(l)), Data::List(chunk)) => l.extend(chunk.drain(..)),
            (Some(Data::Set(s)), Data::Set(chunk)) => {
                for m in chunk.iter() {
                    s.insert(m, &limits.set);
                }
            }
            (Some(Data::ZSet(z)), Data::ZSet(chunk)) => {
                for (m, sc) in chunk.iter() {
                    z.insert(m, sc, &limits.zset);
                }
            }
            _ => {}
        }
        return true;
    }
    match &mut entry.data {
        Data::Set(s) => s.refit(&limits.set),
        Data::ZSet(z) => z.refit(&limits.zset),
        _ => {}
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::format::RecordReader;

    #[test]
    fn large_collections_split_into_bounded_records_and_load_back() {
        let mut l = ListValue::new();
        let mut s = SetValue::new();
        let mut z = ZSetValue::new();
        let big = vec![b'v'; 1000];
        for i in 0..3000 {
            let mut e = big.clone();
            e.extend_from_slice(i.to_string().as_bytes());
            l.push_back(CompactBytes::new(&e));
            s.insert(&e, &set::Limits::default());
            z.insert(&e, i as f64 / 3.0, &zset::Limits::default());
        }
        z.insert(b"inf", f64::INFINITY, &zset::Limits::default());
        let mut buf = crate::journal::format::FileHeader { kind: crate::journal::format::FileKind::Snapshot, lsn: 1, created_wall_ms: 1 }.encode().to_vec();
        for (k, d) in [(&b"l"[..], Data::List(Box::new(l.clone()))), (b"s", Data::Set(Box::new(s))), (b"z", Data::ZSet(z.clone()))] {
            assert!(encode(&mut buf, 1, 1, 0, k, 0, &d));
        }
        let len = buf.len() as u64;
        let mut r = RecordReader::new(&buf[..], len).unwrap();
        let mut db = Db::new();
        let mut records = 0;
        while let Some(rec) = r.next_record().unwrap() {
            assert!(rec.payload.len() <= CHUNK_BYTES + 2048);
            records += 1;
            let (key, mut entry) = crate::persistence::loader::decode_key(&rec.payload).unwrap();
            if !merge(&mut db, key, &mut entry, &LoadLimits::default()) {
                db.insert(key, entry);
            }
        }
        assert!(records >= 9, "{records}");
        let Some(Entry { data: Data::List(back), .. }) = db.peek(b"l") else { panic!() };
        assert_eq!(**back, l);
        let Some(Entry { data: Data::Set(back), .. }) = db.peek(b"s") else { panic!() };
        assert_eq!((back.len(), back.encoding()), (3000, "hashtable"));
        let Some(Entry { data: Data::ZSet(back), .. }) = db.peek(b"z") else { panic!() };
        assert_eq!(back.iter().collect::<Vec<_>>(), z.iter().collect::<Vec<_>>());
    }
}
