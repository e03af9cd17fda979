//! The context budget: a cheap token estimate (bytes / 4) and elision of the oldest tool results, each replaced by a notice.

use crate::conversation::{Message, ToolSpec};

/// The most tokens a request may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenBudget {
    pub tokens: u64,
}

/// The most tokens kept free for the answer.
pub(crate) const MAX_OUTPUT_RESERVE: u64 = 8192;

/// Tokens kept free for the answer in a context window of `window` tokens: a quarter of it, at
/// most [`MAX_OUTPUT_RESERVE`]. A small local model (a 4k or 8k window) keeps three quarters
/// for the prompt, the tools and their results; a fixed 8k reserve would leave it nothing.
pub fn output_reserve(window: u64) -> u64 {
    (window / 4).min(MAX_OUTPUT_RESERVE)
}

/// Estimated tokens of `bytes` bytes: one token per four bytes, rounded up.
pub(crate) fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// Estimated tokens of a whole request.
pub(crate) fn estimate_request(system: &str, tools: &[ToolSpec], messages: &[Message]) -> u64 {
    let tools_bytes: usize = tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.input_schema.to_string().len())
        .sum();
    let message_bytes: usize = messages.iter().map(Message::byte_len).sum();
    estimate_tokens(system.len() + tools_bytes + message_bytes)
}

/// What an elision pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elision {
    /// Tool results replaced by a notice.
    pub results: usize,
    pub before: u64,
    pub after: u64,
}

/// The text that replaces an elided tool result.
pub(crate) fn elision_notice(original_bytes: usize) -> String {
    format!(
        "[this tool result ({original_bytes} bytes) was elided to fit the context window; call the tool again if you need it]"
    )
}

/// When the request is over `budget`, replaces the oldest tool results (not yet elided) by a
/// notice, oldest first, until it fits or none is left. `None` when nothing was elided.
pub(crate) fn elide_oldest_tool_results(
    system: &str,
    tools: &[ToolSpec],
    messages: &mut [Message],
    budget: TokenBudget,
) -> Option<Elision> {
    let before = estimate_request(system, tools, messages);
    if before <= budget.tokens {
        return None;
    }
    let mut current = before;
    let mut results = 0;
    for message in messages.iter_mut() {
        if current <= budget.tokens {
            break;
        }
        if let Message::ToolResult { text, elided, .. } = message
            && !*elided
        {
            let notice = elision_notice(text.len());
            if notice.len() >= text.len() {
                continue;
            }
            let saved = estimate_tokens(text.len()).saturating_sub(estimate_tokens(notice.len()));
            *text = notice;
            *elided = true;
            results += 1;
            current = current.saturating_sub(saved);
        }
    }
    (results > 0).then(|| Elision {
        results,
        before,
        after: estimate_request(system, tools, messages),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_reserve_is_a_quarter_of_a_small_window_and_8k_at_most() {
        assert_eq!(output_reserve(4096), 1024);
        assert_eq!(output_reserve(8192), 2048);
        assert_eq!(output_reserve(32_768), 8192);
        assert_eq!(output_reserve(128_000), 8192);
        assert_eq!(output_reserve(0), 0);
    }
}
