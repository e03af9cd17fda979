//! Fuzz target: the command line's pattern and duration parsers (`--allowed-tools` items, the
//! `*_sec` bounds, `~/` paths) on arbitrary text; none may panic, and every accepted pattern
//! matches without panicking and matches its own text.
#![no_main]

use std::path::Path;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use warden_config::{DEFAULT_TOOL_TIMEOUT, MAX_TIMEOUT, ToolGlob, timeout_seconds, user_path};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(globs) = ToolGlob::parse_list(text) {
        for glob in globs {
            let _ = glob.matches(text);
            assert!(glob.matches(glob.as_str()), "{glob} does not match itself");
        }
    }
    if let Ok(seconds) = text.trim().parse::<u64>() {
        if let Ok(timeout) = timeout_seconds(seconds, DEFAULT_TOOL_TIMEOUT) {
            assert!(timeout <= MAX_TIMEOUT && timeout >= Duration::from_secs(1));
            let _ = std::time::Instant::now() + timeout;
        }
    }
    let _ = user_path(text, Some(Path::new("/home/fuzz")));
});
