//! A bounded ring of a child's last stderr lines, fed by a reader that never grows without limit.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt};

/// How many stderr lines are kept.
pub const STDERR_LINES_KEPT: usize = 20;
/// Longest kept line in bytes; the rest of a longer line is dropped.
const MAX_LINE_BYTES: usize = 1024;

/// The last [`STDERR_LINES_KEPT`] lines a process wrote to stderr.
#[derive(Debug, Clone, Default)]
pub(crate) struct StderrRing {
    lines: Arc<Mutex<VecDeque<String>>>,
}

impl StderrRing {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds one line, dropping the oldest when full.
    pub(crate) fn push(&self, line: &str) {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            return;
        }
        let mut lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == STDERR_LINES_KEPT {
            lines.pop_front();
        }
        lines.push_back(line.to_owned());
    }

    /// The kept lines, oldest first.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    /// The most recent non-empty line.
    pub(crate) fn last_line(&self) -> Option<String> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .back()
            .cloned()
    }

    /// Forgets every line (a new process starts).
    pub(crate) fn clear(&self) {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Reads `source` to its end, keeping the last lines; memory stays bounded under any flood.
    pub(crate) async fn drain<R: AsyncRead + Unpin>(&self, mut source: R) {
        let mut buffer = vec![0u8; 8192];
        let mut current: Vec<u8> = Vec::with_capacity(256);
        loop {
            let read = match source.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => read,
            };
            for &byte in &buffer[..read] {
                if byte == b'\n' {
                    self.push(&String::from_utf8_lossy(&current));
                    current.clear();
                } else if current.len() < MAX_LINE_BYTES {
                    current.push(byte);
                }
            }
        }
        if !current.is_empty() {
            self.push(&String::from_utf8_lossy(&current));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keeps_only_the_last_lines_and_bounds_each_line() {
        let ring = StderrRing::new();
        let mut flood = Vec::new();
        for index in 0..1000 {
            flood.extend_from_slice(format!("line {index}\n").as_bytes());
        }
        flood.extend(std::iter::repeat_n(b'x', 100_000));
        flood.push(b'\n');
        flood.extend_from_slice(b"final words");
        ring.drain(flood.as_slice()).await;
        let lines = ring.lines();
        assert_eq!(lines.len(), STDERR_LINES_KEPT);
        assert_eq!(lines[0], "line 982");
        assert_eq!(lines[STDERR_LINES_KEPT - 2].len(), MAX_LINE_BYTES);
        assert_eq!(ring.last_line().as_deref(), Some("final words"));
    }
}
