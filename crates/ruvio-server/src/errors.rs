//! The server's error replies, in one place: Redis's exact texts where Redis has the error, Ruvio's own otherwise.
//! Handlers name these (or call the builders for texts that quote input); none writes an error text of its own.
//! The lock commands' argument errors live with their typed arguments, in `ruvio_protocol::lock_args`.

use bytes::Bytes;
use ruvio_protocol::Value;

// ----- arguments and types -----
pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const ERR_NOT_FLOAT: &str = "ERR value is not a valid float";
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const ERR_OFFSET_RANGE: &str = "ERR offset is out of range";
pub const ERR_STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
pub const ERR_INCR_NAN: &str = "ERR increment would produce NaN or Infinity";
pub const ERR_INCR_OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const ERR_DECR_OVERFLOW: &str = "ERR decrement would overflow";
pub const ERR_NX_WITH_XX_GT_LT: &str = "ERR NX and XX, GT or LT options at the same time are not compatible";
pub const ERR_GT_WITH_LT: &str = "ERR GT and LT options at the same time are not compatible";
pub const ERR_INVALID_CURSOR: &str = "ERR invalid cursor";

// ----- hashes -----
pub const ERR_HASH_NOT_INTEGER: &str = "ERR hash value is not an integer";
pub const ERR_HASH_NOT_FLOAT: &str = "ERR hash value is not a float";
/// HINCRBYFLOAT's increment itself is not finite.
pub const ERR_NAN_OR_INFINITY: &str = "ERR value is NaN or Infinity";
/// HRANDFIELD ... WITHVALUES asking for more than LONG_MAX / 2 pairs.
pub const ERR_RANDFIELD_TOO_MANY: &str = "ERR value is out of range";
/// HRANDFIELD's count is i64::MIN (Redis accepts -LONG_MAX..LONG_MAX).
pub const ERR_RANDFIELD_COUNT_RANGE: &str = "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";

// ----- keys and databases -----
pub const ERR_NO_SUCH_KEY: &str = "ERR no such key";
pub const ERR_SAME_OBJECT: &str = "ERR source and destination objects are the same";
pub const ERR_DB_INDEX_RANGE: &str = "ERR DB index is out of range";

// ----- connections and transactions -----
pub const ERR_NOAUTH: &str = "NOAUTH Authentication required.";
pub const ERR_WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
pub const ERR_NOPROTO: &str = "NOPROTO unsupported protocol version";
pub const ERR_PROTO_VERSION: &str = "ERR Protocol version is not an integer or out of range";
pub const ERR_NO_SUCH_CLIENT: &str = "ERR No such client";
pub const ERR_UNBLOCKED: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";
pub const ERR_CLIENT_UNBLOCK_REASON: &str = "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR";
pub const ERR_INVALID_CLIENT_ID: &str = "ERR Invalid client ID";
pub const ERR_MONITOR_DENY_BLOCKING: &str = "ERR MONITOR isn't allowed for DENY BLOCKING client";
pub const ERR_NOT_IN_MULTI: &str = "ERR Command not allowed inside a transaction";
pub const ERR_NESTED_MULTI: &str = "ERR MULTI calls can not be nested";
pub const ERR_EXEC_WITHOUT_MULTI: &str = "ERR EXEC without MULTI";
pub const ERR_WATCH_IN_MULTI: &str = "ERR WATCH inside MULTI is not allowed";
pub const ERR_EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";
/// EXEC on a durable connection with too few replicas to acknowledge its writes (Redis's text for an EXEC refused by
/// min-replicas-to-write).
pub const ERR_EXECABORT_NOREPLICAS: &str = "EXECABORT Transaction discarded because of: NOREPLICAS Not enough good replicas to write.";

// ----- the server's state -----
pub const ERR_LOADING: &str = "LOADING Redis is loading the dataset in memory";
/// A write whose log record would exceed the record format's 32-bit length (see persistence::format).
pub const ERR_RECORD_TOO_LARGE: &str = "ERR command too large for the write log (a record holds at most 4294967295 bytes)";

// ----- server commands -----
pub const ERR_DISCARD_WITHOUT_MULTI: &str = "ERR DISCARD without MULTI";
pub const ERR_SAVE_INTERRUPTED: &str = "ERR save interrupted";
pub const ERR_BGSAVE_IN_PROGRESS: &str = "ERR Background save already in progress";
pub const ERR_REWRITE_IN_PROGRESS: &str = "ERR Background append only file rewriting already in progress";
pub const ERR_MISSING_SUBCOMMAND: &str = "ERR missing subcommand";
pub const ERR_NO_SHUTDOWN: &str = "ERR No shutdown in progress.";
pub const ERR_TIMEOUT_NEGATIVE: &str = "ERR timeout is negative";
pub const ERR_TIMEOUT_NOT_INTEGER: &str = "ERR timeout is not an integer or out of range";
pub const ERR_NO_CLUSTER: &str = "ERR This instance has cluster support disabled";
pub const ERR_HELLO_NOAUTH: &str = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";
pub const ERR_CLIENT_NAME: &str = "ERR Client names cannot contain spaces, newlines or special characters.";
pub const ERR_CLIENT_ID_POSITIVE: &str = "ERR client-id should be greater than 0";
pub const ERR_MAXAGE_POSITIVE: &str = "ERR maxage should be greater than 0";
pub const ERR_MAXAGE_NOT_INTEGER: &str = "ERR maxage is not an integer or out of range";
pub const ERR_PUBSUB_CHANNELS_ARITY: &str = "ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP.";
pub const ERR_PUBSUB_SHARDCHANNELS_ARITY: &str = "ERR unknown subcommand or wrong number of arguments for 'SHARDCHANNELS'. Try PUBSUB HELP.";

// ----- COMMAND GETKEYS -----
pub const ERR_GETKEYS_UNKNOWN: &str = "ERR Invalid command specified";
pub const ERR_GETKEYS_ARITY: &str = "ERR Invalid number of arguments specified for command";
pub const ERR_GETKEYS_NO_KEYS: &str = "ERR The command has no key arguments";
/// COMMAND GETKEYS of a command whose key count is not a count of the keys given (or is zero).
pub const ERR_GETKEYS_INVALID: &str = "ERR Invalid arguments specified for command";

// ----- texts that quote input -----

/// A client's bytes as Redis prints them into an error text (`%.*s`): raw, whatever their encoding, up to the first
/// NUL byte (where a C string ends), at most `max` bytes. The encoder then turns CR and LF into spaces and trims
/// them at the end, as Redis's addReplyErrorFormat does, so the reply is always one line.
fn printed(b: &[u8], max: usize) -> &[u8] {
    let b = &b[..b.len().min(max)];
    b.iter().position(|&c| c == 0).map_or(b, |nul| &b[..nul])
}

/// Redis's error `template` with each `{}` filled, in order, by `parts` ([`printed`] client bytes, not UTF-8
/// checked, as in Redis). The templates stay whole texts, as Redis writes them (and as conformance/errors.json
/// catalogues them).
fn fill(template: &str, parts: &[&[u8]]) -> Value {
    debug_assert_eq!(template.matches("{}").count(), parts.len(), "{template}");
    let mut out = Vec::with_capacity(template.len() + parts.iter().map(|p| p.len()).sum::<usize>());
    for (i, piece) in template.split("{}").enumerate() {
        if i > 0 {
            out.extend_from_slice(parts.get(i - 1).copied().unwrap_or_default());
        }
        out.extend_from_slice(piece.as_bytes());
    }
    Value::Error(Bytes::from(out))
}

/// `ERR unknown command 'foo', with args beginning with: 'bar' `, exactly as Redis words it.
pub fn unknown_command(args: &[Bytes]) -> Value {
    // As Redis: the name is cut to 128 bytes, and the quoted arguments together to about 128 more.
    let mut shown = Vec::new();
    for a in args[1..].iter() {
        if shown.len() >= 128 {
            break;
        }
        let room = 128 - shown.len();
        shown.push(b'\'');
        shown.extend_from_slice(printed(a, room));
        shown.extend_from_slice(b"' ");
    }
    fill("ERR unknown command '{}', with args beginning with: {}", &[printed(&args[0], 128), &shown])
}

pub fn wrong_arity(name: &str) -> Value {
    Value::error(format!("ERR wrong number of arguments for '{name}' command"))
}

pub fn unknown_subcommand(args: &[Bytes], parent: &str) -> Value {
    let parent = parent.to_ascii_uppercase();
    fill("ERR unknown subcommand '{}'. Try {} HELP.", &[printed(&args[1], 128), parent.as_bytes()])
}

/// `ERR invalid expire time in 'set' command`: a TTL that is not positive or overflows (see clock::ttl_to_wall).
pub fn invalid_expire(command: &str) -> Value {
    Value::error(format!("ERR invalid expire time in '{command}' command"))
}

pub fn misconf(reason: &str) -> Value {
    Value::error(format!("MISCONF Errors writing to the AOF file: {reason}"))
}

// Replication (docs/replication.md).
pub const ERR_READONLY: &str = "READONLY You can't write against a read only replica.";
pub const ERR_INVALID_PORT: &str = "ERR Invalid master port";
pub const ERR_VALUE_OUT_OF_RANGE: &str = "ERR value is out of range, must be positive";
pub const ERR_WAIT_ON_REPLICA: &str = "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.";
pub const ERR_WAITAOF_ON_REPLICA: &str = "ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.";
pub const ERR_WAITAOF_NO_AOF: &str = "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.";
pub const ERR_PSYNC_FOREIGN: &str = "ERR this is a Ruvio primary: only Ruvio replicas can follow it (PSYNC <replid> <lsn> <epoch> <aof> <port>)";
pub const ERR_PSYNC_ON_REPLICA: &str = "ERR this node is a replica; replicas of replicas are not supported";
/// A durable connection asked for more replicas than are connected: refused before the write runs, so retrying is
/// safe (go-redis does it by itself for NOREPLICAS).
pub const ERR_NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
pub const ERR_DURABILITY_NO_AOF: &str = "ERR CLIENT DURABILITY REPLICAS needs appendonly yes on this node (a durable write is fsynced here as well)";

/// A script passed a fencing token as a Lua number of 2^53 or more: a double that large may be another token rounded.
pub const ERR_SCRIPT_TOKEN_NUMBER: &str = "ERR fencing token passed as a Lua number of 2^53 or more, where a number may be another token rounded; pass tokens as the strings LEASE and SEMAPHORE return in scripts";

/// A durable lock grant that n replicas did not acknowledge in time: taken back through the log.
pub fn not_durable_grant_undone(replicas: usize, timeout_ms: u64) -> ruvio_protocol::Value {
    ruvio_protocol::Value::error(format!(
        "NOTDURABLE the grant was not acknowledged as fsynced by {replicas} replica(s) within {timeout_ms} ms; it was undone and the lock is not held"
    ))
}

/// A durable transaction or script that n replicas did not acknowledge in time: its lock grants were taken back
/// through the log; anything else it wrote stays applied.
pub fn not_durable_grants_undone(grants: usize, replicas: usize, timeout_ms: u64) -> ruvio_protocol::Value {
    ruvio_protocol::Value::error(format!(
        "NOTDURABLE the transaction or script was not acknowledged as fsynced by {replicas} replica(s) within {timeout_ms} ms; its {grants} lock grant(s) were undone and those locks are not held; any other write it made was applied here and a failover may lose it"
    ))
}

/// Any other durable write that n replicas did not acknowledge in time: applied here, not rolled back (as WAIT).
pub fn not_durable_write(replicas: usize, timeout_ms: u64) -> ruvio_protocol::Value {
    ruvio_protocol::Value::error(format!(
        "NOTDURABLE the write was applied here but not acknowledged as fsynced by {replicas} replica(s) within {timeout_ms} ms; a failover may lose it"
    ))
}
/// A durable write whose acknowledgements arrived while this primary held no write lease from its coordinators.
pub fn not_durable_no_lease(grant: bool, timeout_ms: u64) -> ruvio_protocol::Value {
    let what = if grant { "the grant was undone and the lock is not held" } else { "the write was applied here, and a failover may lose it" };
    ruvio_protocol::Value::error(format!(
        "NOTDURABLE this primary has not been leased by a majority of its coordinators within {timeout_ms} ms (it may be cut off from them, and a failover may be under way); {what}"
    ))
}

pub const ERR_LEASE_RANGE: &str = "ERR lease: ms must be 1..600000, coordinators 1..15, and the coordinator id 1..coordinators";
pub const ERR_LEASE_ON_REPLICA: &str = "ERR a replica takes no write lease; only a primary does";

pub fn lease_for_other_epoch(epoch: u64, own: u64) -> String {
    format!("ERR lease for epoch {epoch} refused: this primary is at epoch {own}")
}

pub const ERR_EPOCH_RANGE: &str = "ERR epoch must be an integer between 0 and 1023";

pub fn epoch_older_than_promised(epoch: u64, promised: u64) -> String {
    format!("ERR epoch {epoch} is older than the promised epoch {promised}")
}

// Texts that quote an argument (Redis's exact wording).
pub fn config_set_unknown(name: &str) -> Value {
    Value::error(format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'"))
}

pub fn config_set_failed(name: &str, reason: &str) -> Value {
    Value::error(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}"))
}

pub fn hello_syntax(option: &[u8]) -> Value {
    fill("ERR Syntax error in HELLO option '{}'", &[printed(option, usize::MAX)])
}

pub fn setinfo_unrecognized(attr: &[u8]) -> Value {
    fill("ERR Unrecognized option '{}'", &[printed(attr, usize::MAX)])
}

pub fn setinfo_bad_value(attr: &[u8]) -> Value {
    fill("ERR {} cannot contain spaces, newlines or special characters.", &[printed(attr, usize::MAX)])
}

pub fn unknown_client_type(t: &str) -> Value {
    Value::error(format!("ERR Unknown client type '{t}'"))
}

pub fn no_such_user(u: &str) -> Value {
    Value::error(format!("ERR No such user '{u}'"))
}

pub fn invalid_db_index(which: &str) -> Value {
    Value::error(format!("ERR invalid {which} DB index"))
}

pub fn unsupported_option(opt: &[u8]) -> Value {
    fill("ERR Unsupported option {}", &[printed(opt, usize::MAX)])
}
// ----- scripting (EVAL, SCRIPT, FUNCTION, FCALL): Redis 7's texts -----
pub const ERR_NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";
pub const ERR_BUSY_SCRIPT: &str = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const ERR_BUSY_FUNCTION: &str = "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
pub const ERR_NOTBUSY_SCRIPT: &str = "NOTBUSY No scripts in execution right now.";
pub const ERR_NOTBUSY_FUNCTION: &str = "NOTBUSY No scripts in execution right now.";
pub const ERR_UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
pub const ERR_SCRIPT_UNKNOWN_COMMAND: &str = "ERR Unknown Redis command called from script";
pub const ERR_SCRIPT_ACL_CHECK_INVALID: &str = "ERR Invalid command passed to redis.acl_check_cmd()";
pub const ERR_SCRIPT_NOT_ALLOWED: &str = "ERR This Redis command is not allowed from script";
pub const ERR_SCRIPT_WRITE_IN_RO: &str = "ERR Write commands are not allowed from read-only scripts.";
pub const ERR_SCRIPT_NO_ARGS: &str = "ERR Please specify at least one argument for this redis lib call";
pub const ERR_SCRIPT_ARG_TYPE: &str = "ERR Lua redis lib command arguments must be strings or integers";
pub const ERR_SCRIPT_WRONG_ARITY: &str = "ERR Wrong number of args calling Redis command from script";
pub const ERR_SCRIPT_WRITE_FLAG_RO: &str = "ERR Can not execute a script with write flag using *_ro command.";
pub const ERR_NUMKEYS_NEGATIVE: &str = "ERR Number of keys can't be negative";
pub const ERR_NUMKEYS_TOO_MANY: &str = "ERR Number of keys can't be greater than number of args";
pub const ERR_SCRIPT_FLUSH_MODE: &str = "ERR SCRIPT FLUSH only support SYNC|ASYNC option";
/// The reply if a script's client is woken without the script's reply (shutdown while it waited).
pub const ERR_SCRIPT_ABORTED: &str = "ERR script aborted by server shutdown";
pub const ERR_FUNCTION_NOT_FOUND: &str = "ERR Function not found";
pub const ERR_FUNCTION_NO_METADATA: &str = "ERR Missing library metadata";
pub const ERR_FUNCTION_NO_LIBRARY_NAME: &str = "ERR Library name was not given";
pub const ERR_FUNCTION_BAD_LIBRARY_NAME: &str = "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";
pub const ERR_FUNCTION_NONE_REGISTERED: &str = "ERR No functions registered";
pub const ERR_FUNCTION_NO_LIBRARY: &str = "ERR Library not found";
pub const ERR_FUNCTION_BAD_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
pub const ERR_SCRIPT_OOM: &str = "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'";
pub const ERR_SCRIPT_WRITE_ON_REPLICA: &str = "READONLY Can not run script with write flag on readonly replica";
pub const ERR_FUNCTION_BAD_METADATA: &str = "ERR Invalid library metadata";
pub const ERR_FUNCTION_NAME_TWICE: &str = "ERR Invalid metadata value, name argument was given multiple times";
pub const ERR_FCALL_NUMKEYS: &str = "ERR Bad number of keys provided";
pub const ERR_FUNCTION_FLUSH_MODE: &str = "ERR FUNCTION FLUSH only supports SYNC|ASYNC option";
pub const ERR_FUNCTION_LIST_NO_NAME: &str = "ERR library name argument was not given";
/// Redis's reply to a FUNCTION subcommand given more arguments than it takes (`restore`, `flush`).
pub fn function_sub_arity(sub: &str) -> Value {
    Value::error(format!("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try FUNCTION HELP."))
}
pub const ERR_FUNCTION_RESTORE_POLICY: &str = "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.";

/// A script's own error texts (Redis 7's wording), built with what they quote.
pub fn script_error(kind: ScriptError, detail: &str) -> Value {
    Value::error(match kind {
        ScriptError::UnexpectedFlag => format!("ERR Unexpected flag in script shebang: {detail}"),
        ScriptError::UnexpectedEngine => format!("ERR Unexpected engine in script shebang: {detail}"),
        ScriptError::UnknownShebangOption => format!("ERR Unknown lua shebang option: {detail}"),
        ScriptError::EngineNotFound => format!("ERR Engine '{detail}' not found"),
        ScriptError::InvalidMetadata => format!("ERR Invalid metadata value given: {detail}"),
        ScriptError::LibraryExists => format!("ERR Library '{detail}' already exists"),
        ScriptError::LibraryExistsOnRestore => format!("ERR Library {detail} already exists"),
        ScriptError::FunctionExists => format!("ERR Function {detail} already exists"),
        ScriptError::CompilingFunction => format!("ERR Error compiling function: {detail}"),
        ScriptError::RegisteringFunctions => format!("ERR Error registering functions: {detail}"),
        ScriptError::CompilingScript => format!("ERR Error compiling script (new function): {detail}"),
        ScriptError::UnknownOption => format!("ERR Unknown option given: {detail}"),
        ScriptError::UnknownArgument => format!("ERR Unknown argument {detail}"),
    })
}

/// Which of [`script_error`]'s texts.
#[derive(Debug, Clone, Copy)]
pub enum ScriptError {
    UnexpectedFlag,
    UnexpectedEngine,
    UnknownShebangOption,
    EngineNotFound,
    InvalidMetadata,
    LibraryExists,
    LibraryExistsOnRestore,
    FunctionExists,
    CompilingFunction,
    RegisteringFunctions,
    CompilingScript,
    UnknownOption,
    UnknownArgument,
}

/// `ERR Error running script (call to <name>): <text>`.
pub fn script_runtime_error(name: &str, text: &str) -> Value {
    Value::error(format!("ERR Error running script (call to {name}): {text}"))
}
pub const ERR_LUA_STACK_LIMIT: &str = "ERR reached lua stack limit";
/// A script's return value that would make an unbounded reply: tables reached more than once (a cycle, or one table
/// under many parents) beyond 100,000 elements, or more than 512 MB of strings in all.
pub const ERR_SCRIPT_REPLY_TOO_LARGE: &str = "ERR script reply too large: tables reached more than once add up to over 100000 elements, or strings to over 512 MB";

// ----- the rest -----
pub const ERR_AUTH_NO_PASSWORD: &str =
    "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?";

/// RESP2 subscribed mode: what a subscribed client may not run.
pub fn subscribed_only(command: &str) -> Value {
    Value::error(format!("ERR Can't execute '{command}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"))
}

/// A generic `ERR <reason>` for a failure with no Redis text (a compaction that failed, a protocol error).
pub fn err_because(reason: &str) -> Value {
    Value::error(format!("ERR {reason}"))
}

pub fn semaphore_limit_mismatch(current: u32, asked: u32) -> Value {
    Value::error(format!("ERR semaphore limit is {current}, not {asked}; the limit can change only when the semaphore has no holders"))
}

pub fn no_token_reservation(why: &str) -> Value {
    Value::error(format!("MISCONF cannot reserve fencing tokens on disk: {why}"))
}

/// Redis's text for a `denyoom` command refused while used memory is above `maxmemory` (policy noeviction).
pub const ERR_OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

// ----- ACL (acl.rs, commands/acl_family.rs): Redis 7.0's texts -----

pub const ERR_NOPERM_KEY: &str = "NOPERM this user has no permissions to access one of the keys used as arguments";
pub const ERR_NOPERM_CHANNEL: &str = "NOPERM this user has no permissions to access one of the channels used as arguments";

/// The same refusals inside a script's `redis.call` (Redis 7.0's texts; the script's error adds where).
pub const ERR_SCRIPT_NOPERM_COMMAND: &str = "ERR The user executing the script can't run this command or subcommand";
pub const ERR_SCRIPT_NOPERM_KEY: &str = "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments";
pub const ERR_SCRIPT_NOPERM_CHANNEL: &str = "ERR The user executing the script can't publish to the channel mentioned in the command";

/// A command the user may not run (`get`, `client|kill`).
pub fn noperm_command(name: &str) -> Value {
    Value::error(format!("NOPERM this user has no permissions to run the '{name}' command"))
}

/// `REPLICAOF ... EPOCH e` by a user without @coordination.
pub const ERR_NOPERM_EPOCH: &str = "NOPERM this user has no permissions to run 'replicaof' with EPOCH (ACL category @coordination, the coordinators' user)";
/// `REPLICAOF NO ONE EPOCH <last epoch>` without FORCE.
pub const ERR_LAST_EPOCH: &str = "ERR this is the last failover epoch: no later failover could raise tokens above it (docs/fencing.md); add FORCE to promote at it anyway";
