//! The typed access every collection family (lists, sets, sorted sets) shares: read the value at a key or answer
//! WRONGTYPE, and change it through a closure that creates the key when missing and deletes it when left empty (an
//! empty collection never exists in Redis). Written once here; each family names its type.

use ruvio_protocol::Value;

use super::ERR_WRONGTYPE;
use crate::keyspace::{Data, Db, Entry, ListValue, SetValue, ZSetValue};

/// A collection stored in [`Data`] (boxed, unless the value is one pointer already).
pub trait Collection: Sized {
    fn empty() -> Self;
    fn is_empty(&self) -> bool;
    fn of(data: &Data) -> Option<&Self>;
    fn of_mut(data: &mut Data) -> Option<&mut Self>;
    fn into_data(self) -> Data;
}

macro_rules! collection {
    ($ty:ty, $variant:ident) => {
        collection!($ty, $variant, Box::new);
    };
    ($ty:ty, $variant:ident, $wrap:expr) => {
        impl Collection for $ty {
            fn empty() -> Self {
                <$ty>::new()
            }
            fn is_empty(&self) -> bool {
                <$ty>::is_empty(self)
            }
            fn of(data: &Data) -> Option<&Self> {
                match data {
                    Data::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn of_mut(data: &mut Data) -> Option<&mut Self> {
                match data {
                    Data::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn into_data(self) -> Data {
                Data::$variant($wrap(self))
            }
        }
    };
}
collection!(ListValue, List);
collection!(SetValue, Set);
// A sorted set is already one thin pointer (keyspace/zset.rs): stored unboxed.
collection!(ZSetValue, ZSet, std::convert::identity);

/// The collection at `key`: `Ok(None)` if missing, WRONGTYPE if the key holds something else.
pub fn read<'d, T: Collection>(db: &'d mut Db, key: &[u8], now: u64) -> Result<Option<&'d T>, Value> {
    match db.get(key, now) {
        None => Ok(None),
        Some(Entry { data, .. }) => T::of(data).map(Some).ok_or_else(|| Value::error(ERR_WRONGTYPE)),
    }
}

/// Changes the collection at `key` (created if missing; the caller checked the type) through the counted mutators;
/// deletes it if `f` left it empty.
pub fn write<T: Collection, R>(db: &mut Db, key: &[u8], now: u64, f: impl FnOnce(&mut T) -> R) -> R {
    let (out, empty) = match db.get_mut(key, now).and_then(T::of_mut) {
        Some(v) => {
            let out = f(v);
            (out, v.is_empty())
        }
        None => {
            let mut v = T::empty();
            let out = f(&mut v);
            if !v.is_empty() {
                db.insert(key, Entry::new(v.into_data()));
            }
            return out;
        }
    };
    if empty {
        db.remove(key, now);
    }
    out
}

/// Changes the collection at `key` with one lookup of the key: WRONGTYPE if it holds something else; `f` gets the
/// collection (`None` when missing) and returns its result and whether it changed anything. A missing key is
/// created when `f` leaves a new collection non-empty (`f` gets `Some(empty)` to fill when `create`); a collection
/// left empty is deleted (an empty collection never exists in Redis).
pub fn update<T: Collection, R>(
    db: &mut Db,
    key: &[u8],
    now: u64,
    create: bool,
    f: impl FnOnce(Option<&mut T>) -> (R, bool),
) -> Result<R, Value> {
    enum Found<R, F> {
        WrongType,
        /// `f`, not called.
        Missing(F),
        Done(R, bool),
    }
    let found = db.modify(key, now, |data| match data {
        None => (Found::Missing(f), false),
        Some(data) => match T::of_mut(data) {
            None => (Found::WrongType, false),
            Some(v) => {
                let (out, changed) = f(Some(v));
                (Found::Done(out, v.is_empty()), changed)
            }
        },
    });
    match found {
        Found::WrongType => Err(Value::error(ERR_WRONGTYPE)),
        Found::Done(out, empty) => {
            if empty {
                db.remove(key, now);
            }
            Ok(out)
        }
        Found::Missing(f) if !create => Ok(f(None).0),
        Found::Missing(f) => {
            let mut v = T::empty();
            let (out, _) = f(Some(&mut v));
            if !v.is_empty() {
                db.insert(key, Entry::new(v.into_data()));
            }
            Ok(out)
        }
    }
}

/// The optional count of the pop commands (LPOP/RPOP, SPOP, ZPOPMIN/ZPOPMAX): absent, or a non-negative integer,
/// with Redis's errors otherwise.
pub fn optional_count(arg: Option<&bytes::Bytes>) -> Result<Option<usize>, Value> {
    match arg {
        None => Ok(None),
        // Redis's getPositiveLongFromObjectOrReply: one message whether the count is negative or not a number.
        Some(c) => match super::parse_i64(c) {
            Some(n) if n >= 0 => Ok(Some(n as usize)),
            _ => Err(Value::error(super::zset_family::ERR_MUST_BE_POSITIVE)),
        },
    }
}
