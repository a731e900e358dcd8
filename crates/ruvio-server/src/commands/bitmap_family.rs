//! Bitmap commands on strings.

use super::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
