//! Lock commands: LEASE, RENEW, RELEASE, SEMAPHORE, IFGT, LOCKINFO. The rules live in [`crate::locks::engine`].

use super::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
