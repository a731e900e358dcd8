//! ACL users, as Redis 6+ has them (the subset that matters here): who may log in with which password, and which
//! commands, keys and channels each user may touch.
//!
//! Categories are derived from the command table (a command's flags and group, `category_bits`), never from its
//! name, so a command added to a family gets its categories from its entry. Ruvio adds two categories: `@lock`
//! (the lock commands' group) and `@coordination` (commands flagged `COORDINATION`: what only `ruvio coordinator`
//! needs, such as `REPLICATION LEASE/PROMISE`). `@coordination` is closed by default: `+@all` does not include it
//! (unlike every other category), so the default user, a user given `+@all`, and a server without any password
//! never run those commands; only a user given `+@coordination` explicitly does, such as the built-in
//! `coordinator` user that `coordinator-pass` enables.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use sha2::{Digest, Sha256};

use ruvio_protocol::Value;

use crate::commands::{self, flags, CommandSpec};
use crate::errors::{noperm_command, ERR_NOPERM_CHANNEL, ERR_NOPERM_KEY, ERR_SCRIPT_NOPERM_CHANNEL, ERR_SCRIPT_NOPERM_COMMAND, ERR_SCRIPT_NOPERM_KEY};
use crate::keyspace::glob::glob_match;

/// The built-in user `coordinator-pass` enables (docs/coordinator.md).
pub const COORDINATOR_USER: &str = "coordinator";

/// ACL categories, in ACL CAT's order. The bit of a category is its index.
pub const CATEGORIES: &[&str] = &[
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap", "hyperloglog", "geo", "stream",
    "pubsub", "admin", "fast", "slow", "blocking", "dangerous", "connection", "transaction", "scripting", "lock",
    "coordination",
];

fn cat_bit(name: &str) -> u64 {
    1 << CATEGORIES.iter().position(|c| *c == name).expect("known category")
}

/// A command's categories, from its table entry: its flags, and its family's group (a subcommand takes its
/// container's group).
pub fn category_bits(spec: &CommandSpec, parent: Option<&CommandSpec>) -> u64 {
    let mut bits = 0;
    let flag_cats: [(u64, &str); 10] = [
        (flags::DANGEROUS, "dangerous"),
        (flags::ON_COLLECTIONS, "list"),
        (flags::ON_COLLECTIONS, "set"),
        (flags::ON_COLLECTIONS, "sortedset"),
        (flags::READONLY, "read"),
        (flags::WRITE, "write"),
        (flags::ADMIN, "admin"),
        (flags::ADMIN, "dangerous"),
        (flags::BLOCKING, "blocking"),
        (flags::PUBSUB, "pubsub"),
    ];
    for (f, c) in flag_cats {
        if spec.has(f) {
            bits |= cat_bit(c);
        }
    }
    bits |= if spec.has(flags::FAST) { cat_bit("fast") } else { cat_bit("slow") };
    if spec.has(flags::COORDINATION) || parent.is_some_and(|p| p.has(flags::COORDINATION)) {
        bits |= cat_bit("coordination");
    }
    let group = parent.map_or(spec.group, |p| p.group);
    let by_group = match group {
        "generic" => Some("keyspace"),
        "string" => Some("string"),
        "hash" => Some("hash"),
        "list" => Some("list"),
        "set" => Some("set"),
        "sorted_set" | "sorted-set" | "sortedset" | "zset" => Some("sortedset"),
        "bitmap" => Some("bitmap"),
        "hyperloglog" => Some("hyperloglog"),
        "geo" => Some("geo"),
        "stream" => Some("stream"),
        "pubsub" => Some("pubsub"),
        "connection" => Some("connection"),
        "transactions" => Some("transaction"),
        "scripting" => Some("scripting"),
        "lock" => Some("lock"),
        _ => None,
    };
    if let Some(c) = by_group.filter(|_| !spec.has(flags::ON_COLLECTIONS)) {
        bits |= cat_bit(c);
    }
    bits
}

/// Every command and subcommand clients may name, numbered: a user's permissions are a bit per number.
struct Table {
    entries: Vec<(&'static CommandSpec, Option<&'static CommandSpec>, u64)>,
    by_ptr: commands::SpecAddrMap<usize>,
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| {
        let mut entries = Vec::new();
        for spec in commands::public() {
            entries.push((spec, None, category_bits(spec, None)));
            for sub in spec.subcommands {
                entries.push((sub, Some(spec), category_bits(sub, Some(spec))));
            }
        }
        let by_ptr = entries.iter().enumerate().map(|(i, (s, _, _))| (*s as *const CommandSpec as usize, i)).collect();
        Table { entries, by_ptr }
    })
}

fn id_of(spec: &'static CommandSpec) -> Option<usize> {
    table().by_ptr.get(&(spec as *const CommandSpec as usize)).copied()
}

/// The commands (lower-case full names, `client|kill`) in a category, for ACL CAT.
pub fn commands_in(category: &str) -> Option<Vec<String>> {
    let bit = CATEGORIES.iter().position(|c| c.eq_ignore_ascii_case(category))?;
    Some(
        table()
            .entries
            .iter()
            .filter(|(_, _, b)| b & (1 << bit) != 0)
            .map(|(s, p, _)| p.map_or(s.name.to_string(), |p| format!("{}|{}", p.name, s.name)))
            .collect(),
    )
}

#[derive(Clone, Debug, PartialEq)]
pub struct KeyPattern {
    pub pattern: Bytes,
    pub read: bool,
    pub write: bool,
}

/// What a user may do. Replaced as a whole by ACL SETUSER, so a connection's check reads one consistent value.
#[derive(Clone, Debug)]
pub struct Perms {
    pub enabled: bool,
    pub nopass: bool,
    /// SHA-256 of each password (passwords are never kept in clear).
    pub passwords: Vec<[u8; 32]>,
    allowed: Vec<u64>,
    /// The command rules as given, since the last `+@all`/`-@all` (ACL GETUSER's `commands`, ACL LIST).
    rules: Vec<String>,
    pub all_keys: bool,
    pub keys: Vec<KeyPattern>,
    pub all_channels: bool,
    pub channels: Vec<Bytes>,
    /// Redis 7's selectors (`(...)` rules): further sets of command, key and channel rules; a command runs if the
    /// user's own rules (the root selector, the fields above) or any one selector allows all of it. A selector is a
    /// `Perms` whose user-level fields (on, passwords) are unused.
    pub selectors: Vec<Perms>,
    /// First arguments allowed for a command the user may not run otherwise (`+select|0`: SELECT 0 only), by
    /// command number; lower case. Redis 7.0 keeps this (deprecated) form for commands without subcommands.
    first_args: HashMap<usize, Vec<String>>,
}

/// How far a selector got before refusing (Redis's order: a channel refusal outranks a key refusal, which
/// outranks a command refusal; then the later argument): the refusal reported when nothing allows the command.
fn denial_rank(d: &Denial) -> u8 {
    match d {
        Denial::Command(_) => 1,
        Denial::Key(_) => 2,
        Denial::Channel(_) => 4,
    }
}

impl Perms {
    /// A new user: off, no password, no commands, no keys, no channels (Redis 7's defaults).
    fn new() -> Perms {
        let n = table().entries.len();
        Perms {
            enabled: false,
            nopass: false,
            passwords: Vec::new(),
            allowed: vec![0; n.div_ceil(64)],
            rules: Vec::new(),
            all_keys: false,
            keys: Vec::new(),
            all_channels: false,
            channels: Vec::new(),
            selectors: Vec::new(),
            first_args: HashMap::new(),
        }
    }

    fn set(&mut self, id: usize, on: bool) {
        // Allowing or refusing the whole command replaces any first-argument rule for it, as in Redis.
        self.first_args.remove(&id);
        if on {
            self.allowed[id / 64] |= 1 << (id % 64);
        } else {
            self.allowed[id / 64] &= !(1 << (id % 64));
        }
    }

    fn get(&self, id: usize) -> bool {
        self.allowed[id / 64] & (1 << (id % 64)) != 0
    }

    /// Every command (and subcommand) outside @coordination, every key and every channel, by the user's own rules.
    fn allows_everything(&self) -> bool {
        let coordination = cat_bit("coordination");
        self.all_keys && self.all_channels && table().entries.iter().enumerate().all(|(id, (_, _, bits))| bits & coordination != 0 || self.get(id))
    }

    /// Whether a `+command|firstarg` rule lets this call run.
    fn first_arg_allowed(&self, spec: &'static CommandSpec, args: &[Bytes]) -> bool {
        let (Some(id), Some(arg)) = (id_of(spec), args.get(1)) else { return false };
        self.first_args.get(&id).is_some_and(|allowed| allowed.iter().any(|a| a.as_bytes().eq_ignore_ascii_case(arg)))
    }

    pub fn may_run(&self, spec: &'static CommandSpec) -> bool {
        id_of(spec).is_none_or(|id| self.get(id))
    }

    /// Whether the user holds `@coordination` (REPLICAOF ... EPOCH checks it: the epoch form is a coordinator's).
    pub fn coordination(&self) -> bool {
        table().entries.iter().enumerate().any(|(i, (_, _, b))| b & cat_bit("coordination") != 0 && self.get(i))
    }

    /// Whether one of the selector's key patterns matches `key` and grants all of `access` by itself (Redis's
    /// rule: `%R~a* %W~b*` does not let a command both read and write `ab`).
    pub fn may_access_key(&self, key: &[u8], access: commands::KeyAccess) -> bool {
        self.all_keys
            || self.keys.iter().any(|k| (k.read || !access.read) && (k.write || !access.write) && glob_match(&k.pattern, key, false))
    }

    /// Whether this user may run `resolved` with `args`: the command, then its keys (read or write as the
    /// command is flagged), then its channels (the table's channel flags). What runs before authentication (AUTH,
    /// HELLO, QUIT, RESET) runs for every user, as in Redis: a user must always be able to switch users or leave.
    /// With selectors, the first that allows the command lets it run; when none does, the refusal that got
    /// furthest is reported (Redis's rule, so ACL LOG names the key or channel that stopped the best match).
    pub fn check(&self, resolved: &commands::Resolved, args: &[Bytes]) -> Result<(), Denial> {
        let spec = resolved.spec;
        if spec.has(flags::NOAUTH) && !spec.has(flags::ADMIN) {
            return Ok(());
        }
        let mut worst: Option<(u8, usize, Denial)> = None;
        for sel in std::iter::once(self).chain(self.selectors.iter()) {
            let (at, denial) = match sel.check_selector(resolved, args) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            let rank = denial_rank(&denial);
            if worst.as_ref().is_none_or(|(r, i, _)| rank > *r || (rank == *r && at > *i)) {
                worst = Some((rank, at, denial));
            }
        }
        Err(worst.expect("the root selector always answers").2)
    }

    /// One selector's verdict, with the argument index it stopped at.
    fn check_selector(&self, resolved: &commands::Resolved, args: &[Bytes]) -> Result<(), (usize, Denial)> {
        let spec = resolved.spec;
        if !self.may_run(spec) && !self.first_arg_allowed(spec, args) {
            return Err((0, Denial::Command(resolved.full_name())));
        }
        if !self.all_keys {
            if let Some((i, _)) = spec.keys_with_access(args).into_iter().find(|&(i, access)| !self.may_access_key(&args[i], access)) {
                return Err((i, Denial::Key(args[i].clone())));
            }
        }
        if !self.all_channels {
            let (range, patterns) = spec.channel_indexes(args.len());
            if let Some(i) = range.into_iter().find(|&i| !self.may_access_channel(&args[i], patterns)) {
                return Err((i, Denial::Channel(args[i].clone())));
            }
        }
        Ok(())
    }

    /// Whether a subscription (a channel, or with `pattern` a pattern) is allowed by the user's rules or any of
    /// its selectors (what a subscriber keeps when channel rules change).
    pub fn may_subscribe(&self, name: &[u8], pattern: bool) -> bool {
        std::iter::once(self).chain(self.selectors.iter()).any(|s| s.all_channels || s.may_access_channel(name, pattern))
    }

    /// Read access to every key (`~*`, `allkeys` or `%R~*`), through the user's own rules or a selector: SORT's BY
    /// and GET patterns need it, as in Redis.
    pub fn any_reads_all_keys(&self) -> bool {
        std::iter::once(self).chain(self.selectors.iter()).any(|s| s.all_keys || s.keys.iter().any(|k| k.read && k.pattern[..] == b"*"[..]))
    }

    /// Every channel, through the user's own rules or a selector.
    pub fn any_all_channels(&self) -> bool {
        std::iter::once(self).chain(self.selectors.iter()).any(|s| s.all_channels)
    }

    /// A channel (PUBLISH, SUBSCRIBE) or, with `literal`, a pattern (PSUBSCRIBE: allowed only if the user has the
    /// very same pattern, as in Redis).
    pub fn may_access_channel(&self, channel: &[u8], literal: bool) -> bool {
        self.all_channels || self.channels.iter().any(|p| if literal { p[..] == *channel } else { glob_match(p, channel, false) })
    }

    /// A rule inside a selector: only command, key and channel rules (Redis's), never a user-level one.
    fn apply_selector_rule(&mut self, rule: &str) -> Result<(), String> {
        let lower = rule.to_ascii_lowercase();
        let allowed = matches!(lower.as_str(), "allkeys" | "resetkeys" | "allchannels" | "resetchannels" | "allcommands" | "nocommands")
            || matches!(rule.as_bytes().first(), Some(b'~' | b'%' | b'&' | b'+' | b'-'));
        if !allowed {
            return Err("Syntax error".into());
        }
        self.apply_rule(rule)
    }

    fn apply_rule(&mut self, rule: &str) -> Result<(), String> {
        let lower = rule.to_ascii_lowercase();
        match lower.as_str() {
            "clearselectors" => self.selectors.clear(),
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "allkeys" => self.apply_rule("~*")?,
            "resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
            }
            "allchannels" => self.apply_rule("&*")?,
            "resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
            }
            "allcommands" => self.apply_rule("+@all")?,
            "nocommands" => self.apply_rule("-@all")?,
            "reset" => {
                for r in ["resetpass", "resetkeys", "resetchannels", "off", "clearselectors", "-@all"] {
                    self.apply_rule(r)?;
                }
            }
            _ => match rule.as_bytes()[0] {
                b'>' => {
                    self.passwords.retain(|p| *p != hash(rule[1..].as_bytes()));
                    self.passwords.push(hash(rule[1..].as_bytes()));
                    self.nopass = false;
                }
                b'<' => {
                    let h = hash(rule[1..].as_bytes());
                    if !self.passwords.contains(&h) {
                        return Err("no such password".into());
                    }
                    self.passwords.retain(|p| *p != h);
                }
                b'#' | b'!' => {
                    let h = parse_hash(&rule[1..]).ok_or("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")?;
                    if rule.starts_with('#') {
                        self.passwords.retain(|p| *p != h);
                        self.passwords.push(h);
                        self.nopass = false;
                    } else {
                        if !self.passwords.contains(&h) {
                            return Err("no such password".into());
                        }
                        self.passwords.retain(|p| *p != h);
                    }
                }
                b'~' | b'%' => {
                    let (read, write, pat) = match rule.strip_prefix('~') {
                        Some(p) => (true, true, p),
                        None => {
                            let (how, p) = rule[1..].split_once('~').ok_or("Syntax error")?;
                            let how = how.to_ascii_uppercase();
                            if how.is_empty() || !how.chars().all(|c| c == 'R' || c == 'W') {
                                return Err("Syntax error".into());
                            }
                            (how.contains('R'), how.contains('W'), p)
                        }
                    };
                    if read && write && pat == "*" {
                        self.all_keys = true;
                        self.keys.clear();
                    } else if self.all_keys {
                        return Err("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns".into());
                    } else if let Some(k) = self.keys.iter_mut().find(|k| k.pattern[..] == *pat.as_bytes()) {
                        // `%R~foo %W~foo` is `~foo`, as in Redis.
                        k.read |= read;
                        k.write |= write;
                    } else {
                        self.keys.push(KeyPattern { pattern: Bytes::copy_from_slice(pat.as_bytes()), read, write });
                    }
                }
                b'&' => {
                    if &rule[1..] == "*" {
                        self.all_channels = true;
                        self.channels.clear();
                    } else if self.all_channels {
                        return Err("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels".into());
                    } else {
                        let c = Bytes::copy_from_slice(rule[1..].as_bytes());
                        if !self.channels.contains(&c) {
                            self.channels.push(c);
                        }
                    }
                }
                b'+' | b'-' => self.apply_command_rule(&lower)?,
                b'(' if rule.ends_with(')') => {
                    // A selector starts with no permissions; its rules apply in order.
                    let mut sel = Perms::new();
                    for r in rule[1..rule.len() - 1].split_whitespace() {
                        sel.apply_selector_rule(r)?;
                    }
                    if self.selectors.len() >= MAX_SELECTORS {
                        return Err(format!("too many selectors (at most {MAX_SELECTORS})"));
                    }
                    self.selectors.push(sel);
                }
                _ => return Err("Syntax error".into()),
            },
        }
        Ok(())
    }

    fn apply_command_rule(&mut self, rule: &str) -> Result<(), String> {
        let on = rule.starts_with('+');
        let what = &rule[1..];
        let entries = &table().entries;
        if let Some(cat) = what.strip_prefix('@') {
            if cat == "all" {
                // `+@all` is every category but @coordination, which only an explicit `+@coordination` grants.
                let coord = cat_bit("coordination");
                for (i, (_, _, bits)) in entries.iter().enumerate() {
                    if !on || bits & coord == 0 {
                        self.set(i, on);
                    }
                }
                self.rules.clear();
                self.rules.push(rule.to_string());
                return Ok(());
            }
            let pos = CATEGORIES.iter().position(|c| *c == cat).ok_or("Unknown command or category name in ACL")?;
            for (i, (_, _, bits)) in entries.iter().enumerate() {
                if bits & (1 << pos) != 0 {
                    self.set(i, on);
                }
            }
        } else {
            let (name, sub) = match what.split_once('|') {
                Some((n, s)) => (n, Some(s)),
                None => (what, None),
            };
            let spec = commands::lookup_public(name.as_bytes()).ok_or("Unknown command or category name in ACL")?;
            if sub.is_some_and(|s| s.contains('|')) {
                // `+config|get|appendonly`: a subcommand's first argument (Redis's texts for both shapes).
                return Err(if spec.subcommands.is_empty() { "Unknown command or category name in ACL" } else { "Allowing first-arg of a subcommand is not supported" }.into());
            }
            match sub {
                None => {
                    if let Some(id) = id_of(spec) {
                        self.set(id, on);
                    }
                    for s in spec.subcommands {
                        if let Some(id) = id_of(s) {
                            self.set(id, on);
                        }
                    }
                }
                Some(sub) if spec.subcommands.is_empty() => {
                    // `+select|0`: that first argument only. Refusing one (`-select|0`) names no command, as in Redis.
                    if !on || sub.is_empty() {
                        return Err("Unknown command or category name in ACL".into());
                    }
                    let Some(id) = id_of(spec) else { return Err("Unknown command or category name in ACL".into()) };
                    if !self.get(id) {
                        let allowed = self.first_args.entry(id).or_default();
                        if allowed.len() >= MAX_FIRST_ARGS {
                            return Err(format!("too many first-argument rules for '{}' (at most {MAX_FIRST_ARGS})", spec.name));
                        }
                        if !allowed.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                            allowed.push(sub.to_ascii_lowercase());
                        }
                    }
                }
                Some(sub) => {
                    let s = spec.find_subcommand(sub.as_bytes()).ok_or("Unknown command or category name in ACL")?;
                    if let Some(id) = id_of(s) {
                        self.set(id, on);
                    }
                }
            }
        }
        // A rule that repeats or undoes an earlier one for the same thing replaces it (ACL GETUSER stays short).
        self.rules.retain(|r| r[1..] != *what);
        self.rules.push(rule.to_string());
        Ok(())
    }

    /// The command rules as ACL GETUSER shows them.
    pub fn commands_text(&self) -> String {
        if self.rules.is_empty() {
            return "-@all".into();
        }
        let mut out = self.rules.clone();
        if !out[0].starts_with("+@all") && !out[0].starts_with("-@all") {
            out.insert(0, "-@all".into());
        }
        out.join(" ")
    }

    pub fn keys_text(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        self.keys
            .iter()
            .map(|k| {
                let p = String::from_utf8_lossy(&k.pattern);
                match (k.read, k.write) {
                    (true, true) => format!("~{p}"),
                    (true, false) => format!("%R~{p}"),
                    _ => format!("%W~{p}"),
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    pub fn channels_text(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        self.channels.iter().map(|c| format!("&{}", String::from_utf8_lossy(c))).collect::<Vec<_>>().join(" ")
    }

    /// The user as an ACL LIST / ACL SAVE line after `user <name> `.
    fn describe(&self) -> String {
        let mut parts = vec![if self.enabled { "on".to_string() } else { "off".to_string() }];
        if self.nopass {
            parts.push("nopass".into());
        }
        for p in &self.passwords {
            parts.push(format!("#{}", hex::encode(p)));
        }
        let keys = self.keys_text();
        if !keys.is_empty() {
            parts.push(keys);
        }
        let chans = self.channels_text();
        parts.push(if chans.is_empty() { "resetchannels".into() } else { format!("resetchannels {chans}") });
        parts.push(self.commands_text());
        for sel in &self.selectors {
            parts.push(format!("({})", sel.selector_text()));
        }
        parts.join(" ").replace("resetchannels &*", "&*")
    }

    /// A selector as ACL LIST writes it inside its parentheses: keys, channels, commands.
    pub fn selector_text(&self) -> String {
        let mut parts = Vec::new();
        let keys = self.keys_text();
        if !keys.is_empty() {
            parts.push(keys);
        }
        let chans = self.channels_text();
        parts.push(if chans == "&*" { chans } else if chans.is_empty() { "resetchannels".into() } else { format!("resetchannels {chans}") });
        parts.push(self.commands_text());
        parts.join(" ")
    }
}

/// Why the ACL refused a command: what was refused (ACL LOG's `reason` and `object`).
#[derive(Debug, Clone, PartialEq)]
pub enum Denial {
    Command(String),
    Key(Bytes),
    Channel(Bytes),
}

impl Denial {
    fn reason(&self) -> &'static str {
        match self {
            Denial::Command(_) => "command",
            Denial::Key(_) => "key",
            Denial::Channel(_) => "channel",
        }
    }

    fn object(&self) -> String {
        match self {
            Denial::Command(c) => c.clone(),
            Denial::Key(b) | Denial::Channel(b) => String::from_utf8_lossy(b).into_owned(),
        }
    }

    /// The reply to the refused command. `lua`: a script's `redis.call` (Redis 7.0's texts for scripts, which
    /// the script's error then carries); otherwise Redis's NOPERM texts.
    pub fn reply(&self, lua: bool) -> Value {
        match (self, lua) {
            (Denial::Command(name), false) => noperm_command(name),
            (Denial::Key(_), false) => Value::error(ERR_NOPERM_KEY),
            (Denial::Channel(_), false) => Value::error(ERR_NOPERM_CHANNEL),
            (Denial::Command(_), true) => Value::error(ERR_SCRIPT_NOPERM_COMMAND),
            (Denial::Key(_), true) => Value::error(ERR_SCRIPT_NOPERM_KEY),
            (Denial::Channel(_), true) => Value::error(ERR_SCRIPT_NOPERM_CHANNEL),
        }
    }

    /// EXEC's reply for a queued command no longer allowed when it runs (Redis 7.0's texts).
    pub fn exec_reply(&self) -> Value {
        let reason = match self {
            Denial::Command(_) => "no permission to execute the command or subcommand",
            Denial::Key(_) => "no permission to touch the specified keys",
            Denial::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        Value::error(format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"))
    }

    /// ACL DRYRUN's answer (a bulk string in Redis, not an error).
    pub fn dryrun_text(&self) -> String {
        match self {
            Denial::Command(name) => format!("This user has no permissions to run the '{name}' command"),
            Denial::Key(_) => format!("This user has no permissions to access the '{}' key", self.object()),
            Denial::Channel(_) => format!("This user has no permissions to access the '{}' channel", self.object()),
        }
    }
}

pub fn hash(pass: &[u8]) -> [u8; 32] {
    Sha256::digest(pass).into()
}

fn parse_hash(h: &str) -> Option<[u8; 32]> {
    if h.len() != 64 || !h.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(h, &mut out).ok()?;
    Some(out)
}

/// One user; connections logged in as it hold it, and see ACL SETUSER changes at their next command.
pub struct User {
    pub name: String,
    perms: RwLock<Arc<Perms>>,
    /// Which version of the rules `perms` holds: unique across all users (see [`PermsCache`]).
    version: AtomicU64,
}

/// Versions of users' rules, counted across all users so that two users never share one (0: none yet).
static NEXT_VERSION: AtomicU64 = AtomicU64::new(1);

impl User {
    fn new(name: &str, perms: Perms) -> User {
        User { name: name.into(), perms: RwLock::new(Arc::new(perms)), version: AtomicU64::new(NEXT_VERSION.fetch_add(1, Ordering::Relaxed)) }
    }

    pub fn perms(&self) -> Arc<Perms> {
        self.perms.read().clone()
    }

    /// Replaces the rules; connections see them at their next command (the version moves after the rules did).
    fn set_perms(&self, perms: Arc<Perms>) {
        *self.perms.write() = perms;
        self.version.store(NEXT_VERSION.fetch_add(1, Ordering::Relaxed), Ordering::Release);
    }
}

/// A connection's copy of its user's rules, taken again only when they changed: checking every command through
/// the user's lock and reference count made all the connections of one user (the default user, usually) write the
/// same cache lines for every command. One atomic read per command instead, of a line written only by ACL changes.
#[derive(Default)]
pub struct PermsCache {
    version: u64,
    perms: Option<Arc<Perms>>,
    /// The rules allow every command outside @coordination (what `+@all` grants), every key and every channel:
    /// the default user's, usually. Then only a @coordination command needs checking.
    everything: bool,
}

impl PermsCache {
    /// `user`'s rules as of now. Versions are unique across users, so a connection that switched users (AUTH)
    /// never gets the previous user's rules.
    pub fn get(&mut self, user: &User) -> &Perms {
        let v = user.version.load(Ordering::Acquire);
        if self.version != v || self.perms.is_none() {
            // Read after the version: rules at least as new as `v` (a change in between only means one more refresh).
            let perms = user.perms();
            self.everything = perms.allows_everything();
            self.perms = Some(perms);
            self.version = v;
        }
        self.perms.as_deref().expect("just filled")
    }

    /// [`Perms::check`] against `user`'s current rules, skipped when they allow everything.
    pub fn check(&mut self, user: &User, resolved: &commands::Resolved, args: &[Bytes]) -> Result<(), Denial> {
        self.get(user);
        let coordination = |s: &CommandSpec| s.has(flags::COORDINATION);
        if self.everything && !coordination(resolved.spec) && !resolved.parent.is_some_and(coordination) {
            return Ok(());
        }
        self.perms.as_deref().expect("just filled").check(resolved, args)
    }
}

/// One ACL LOG entry (Redis groups repeats of the same denial into one entry with a count).
#[derive(Clone)]
pub struct LogEntry {
    pub count: u64,
    pub reason: &'static str,
    pub context: &'static str,
    pub object: String,
    pub username: String,
    pub client_info: String,
    pub entry_id: u64,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub created: Instant,
}

/// The users and the denial log.
pub struct Acl {
    users: RwLock<BTreeMap<String, Arc<User>>>,
    log: Mutex<(VecDeque<LogEntry>, u64)>,
    /// `acllog-max-len`: the most entries ACL LOG keeps.
    log_max: AtomicUsize,
}

/// The most first-argument rules (`+select|0`) per command (bounded input).
pub const MAX_FIRST_ARGS: usize = 1024;

/// The most selectors a user may have (bounded input).
pub const MAX_SELECTORS: usize = 1024;

/// Joins the words of a selector given over several arguments (`(+@write` `~write::*)`, as a shell or Tcl splits
/// it) into one rule, as Redis does; an opening parenthesis never closed is an error.
fn merge_selector_args(rules: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(rules.len());
    let mut open: Option<String> = None;
    for r in rules {
        if let Some(acc) = open.as_mut() {
            acc.push(' ');
            acc.push_str(r);
            if r.ends_with(')') {
                out.extend(open.take());
            }
        } else if r.starts_with('(') && !r.ends_with(')') {
            open = Some(r.clone());
        } else {
            out.push(r.clone());
        }
    }
    match open {
        Some(acc) => Err(format!("Unmatched parenthesis in acl selector starting at '{acc}'.")),
        None => Ok(out),
    }
}

/// The most users an ACL file or `user` lines may define, and the longest rule line accepted (bounded input).
pub const MAX_USERS: usize = 10_000;

fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Default for Acl {
    fn default() -> Self {
        Self::new()
    }
}

impl Acl {
    /// The default user only: on, no password, every key and channel, every command but @coordination.
    pub fn new() -> Acl {
        let acl = Acl { users: RwLock::new(BTreeMap::new()), log: Mutex::new((VecDeque::new(), 0)), log_max: AtomicUsize::new(128) };
        acl.users.write().insert("default".into(), Arc::new(User::new("default", default_perms())));
        acl
    }

    pub fn get(&self, name: &str) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    pub fn names(&self) -> Vec<String> {
        self.users.read().keys().cloned().collect()
    }

    /// The user a new connection starts as: `default` when it is on and needs no password, else none (the
    /// connection must AUTH).
    pub fn autologin(&self) -> Option<Arc<User>> {
        self.get("default").filter(|u| {
            let p = u.perms();
            p.enabled && p.nopass
        })
    }

    /// Whether the default user needs no password (protected mode applies then).
    pub fn default_is_open(&self) -> bool {
        self.autologin().is_some()
    }

    /// AUTH: the user, if `pass` is one of its passwords (or it needs none) and it is on.
    pub fn authenticate(&self, name: &[u8], pass: &[u8]) -> Option<Arc<User>> {
        let user = self.get(std::str::from_utf8(name).ok()?)?;
        let p = user.perms();
        let h = hash(pass);
        // Compared in constant time per candidate, so the time taken says nothing about how close a guess was.
        let ok = p.enabled && (p.nopass || p.passwords.iter().any(|c| subtle::ConstantTimeEq::ct_eq(&c[..], &h[..]).into()));
        ok.then_some(user)
    }

    /// ACL SETUSER: applies `rules` in order to the user (created when missing); all or nothing.
    pub fn set_user(&self, name: &str, rules: &[String]) -> Result<(), String> {
        let existing = self.get(name);
        let mut p = existing.as_ref().map_or_else(Perms::new, |u| (*u.perms()).clone());
        for r in &merge_selector_args(rules)? {
            if r.is_empty() {
                return Err(format!("Error in ACL SETUSER modifier '{r}': Syntax error"));
            }
            p.apply_rule(r).map_err(|e| format!("Error in ACL SETUSER modifier '{r}': {e}"))?;
        }
        match existing {
            Some(u) => u.set_perms(Arc::new(p)),
            None => {
                if name.is_empty() || name.bytes().any(|c| c <= b' ' || c == 127) {
                    return Err("Usernames can't contain spaces or null characters".into());
                }
                let mut users = self.users.write();
                if users.len() >= MAX_USERS {
                    return Err(format!("too many users (at most {MAX_USERS})"));
                }
                users.insert(name.to_string(), Arc::new(User::new(name, p)));
            }
        }
        Ok(())
    }

    /// ACL DELUSER: true if it existed. The default user cannot be deleted (checked by the caller).
    pub fn delete(&self, name: &str) -> bool {
        self.users.write().remove(name).is_some()
    }

    /// `requirepass`: the default user's password (empty: none needed), as Redis does.
    pub fn set_default_password(&self, pass: Option<&str>) {
        let rules: Vec<String> = match pass {
            Some(p) => vec!["resetpass".into(), format!(">{p}")],
            None => vec!["nopass".into()],
        };
        let _ = self.set_user("default", &rules);
    }

    /// `coordinator-pass`: the built-in `coordinator` user with `@coordination` and what a coordinator sends a node
    /// (INFO, ROLE, REPLICAOF, CLIENT KILL to make clients rediscover), or no such user when unset.
    pub fn set_coordinator_password(&self, pass: Option<&str>) {
        match pass {
            None => {
                self.delete(COORDINATOR_USER);
            }
            Some(p) => {
                let mut rules: Vec<String> = ["reset", "on", "+@coordination", "+@connection", "+info", "+role", "+replicaof", "+slaveof", "+client|kill"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                rules.push(format!(">{p}"));
                if let Err(e) = self.set_user(COORDINATOR_USER, &rules) {
                    tracing::warn!("coordinator user: {e}");
                }
            }
        }
    }

    /// ACL LIST lines.
    pub fn list(&self) -> Vec<String> {
        self.users.read().values().map(|u| format!("user {} {}", u.name, u.perms().describe())).collect()
    }

    /// Replaces every user by those of `lines` (`user <name> <rules...>`), all or nothing; the default user is
    /// kept as it is unless the lines define it. Returns the users that no longer exist.
    pub fn replace_all(&self, lines: &[(String, Vec<String>)], keep: &[&str]) -> Result<Vec<String>, String> {
        let fresh = Acl::new();
        for k in keep {
            if let Some(u) = self.get(k) {
                fresh.get_or_create(k).set_perms(u.perms());
            }
        }
        let mut seen = std::collections::HashSet::new();
        for (name, rules) in lines {
            if !seen.insert(name.clone()) {
                return Err(format!("Duplicate user '{name}' found"));
            }
            if name == "default" {
                fresh.get_or_create("default").set_perms(Arc::new(Perms::new()));
            }
            fresh.set_user(name, rules)?;
        }
        let old: Vec<String> = self.names();
        let new_users = std::mem::take(&mut *fresh.users.write());
        let mut users = self.users.write();
        // Users that still exist keep their identity, so their connections see the new rules.
        let mut merged = BTreeMap::new();
        for (name, u) in new_users {
            match users.get(&name) {
                Some(cur) => {
                    cur.set_perms(u.perms());
                    merged.insert(name, cur.clone());
                }
                None => {
                    merged.insert(name, u);
                }
            }
        }
        *users = merged;
        Ok(old.into_iter().filter(|n| !users.contains_key(n)).collect())
    }

    fn get_or_create(&self, name: &str) -> Arc<User> {
        if let Some(u) = self.get(name) {
            return u;
        }
        let u = Arc::new(User::new(name, Perms::new()));
        self.users.write().insert(name.into(), u.clone());
        u
    }

    /// A refused command: logged in ACL LOG under `context` (`toplevel`, `multi`, `lua`), answered with Redis's
    /// text for that context.
    pub fn deny(&self, denial: &Denial, context: &'static str, username: &str, client_info: String) -> Value {
        self.log_denial(denial.reason(), context, denial.object(), username, client_info);
        denial.reply(context == "lua")
    }

    /// Records a denial in ACL LOG (repeats of the same one within 60 s are counted on one entry, as in Redis).
    pub fn log_denial(&self, reason: &'static str, context: &'static str, object: String, username: &str, client_info: String) {
        let now = wall_ms();
        let mut log = self.log.lock();
        if let Some(e) = log.0.iter_mut().find(|e| {
            e.reason == reason && e.context == context && e.object == object && e.username == username && e.created.elapsed().as_secs() < 60
        }) {
            e.count += 1;
            e.updated_ms = now;
            e.client_info = client_info;
            return;
        }
        let id = log.1;
        log.1 += 1;
        log.0.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object,
            username: username.to_string(),
            client_info,
            entry_id: id,
            created_ms: now,
            updated_ms: now,
            created: Instant::now(),
        });
        log.0.truncate(self.log_max.load(Ordering::Relaxed));
    }

    /// `acllog-max-len` (CONFIG SET): older entries beyond it are dropped at once, as in Redis.
    pub fn set_log_max(&self, n: u64) {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        self.log_max.store(n, Ordering::Relaxed);
        self.log.lock().0.truncate(n);
    }

    pub fn log_entries(&self, n: usize) -> Vec<LogEntry> {
        self.log.lock().0.iter().take(n).cloned().collect()
    }

    pub fn log_reset(&self) {
        self.log.lock().0.clear();
    }
}

fn default_perms() -> Perms {
    let mut p = Perms::new();
    for r in ["on", "nopass", "~*", "&*", "+@all"] {
        p.apply_rule(r).expect("valid default rules");
    }
    p
}

/// Splits ACL file / `user` directive text into (name, rules); errors name the line.
pub fn parse_user_line(line: &str) -> Result<(String, Vec<String>), String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["user", name, rules @ ..] => Ok((name.to_string(), rules.iter().map(|s| s.to_string()).collect())),
        _ => Err("should start with user keyword".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_user_has_everything_but_coordination() {
        let acl = Acl::new();
        let p = acl.get("default").unwrap().perms();
        assert!(p.may_run(commands::lookup(b"get").unwrap()));
        let repl = commands::lookup(b"replication").unwrap();
        assert!(!p.may_run(repl.find_subcommand(b"lease").unwrap()));
        assert!(!p.coordination());
        acl.set_coordinator_password(Some("s3cret"));
        let c = acl.authenticate(b"coordinator", b"s3cret").unwrap().perms();
        assert!(c.may_run(repl.find_subcommand(b"promise").unwrap()) && c.coordination());
        assert!(!c.may_run(commands::lookup(b"get").unwrap()));
        assert!(acl.authenticate(b"coordinator", b"wrong").is_none());
    }

    #[test]
    fn rules_and_categories() {
        let acl = Acl::new();
        acl.set_user("locker", &["on".into(), ">pw".into(), "~lock:*".into(), "+@lock".into()]).unwrap();
        let p = acl.get("locker").unwrap().perms();
        assert!(p.may_run(commands::lookup(b"lease").unwrap()));
        assert!(!p.may_run(commands::lookup(b"set").unwrap()));
        assert!(p.may_access_key(b"lock:a", commands::KeyAccess::READ_WRITE) && !p.may_access_key(b"other", commands::KeyAccess::READ));
        assert_eq!(p.commands_text(), "-@all +@lock");
        assert!(acl.set_user("x", &["+@nosuch".into()]).is_err());
        acl.set_user("x", &["+@all".into(), "-@admin".into()]).unwrap();
        assert!(!acl.get("x").unwrap().perms().may_run(commands::lookup(b"replicaof").unwrap()));
    }
}

/// The longest ACL file read (bounded before it is read into memory).
const MAX_ACL_FILE: u64 = 64 << 20;

/// Reads an ACL file into (name, rules) lines; errors name the file and line, as Redis's do.
pub fn read_acl_file(path: &str) -> Result<Vec<(String, Vec<String>)>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("Error loading ACLs, opening file '{path}': {e}"))?;
    if meta.len() > MAX_ACL_FILE {
        return Err(format!("Error loading ACLs: '{path}' is larger than {MAX_ACL_FILE} bytes"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("Error loading ACLs, opening file '{path}': {e}"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = parse_user_line(line).map_err(|e| format!("{path}:{}: {e}", i + 1))?;
        if out.len() >= MAX_USERS {
            return Err(format!("{path}: more than {MAX_USERS} users"));
        }
        out.push(parsed);
    }
    Ok(out)
}

impl Acl {
    /// The users a configuration defines: `requirepass` (the default user's password), then `user` lines or the
    /// `aclfile` (not both, as Redis), then the built-in `coordinator` user of `coordinator-pass`.
    pub fn from_config(c: &crate::config::Config) -> Result<Acl, String> {
        let acl = Acl::new();
        acl.set_default_password(c.requirepass.as_deref());
        if !c.users.is_empty() && !c.aclfile.is_empty() {
            return Err("Configuring Ruvio with users defined in the config file and at the same time an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your config file.".into());
        }
        let lines = if c.aclfile.is_empty() {
            c.users.iter().map(|u| parse_user_line(&format!("user {u}"))).collect::<Result<Vec<_>, _>>()?
        } else {
            read_acl_file(&c.aclfile)?
        };
        if !lines.is_empty() {
            acl.replace_all(&lines, &["default"])?;
        }
        acl.set_coordinator_password(c.coordinator_pass.as_deref());
        acl.set_log_max(c.acllog_max_len);
        Ok(acl)
    }
}
