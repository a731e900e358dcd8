//! The command table and dispatch.
//!
//! Every command is one [`CommandSpec`] in its family's `COMMANDS` list (`*_family.rs`: string_family.rs,
//! generic_family.rs for keys, lock_family.rs, ...; the suffix keeps them apart from subsystems such as `locks/`).
//! The table drives dispatch, arity errors, authentication and subscribed-mode rules, MULTI queueing, COMMAND
//! output and which commands reach the write log. Adding a command means one entry plus its handler.

pub mod blocking_family;
pub mod acl_family;
pub mod connection_family;
pub mod context;
pub mod generic_family;
pub mod hash_family;
pub mod list_family;
pub mod set_family;
pub mod bitmap_family;
pub mod collection;
pub mod zset_family;
pub mod info;
pub mod lock_family;
pub mod object_family;
pub mod persistence_family;
pub mod script_host;
pub mod scripting_family;
pub mod pubsub_family;
pub mod replication_family;
pub mod server_family;
pub mod sort_family;
pub mod string_family;
pub mod transaction_family;

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;
use ruvio_protocol::Value;

use context::Ctx;
use crate::errors::*;

/// Command flags, as in Redis's command metadata.
pub mod flags {
    pub const WRITE: u64 = 1 << 0;
    pub const READONLY: u64 = 1 << 1;
    pub const ADMIN: u64 = 1 << 2;
    pub const PUBSUB: u64 = 1 << 3;
    pub const NOAUTH: u64 = 1 << 4;
    pub const FAST: u64 = 1 << 5;
    pub const BLOCKING: u64 = 1 << 6;
    /// Allowed while the data set is loading.
    pub const LOADING: u64 = 1 << 7;
    /// Runs immediately even inside MULTI (EXEC, DISCARD, MULTI, WATCH, QUIT, RESET).
    pub const NO_QUEUE: u64 = 1 << 8;
    /// Allowed on a RESP2 connection in subscribed mode.
    pub const SUBSCRIBED_OK: u64 = 1 << 9;
    /// May grow memory.
    pub const DENYOOM: u64 = 1 << 10;
    /// Not allowed inside MULTI.
    pub const NO_MULTI: u64 = 1 << 11;
    pub const STALE: u64 = 1 << 12;
    /// A write-log record (LOCKSET, ...): sent by persistence replay and replication, not by applications.
    pub const INTERNAL: u64 = 1 << 13;
    /// May not be called from a script (Redis's `noscript`): scripting itself, transactions, subscriptions,
    /// connection state, persistence and replication control (a REPLICAOF inside a script would make a replica
    /// log a record of its own), CONFIG, SHUTDOWN, WAIT.
    pub const NOSCRIPT: u64 = 1 << 14;
    /// Argument 2 is a fencing token (RENEW, RELEASE, IFGT). A script may pass it as a string or as a Lua number
    /// below 2^53; a larger Lua number is refused, since a double that large may already be another token rounded
    /// (`script_host`). Not shown by COMMAND.
    pub const TOKEN_ARG: u64 = 1 << 15;
    /// Where [`TOKEN_ARG`] is.
    pub const TOKEN_ARG_INDEX: usize = 2;
    /// Only `ruvio coordinator` needs it (REPLICATION LEASE/PROMISE/...): the ACL category `@coordination`, which
    /// no user has unless configured (acl.rs).
    pub const COORDINATION: u64 = 1 << 16;
    /// Argument 1 is a channel the command publishes to (PUBLISH): the ACL's channel rules (`&pattern`) apply
    /// to it (acl.rs). Not shown by COMMAND.
    pub const CHANNEL_PUBLISH: u64 = 1 << 17;
    /// Arguments 1.. are channels the command subscribes to (SUBSCRIBE): the ACL's channel rules apply.
    pub const CHANNEL_SUBSCRIBE: u64 = 1 << 18;
    /// Arguments 1.. are patterns the command subscribes to (PSUBSCRIBE): each is allowed only by the very same
    /// ACL channel pattern, as in Redis.
    pub const PATTERN_SUBSCRIBE: u64 = 1 << 19;
    /// Shown to MONITOR before it runs rather than after (Redis's EVAL and FCALL feed the monitors themselves
    /// first, with `skip_monitor` in their table entry), so the commands its script runs follow it.
    pub const MONITOR_FIRST: u64 = 1 << 20;
    /// May run while a script is busy (past `busy-reply-threshold`), when everything else gets `-BUSY` (Redis's
    /// `allow_busy`): the kill and stats commands, SHUTDOWN (NOSAVE), and what keeps a connection's state sane
    /// (MULTI, DISCARD, UNWATCH, AUTH, HELLO, QUIT, RESET), so a pipelined transaction is never half-queued. Such a
    /// command must not wait for the store lock (the script holds it): WATCH, which registers on keys, is left
    /// out, and UNWATCH's release of watched keys is deferred while a script runs (transaction_family.rs).
    pub const ALLOW_BUSY: u64 = 1 << 21;
    /// Argument 2 counts the keys that follow it (EVAL, EVALSHA, FCALL and their `_RO` forms, BLMPOP, BZMPOP,
    /// ZUNIONSTORE/ZINTERSTORE/ZDIFFSTORE after their destination: Redis's `keynum` key spec, shown by COMMAND as
    /// `movablekeys`): the ACL checks every counted key and COMMAND GETKEYS lists them.
    pub const NUMKEYS_AT_2: u64 = 1 << 22;
    /// Argument 1 counts the keys that follow it (ZUNION, ZINTER, ZDIFF, ZINTERCARD, SINTERCARD, LMPOP, ZMPOP), as
    /// [`NUMKEYS_AT_2`].
    pub const NUMKEYS_AT_1: u64 = 1 << 27;

    // What the ACL asks of each key (Redis derives it from each key specification's flags: `access` needs read
    // permission, `insert`, `update` and `delete` write permission; the flags below copy Redis 7.0's key
    // specifications, see `CommandSpec::keys_with_access`). By default a read command's keys need read permission
    // and a write command's both. Not shown by COMMAND.

    /// Its keys' contents are not read (key specifications without `access`): a write command needs only write
    /// permission (`%W~`: LPUSH, DEL, EXPIRE, ...), a read command any pattern that matches (EXISTS, TYPE, LLEN).
    pub const KEYS_NOT_READ: u64 = 1 << 28;
    /// Its first key is a destination it writes without reading; the others it only reads (SINTERSTORE,
    /// ZUNIONSTORE, ZRANGESTORE, BITOP's keys).
    pub const DEST_FIRST: u64 = 1 << 29;
    /// Its last key is a destination it writes without reading; the others it reads and changes (LMOVE, RENAME,
    /// SMOVE, RPOPLPUSH).
    pub const MOVES_TO_LAST: u64 = 1 << 30;
    /// Its last key is a destination it writes without reading; the others it only reads (COPY).
    pub const COPIES_TO_LAST: u64 = 1 << 31;
    /// Writes its key without reading it, unless a `GET` argument asks for the old value (SET).
    pub const GET_OPTION_READS: u64 = 1 << 32;
    /// Only reads its key unless a `SET` or `INCRBY` subcommand writes it (BITFIELD).
    pub const SUBCOMMANDS_WRITE: u64 = 1 << 33;
    /// Runs a Lua script (EVAL, EVALSHA, FCALL and their `_RO` forms): an EXEC that queued one runs on a script
    /// thread, as the script alone would (transaction_family.rs). Not shown by COMMAND.
    pub const RUNS_SCRIPT: u64 = 1 << 23;
    /// The argument after a `STORE` token is a key too (SORT's destination, Redis's `sortGetKeys`): the ACL and
    /// COMMAND GETKEYS see it, and COMMAND shows `movablekeys`.
    pub const STORE_KEY: u64 = 1 << 24;
    /// In the `@dangerous` ACL category without being an admin command (SORT, SORT_RO: their patterns read keys
    /// the ACL cannot check beforehand).
    pub const DANGEROUS: u64 = 1 << 25;
    /// In the `@list`, `@set` and `@sortedset` categories instead of its group's (SORT, SORT_RO).
    pub const ON_COLLECTIONS: u64 = 1 << 26;
    /// Its keyspace notifications follow the records it is logged as, not its name (LMPOP, ZMPOP and their blocking
    /// forms: which key they popped, and from which end, is known only from what they did). Not shown by COMMAND.
    pub const NOTIFY_AS_LOGGED: u64 = 1 << 34;

    pub const NAMES: &[(u64, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOAUTH, "no_auth"),
        (FAST, "fast"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (NO_MULTI, "no_multi"),
        (NOSCRIPT, "noscript"),
        (ALLOW_BUSY, "allow_busy"),
        (NUMKEYS_AT_1 | NUMKEYS_AT_2 | STORE_KEY, "movablekeys"),
    ];
}

pub type Handler = fn(&mut Ctx) -> Value;

/// One command: everything the server needs to know about it, in one place.
pub struct CommandSpec {
    /// Lower-case name (`get`, or for a subcommand the subcommand alone, e.g. `setname`).
    pub name: &'static str,
    /// Redis convention: N means exactly N arguments (name included), -N means at least N.
    pub arity: i32,
    pub flags: u64,
    /// Key positions: first key, last key (negative counts from the end), step. 0,0,0 when there are no keys.
    pub keys: (i32, i32, i32),
    /// Command group as in COMMAND DOCS (`string`, `generic`, `connection`, ...).
    pub group: &'static str,
    pub summary: &'static str,
    pub handler: Handler,
    pub subcommands: &'static [CommandSpec],
}

impl CommandSpec {
    pub fn has(&self, flag: u64) -> bool {
        self.flags & flag != 0
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        if self.arity >= 0 {
            argc == self.arity as usize
        } else {
            argc >= (-self.arity) as usize
        }
    }

    /// Indexes of the channel arguments in `args` the ACL checks, and whether they are patterns (matched
    /// literally against the user's channel rules).
    pub fn channel_indexes(&self, argc: usize) -> (std::ops::Range<usize>, bool) {
        if self.has(flags::CHANNEL_PUBLISH) {
            (1..2.min(argc), false)
        } else if self.has(flags::CHANNEL_SUBSCRIBE) || self.has(flags::PATTERN_SUBSCRIBE) {
            (1..argc, self.has(flags::PATTERN_SUBSCRIBE))
        } else {
            (0..0, false)
        }
    }

    /// Indexes of the key arguments in `args`.
    pub fn key_indexes(&self, argc: usize) -> Vec<usize> {
        let (first, last, step) = self.keys;
        if first <= 0 || step <= 0 {
            return Vec::new();
        }
        let last = if last < 0 { argc as i32 + last } else { last };
        (first..=last.min(argc as i32 - 1)).step_by(step as usize).map(|i| i as usize).collect()
    }

    /// Where the key count is, for a command whose keys are counted ([`flags::NUMKEYS_AT_1`], `_AT_2`).
    fn numkeys_at(&self) -> Option<usize> {
        if self.has(flags::NUMKEYS_AT_1) {
            Some(1)
        } else if self.has(flags::NUMKEYS_AT_2) {
            Some(2)
        } else {
            None
        }
    }

    /// The indexes of the counted keys: `Some(Ok(range))` when the count is a number from 0 to the arguments after
    /// it, `Some(Err(first))` when it is not (the command will refuse to run; `first` is the index after the count),
    /// `None` when the command counts no keys. The count is read with [`parse_i64`], as every such command's own
    /// parser reads it.
    pub fn counted_keys(&self, args: &[Bytes]) -> Option<Result<std::ops::Range<usize>, usize>> {
        let at = self.numkeys_at()?;
        let after = args.len().saturating_sub(at + 1);
        let n = args.get(at).and_then(|a| parse_i64(a)).filter(|&n| n >= 0 && n as u64 <= after as u64);
        Some(n.map(|n| at + 1..at + 1 + n as usize).ok_or(at + 1))
    }

    /// Indexes of the key arguments in `args`: the fixed positions, the counted keys, and for `STORE_KEY` the
    /// destination. A count the command will refuse makes every argument after it a key here, so a key can never
    /// escape the ACL through a count this reads differently from the command (at worst such a call is refused with
    /// NOPERM instead of its syntax error).
    pub fn key_indexes_in(&self, args: &[Bytes]) -> Vec<usize> {
        let (mut idx, store) = self.keys_and_store(args);
        idx.extend(store);
        idx
    }

    /// [`CommandSpec::key_indexes_in`] with `STORE_KEY`'s destination apart (the ACL treats it apart).
    fn keys_and_store(&self, args: &[Bytes]) -> (Vec<usize>, Option<usize>) {
        let mut idx = self.key_indexes(args.len());
        match self.counted_keys(args) {
            Some(Ok(counted)) => idx.extend(counted),
            Some(Err(first)) => idx.extend(first..args.len()),
            None => {}
        }
        let store = if self.has(flags::STORE_KEY) { sort_family::store_key_index(args) } else { None };
        (idx, store)
    }

    /// Each key argument's index in `args` ([`CommandSpec::key_indexes_in`]) with the permission the ACL needs for
    /// it, as Redis 7.0's key specifications say (see the flags from [`flags::KEYS_NOT_READ`] on). SORT's `STORE`
    /// destination is written without being read and its other keys are read.
    pub fn keys_with_access(&self, args: &[Bytes]) -> Vec<(usize, KeyAccess)> {
        let (mut idx, store) = self.keys_and_store(args);
        idx.extend(store);
        let writes = self.has(flags::WRITE);
        let uniform = if self.has(flags::GET_OPTION_READS) {
            KeyAccess { read: args.iter().skip(3).any(|a| eq_ic(a, "get")), write: true }
        } else if self.has(flags::SUBCOMMANDS_WRITE) {
            KeyAccess { read: true, write: !bitfield_only_reads(args) }
        } else if self.has(flags::RUNS_SCRIPT) {
            // What a script does with its declared keys cannot be told: Redis assumes the worst (EVAL, EVALSHA and
            // FCALL read and write them, the _RO forms read). The commands it runs are checked again one by one.
            KeyAccess { read: true, write: !self.has(flags::READONLY) }
        } else {
            KeyAccess { read: !self.has(flags::KEYS_NOT_READ), write: writes }
        };
        let last = idx.len().saturating_sub(1);
        idx.into_iter()
            .enumerate()
            .map(|(n, i)| {
                let access = if store == Some(i) {
                    KeyAccess::WRITE
                } else if self.has(flags::STORE_KEY) {
                    KeyAccess::READ
                } else if self.has(flags::DEST_FIRST) {
                    if n == 0 { KeyAccess::WRITE } else { KeyAccess::READ }
                } else if self.has(flags::MOVES_TO_LAST) {
                    if n == last { KeyAccess::WRITE } else { KeyAccess::READ_WRITE }
                } else if self.has(flags::COPIES_TO_LAST) {
                    if n == last { KeyAccess::WRITE } else { KeyAccess::READ }
                } else {
                    uniform
                };
                (i, access)
            })
            .collect()
    }

    pub fn find_subcommand(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        self.subcommands.iter().find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
    }
}

/// The permissions the ACL needs for one key argument: read (its contents reach the caller or decide what the
/// command does), write (it is changed). Neither: any key pattern that matches allows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyAccess {
    pub read: bool,
    pub write: bool,
}

impl KeyAccess {
    pub const READ: KeyAccess = KeyAccess { read: true, write: false };
    pub const WRITE: KeyAccess = KeyAccess { read: false, write: true };
    pub const READ_WRITE: KeyAccess = KeyAccess { read: true, write: true };
}

/// Whether a BITFIELD call only reads (Redis's `bitfieldGetKeys`: GET and OVERFLOW subcommands only; anything it
/// cannot read as one of those counts as a write, the safe side).
fn bitfield_only_reads(args: &[Bytes]) -> bool {
    let mut i = 2;
    while i < args.len() {
        let remaining = args.len() - i - 1;
        if eq_ic(&args[i], "get") && remaining >= 2 {
            i += 3;
        } else if eq_ic(&args[i], "overflow") && remaining >= 1 {
            i += 2;
        } else {
            return false;
        }
    }
    true
}

/// Every command family; the one list the rest of the server reads.
pub fn families() -> [&'static [CommandSpec]; 18] {
    [
        acl_family::COMMANDS,
        connection_family::COMMANDS,
        generic_family::COMMANDS,
        string_family::COMMANDS,
        transaction_family::COMMANDS,
        pubsub_family::COMMANDS,
        server_family::COMMANDS,
        lock_family::COMMANDS,
        persistence_family::COMMANDS,
        replication_family::COMMANDS,
        hash_family::COMMANDS,
        list_family::COMMANDS,
        set_family::COMMANDS,
        zset_family::COMMANDS,
        bitmap_family::COMMANDS,
        object_family::COMMANDS,
        scripting_family::COMMANDS,
        sort_family::COMMANDS,
    ]
}

// aHash rather than the default SipHash: every command's name is looked up here.
fn index() -> &'static HashMap<&'static [u8], &'static CommandSpec, ahash::RandomState> {
    static INDEX: OnceLock<HashMap<&'static [u8], &'static CommandSpec, ahash::RandomState>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut m = HashMap::default();
        for fam in families() {
            for spec in fam {
                let dup = m.insert(spec.name.as_bytes(), spec);
                assert!(dup.is_none(), "command {} defined twice", spec.name);
            }
        }
        m
    })
}

/// All top-level commands.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    families().into_iter().flatten()
}

/// The commands clients may call: every command but the write log's internal records (LOCKSET, ...), which
/// COMMAND and its subcommands never show.
pub fn public() -> impl Iterator<Item = &'static CommandSpec> {
    all().filter(|s| !s.has(flags::INTERNAL))
}

/// [`lookup`] for what clients may name: an internal record is as unknown as a command that does not exist.
pub fn lookup_public(name: &[u8]) -> Option<&'static CommandSpec> {
    lookup(name).filter(|s| !s.has(flags::INTERNAL))
}

/// Finds a command by name, any case, without allocating.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    // Clients send a few names over and over (a pipeline repeats one, a transaction cycles through MULTI, its
    // commands and EXEC): the names this thread looked up last, exactly as the client spelled them, answer without
    // lowering and hashing them again (most of this function's cost per request otherwise).
    thread_local! {
        static RECENT: std::cell::RefCell<RecentNames> = const { std::cell::RefCell::new(RecentNames::new()) };
    }
    if let Some(spec) = RECENT.with_borrow_mut(|r| r.get(name)) {
        return Some(spec);
    }
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return None;
    }
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let found = index().get(&*lower).copied();
    if let Some(spec) = found {
        RECENT.with_borrow_mut(|r| r.remember(name, spec));
    }
    found
}

/// The last few command names looked up, as spelled, with their commands (replaced oldest first). The one that
/// answered last is tried first: a pipeline of one command finds it at the first comparison.
struct RecentNames {
    names: [([u8; RECENT_NAME], u8, Option<&'static CommandSpec>); RECENT_NAMES],
    next: usize,
    last_hit: usize,
}

/// How many names [`RecentNames`] keeps, and the longest it keeps (every command name in the table is shorter).
const RECENT_NAMES: usize = 8;
const RECENT_NAME: usize = 24;

impl RecentNames {
    const fn new() -> Self {
        RecentNames { names: [([0; RECENT_NAME], 0, None); RECENT_NAMES], next: 0, last_hit: 0 }
    }

    fn get(&mut self, name: &[u8]) -> Option<&'static CommandSpec> {
        let is = |(bytes, len, _): &([u8; RECENT_NAME], u8, Option<&'static CommandSpec>)| *len as usize == name.len() && bytes[..name.len()] == *name;
        if is(&self.names[self.last_hit]) {
            return self.names[self.last_hit].2;
        }
        let i = self.names.iter().position(is)?;
        self.last_hit = i;
        self.names[i].2
    }

    fn remember(&mut self, name: &[u8], spec: &'static CommandSpec) {
        if name.len() > RECENT_NAME {
            return;
        }
        let slot = &mut self.names[self.next];
        slot.0[..name.len()].copy_from_slice(name);
        slot.1 = name.len() as u8;
        slot.2 = Some(spec);
        self.last_hit = self.next;
        self.next = (self.next + 1) % RECENT_NAMES;
    }
}

/// Hashes the address of a [`CommandSpec`] in maps keyed by it (ACL command numbers, commandstats): the address
/// is already unique, so one widening multiply mixes it enough, where SipHash or aHash cost a hundred
/// instructions and more on every command.
#[derive(Default, Clone, Copy)]
pub struct SpecAddrHasher(u64);

impl std::hash::Hasher for SpecAddrHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only usize keys are hashed here; any other input is folded in byte by byte, correct if slow.
        for &b in bytes {
            self.write_usize((self.0 ^ b as u64) as usize);
        }
    }
    fn write_usize(&mut self, n: usize) {
        // Folded multiply: the high half carries the address's high bits down, so the low bits hashbrown picks
        // buckets with differ even though table entries are spaced by their size.
        let p = (n as u128) * 0x9E37_79B9_7F4A_7C15u128;
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by a [`CommandSpec`]'s address (`spec as *const CommandSpec as usize`).
pub type SpecAddrMap<V> = HashMap<usize, V, std::hash::BuildHasherDefault<SpecAddrHasher>>;

pub use crate::errors::{unknown_command, unknown_subcommand, wrong_arity};

/// A resolved command: the spec that runs, and its container when it is a subcommand (`client` for `client|id`).
#[derive(Clone, Copy)]
pub struct Resolved {
    pub spec: &'static CommandSpec,
    pub parent: Option<&'static CommandSpec>,
}

impl Resolved {
    /// The name Redis uses in messages: `get`, `client|setname`.
    pub fn full_name(&self) -> String {
        match self.parent {
            Some(p) => format!("{}|{}", p.name, self.spec.name),
            None => self.spec.name.to_string(),
        }
    }
}

/// Resolves the spec that will run `args`: the command, or its subcommand. Errors are replies.
pub fn resolve(args: &[Bytes]) -> Result<Resolved, Value> {
    let spec = lookup(&args[0]).ok_or_else(|| unknown_command(args))?;
    if !spec.arity_ok(args.len()) {
        return Err(wrong_arity(spec.name));
    }
    // A container whose arity admits no subcommand (COMMAND) runs its own handler when called bare.
    if spec.subcommands.is_empty() || args.len() == 1 {
        return Ok(Resolved { spec, parent: None });
    }
    let sub = spec.find_subcommand(&args[1]).ok_or_else(|| unknown_subcommand(args, spec.name))?;
    let resolved = Resolved { spec: sub, parent: Some(spec) };
    if !sub.arity_ok(args.len()) {
        return Err(wrong_arity(&resolved.full_name()));
    }
    Ok(resolved)
}

// ----- argument helpers shared by the families -----

pub use crate::errors::{ERR_NOT_INTEGER, ERR_SYNTAX, ERR_WRONGTYPE};

/// An array reply of bulk strings copied out of the keyspace straight into its wire form (one buffer for the
/// whole reply, see `BulkArray`): LRANGE 0 99 first made 100 allocations under the store lock, then 100 values
/// sharing one buffer, each a reference count taken and dropped; now it is one copy of the bytes. Scripts and EXEC
/// see it as the array of bulk strings it is.
pub fn bulk_array<'a, I: ExactSizeIterator<Item = &'a [u8]>>(items: I) -> Value {
    Value::Bulks(ruvio_protocol::BulkArray::new(items))
}

pub fn parse_i64(b: &[u8]) -> Option<i64> {
    // Redis rejects leading '+', spaces and leading zeros; Rust's parser accepts '+', so guard for it.
    if b.is_empty() || b.len() > 20 || b[0] == b'+' {
        return None;
    }
    if b.len() > 1 && b[0] == b'0' {
        return None;
    }
    if b.len() >= 2 && b[0] == b'-' && b[1] == b'0' {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

pub fn int_arg(b: &[u8]) -> Result<i64, Value> {
    parse_i64(b).ok_or_else(|| Value::error(ERR_NOT_INTEGER))
}

pub fn float_arg(b: &[u8]) -> Result<f64, Value> {
    parse_f64(b).ok_or_else(|| Value::error(ERR_NOT_FLOAT))
}

pub fn parse_f64(b: &[u8]) -> Option<f64> {
    if let Some(v) = parse_small_integer_f64(b) {
        return Some(v);
    }
    // The open ends of a range (`ZREMRANGEBYSCORE key -inf <cutoff>`, the rate limiter's pattern) as clients write
    // them, before the general path's UTF-8 check and case-insensitive comparisons.
    match b {
        b"-inf" => return Some(f64::NEG_INFINITY),
        b"+inf" | b"inf" => return Some(f64::INFINITY),
        _ => {}
    }
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let is = |names: &[&str]| names.iter().any(|n| s.eq_ignore_ascii_case(n));
    let v: f64 = if is(&["inf", "+inf", "infinity", "+infinity"]) {
        f64::INFINITY
    } else if is(&["-inf", "-infinity"]) {
        f64::NEG_INFINITY
    } else {
        s.parse().ok()?
    };
    (!v.is_nan()).then_some(v)
}

/// The common score: an integer (a counter, a rank, a timestamp even in microseconds), optionally signed, of at most
/// 2^53, which a double holds exactly, so converting the integer gives the very value the decimal parser would, in
/// a tenth of its instructions. Anything else is left to the full parser.
fn parse_small_integer_f64(b: &[u8]) -> Option<f64> {
    let (negative, digits) = match b.split_first()? {
        (b'-', rest) => (true, rest),
        (b'+', rest) => (false, rest),
        _ => (false, b),
    };
    if digits.is_empty() || digits.len() > 16 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    if n > 1 << 53 {
        return None;
    }
    Some(if negative { -(n as f64) } else { n as f64 })
}

pub fn eq_ic(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// `Result<Value, Value>` lets handlers use `?` on argument errors.
pub fn reply(r: Result<Value, Value>) -> Value {
    r.unwrap_or_else(|e| e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_access_flags_describe_commands_that_have_such_keys() {
        let layout = flags::DEST_FIRST | flags::MOVES_TO_LAST | flags::COPIES_TO_LAST;
        let by_args = flags::GET_OPTION_READS | flags::SUBCOMMANDS_WRITE;
        for spec in all().flat_map(|s| std::iter::once(s).chain(s.subcommands.iter())) {
            let set = |f: u64| (spec.flags & f).count_ones();
            assert!(set(layout) + set(by_args) + set(flags::KEYS_NOT_READ) <= 1, "{}: one key-access rule at most", spec.name);
            if spec.has(flags::MOVES_TO_LAST | flags::COPIES_TO_LAST) {
                assert!(spec.keys.0 >= 1 && spec.keys.1 > spec.keys.0, "{}: a source and a destination", spec.name);
            }
            if spec.has(layout | by_args) {
                assert!(spec.has(flags::WRITE), "{}: only a write has a destination or writes by its arguments", spec.name);
            }
        }
        let args = |a: &[&str]| a.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect::<Vec<_>>();
        let set = lookup(b"set").unwrap();
        assert_eq!(set.keys_with_access(&args(&["set", "k", "v"])), vec![(1, KeyAccess::WRITE)]);
        assert_eq!(set.keys_with_access(&args(&["set", "k", "v", "EX", "1", "get"])), vec![(1, KeyAccess::READ_WRITE)]);
        let bitfield = lookup(b"bitfield").unwrap();
        assert_eq!(bitfield.keys_with_access(&args(&["bitfield", "k", "get", "u4", "0", "overflow", "sat"])), vec![(1, KeyAccess::READ)]);
        assert_eq!(bitfield.keys_with_access(&args(&["bitfield", "k", "get", "u4", "0", "incrby", "u4", "0", "1"])), vec![(1, KeyAccess::READ_WRITE)]);
        let sort = lookup(b"sort").unwrap();
        assert_eq!(sort.keys_with_access(&args(&["sort", "src", "store", "dst"])), vec![(1, KeyAccess::READ), (3, KeyAccess::WRITE)]);
        let zunionstore = lookup(b"zunionstore").unwrap();
        assert_eq!(
            zunionstore.keys_with_access(&args(&["zunionstore", "d", "2", "a", "b"])),
            vec![(1, KeyAccess::WRITE), (3, KeyAccess::READ), (4, KeyAccess::READ)]
        );
    }

    #[test]
    fn lookup_answers_the_same_from_its_recent_names_as_from_the_table() {
        // More names than the recent list keeps, in two spellings, twice over: every answer is the table's.
        let names: Vec<&str> = all().take(RECENT_NAMES * 2 + 3).map(|s| s.name).collect();
        for round in 0..2 {
            for name in &names {
                let spelled = if round == 0 { name.to_ascii_uppercase() } else { name.to_string() };
                for _ in 0..2 {
                    assert_eq!(lookup(spelled.as_bytes()).map(|s| s.name), Some(*name), "{spelled}");
                }
            }
        }
        assert!(lookup(b"no-such-command").is_none());
        assert!(lookup(b"").is_none());
    }

    #[test]
    fn integer_scores_parse_as_the_decimal_parser_does() {
        for text in ["0", "-0", "+0", "7", "-7", "+42", "007", "999999999999999", "-999999999999999", "1733450000123456", "9999999999999999"] {
            let full: f64 = text.parse().unwrap();
            assert_eq!(parse_f64(text.as_bytes()).map(f64::to_bits), Some(full.to_bits()), "{text}");
        }
        assert_eq!(parse_small_integer_f64(b"9007199254740992"), Some(9007199254740992.0));
        assert_eq!(parse_small_integer_f64(b"9007199254740993"), None, "past 2^53 the full parser rounds");
        assert_eq!(parse_f64(b"9007199254740993"), Some(9007199254740992.0));
        for bad in ["", "-", "+", " 1", "1 ", "1x", "--1", "nan", "0x10"] {
            assert_eq!(parse_f64(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_f64(b"-INF"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"+Infinity"), Some(f64::INFINITY));
        for (text, want) in [("-inf", f64::NEG_INFINITY), ("+inf", f64::INFINITY), ("inf", f64::INFINITY), ("-Inf", f64::NEG_INFINITY), ("-infinity", f64::NEG_INFINITY)] {
            assert_eq!(parse_f64(text.as_bytes()), Some(want), "{text}");
        }
        for bad in ["-in", "infx", "--inf", " -inf", "-inf "] {
            assert_eq!(parse_f64(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_f64(b"1.5e3"), Some(1500.0));
    }

    #[test]
    fn table_is_consistent() {
        let mut n = 0;
        for spec in all() {
            n += 1;
            assert_eq!(spec.name, spec.name.to_ascii_lowercase());
            assert!(spec.arity != 0, "{}", spec.name);
            assert!(!spec.summary.is_empty(), "{} has no summary", spec.name);
            assert!(!(spec.has(flags::WRITE) && spec.has(flags::READONLY)), "{}", spec.name);
            for sub in spec.subcommands {
                assert!(!sub.summary.is_empty(), "{}|{}", spec.name, sub.name);
            }
        }
        assert!(n > 50);
        assert!(lookup(b"GeT").is_some());
    }

    #[test]
    fn error_texts() {
        let args = vec![Bytes::from("foo"), Bytes::from("bar")];
        assert_eq!(unknown_command(&args), Value::error("ERR unknown command 'foo', with args beginning with: 'bar' "));
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b"007"), None);
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    }
}

/// Shows the command to the MONITOR clients (monitor.rs): with the client's address, or as `lua` when a script ran it.
fn feed_monitors(ctx: &Ctx) {
    let limit = crate::monitor::limit(&ctx.shared.config.read());
    let origin = (ctx.caller != context::Caller::Script).then_some(ctx.client.info.addr.as_str());
    ctx.shared.monitors.feed(&limit, ctx.client.db, origin, ctx.args, &ctx.redacted);
}

/// Runs a resolved command: the handler, then the write log and expiry follow-ups.
pub fn call(ctx: &mut Ctx) -> Value {
    // Whether a write changed anything is counted by the mutators (the keyspace's, the function libraries'); the
    // lock engine reports its changes as records of their own (settled below).
    let changes = |store: &crate::store::Store, shared: &crate::shared::Shared| store.changes() + shared.scripts.library_changes();
    let changes_before = if ctx.spec.has(flags::WRITE) {
        let (now, shared) = (ctx.now, ctx.shared);
        let store = ctx.store();
        // What this command logs (the lock engine's records included) carries its instant.
        store.set_now(now);
        changes(store, shared)
    } else {
        0
    };
    // A durable connection's wait depends on whether the command logged anything (EXEC and scripts included): its
    // staged records are counted before and after. Nothing commits the log while one command runs.
    // (Not for the commands that run during a busy script: they log nothing and must not wait for its lock.)
    let durable_log_before = (ctx.client.durability_replicas > 0 && ctx.caller != context::Caller::Replay && !ctx.spec.has(flags::ALLOW_BUSY))
        .then(|| ctx.store().log.len());
    let monitor = ctx.caller != context::Caller::Replay && ctx.shared.monitors.active() && !ctx.spec.has(flags::ADMIN);
    if monitor && ctx.spec.has(flags::MONITOR_FIRST) {
        feed_monitors(ctx);
    }
    let reply = (ctx.spec.handler)(ctx);
    if monitor && !ctx.spec.has(flags::MONITOR_FIRST) {
        feed_monitors(ctx);
    }
    if ctx.is_locked() {
        let now = ctx.now;
        let write = ctx.spec.has(flags::WRITE);
        let db = ctx.client.db;
        let args = ctx.args;
        let propagate = std::mem::replace(&mut ctx.propagate, context::Propagate::AsIs);
        let shared = ctx.shared;
        let spec = ctx.spec;
        let ctx_in_exec = ctx.in_exec;
        let store = ctx.store();
        store.set_now(now);
        // Expiries and lock changes the command caused go to the log first: `INCR` of an expired key must replay as
        // DEL, then INCR.
        store.settle();
        let notify = shared.notify_flags.load(std::sync::atomic::Ordering::Relaxed) != 0;
        // Counted only when something needs to know (the log, notifications): the sum walks every database.
        let changed = write && (store.log_enabled || notify) && changes(store, shared) > changes_before;
        // Keyspace notifications, from the command (or, for the multi-key pops, from the pop it was logged as).
        let notices = if changed && notify {
            match &propagate {
                context::Propagate::As(records) if spec.has(flags::NOTIFY_AS_LOGGED) => records.iter().flat_map(|r| crate::notify_events_of_record(r)).collect(),
                _ => crate::notify::events_of(spec.name, args).into_iter().filter_map(|(c, e, i)| args.get(i).map(|k| (c, e, k.clone()))).collect(),
            }
        } else {
            Vec::new()
        };
        if changed && store.log_enabled {
            match propagate {
                context::Propagate::AsIs => store.log(db, args.to_vec()),
                context::Propagate::As(records) => records.into_iter().for_each(|r| store.log(db, r)),
                context::Propagate::Nothing => {}
            }
        }
        if !notices.is_empty() {
            blocking_family::publish_notices(shared, store, db, notices);
        }
        if write && !store.waiters.is_empty() {
            // Clients blocked on a key this write touched are served once the command (the transaction, the
            // script) is over, after its record.
            for i in spec.key_indexes_in(args) {
                store.waiters.touched(db, &args[i]);
            }
        }
        if !ctx_in_exec && !store.waiters.ready.is_empty() {
            let served = blocking_family::serve_ready(shared, store);
            blocking_family::notify_served(shared, store, served);
        }
        // (Checked here first: the key list is a fresh vector, not worth making for every write when no one waits.)
        if write && store.locks.any_waiters() {
            // A write that replaced a lock (SET over a lease) must not leave its waiters hanging.
            crate::locks::engine::recheck_waiters(store, db, spec.key_indexes_in(args).into_iter().map(|i| &args[i][..]));
        }
        // Lock waiters the command made room for (DEL, FLUSH, expiry) are granted after its record.
        shared.after_command(store, now);
        let logged = durable_log_before.is_some_and(|before| store.log.len() > before);
        if logged {
            ctx.client.info.durable.lock().wrote = true;
        }
    }
    reply
}
