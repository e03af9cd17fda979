//! Opening the authorization URL: `$BROWSER` when set, else the platform opener.

use std::process::{Command, Stdio};

/// Open `url` in a browser without waiting for it. The caller prints the URL either way.
pub fn open_in_browser(url: &str) -> std::io::Result<()> {
    let mut command = match std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
    {
        Some(browser) => {
            let mut parts = browser.split_whitespace();
            let program = parts.next().unwrap_or("xdg-open").to_string();
            let mut command = Command::new(program);
            command.args(parts);
            command
        }
        None if cfg!(target_os = "macos") => Command::new("open"),
        None => Command::new("xdg-open"),
    };
    command
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
}
