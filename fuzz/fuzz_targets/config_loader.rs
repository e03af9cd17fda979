//! Fuzz target: arbitrary bytes through the configuration loader (`parse_str`) and the other
//! text entry points; none of them may panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use warden_config::{
    Scope, VarContext, add_servers, parse_mcp_json, parse_str, parse_template, remove_server,
};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz/config.toml");
    for scope in [Scope::User, Scope::Project] {
        if let Ok(parsed) = parse_str(text, path, scope) {
            let vars = VarContext::from_map(Path::new("/ws"), None, Default::default());
            for entry in parsed.servers.values() {
                let _ = entry.resolve(&vars);
                let _ = entry.trust_hash();
                let _ = remove_server(text, path, &entry.name);
            }
        }
    }
    let _ = parse_template(text);
    let _ = parse_mcp_json(text);
    if let Ok(imported) = parse_mcp_json(text) {
        let servers: Vec<_> = imported.into_iter().map(|s| (s.name, s.server)).collect();
        let _ = add_servers("schema_version = 1\n", path, &servers);
    }
});
