//! Prompt arguments as a person types them: `key=value` pairs (double- or single-quoted values,
//! Windows paths with backslashes kept as written) or one JSON object.

use std::collections::BTreeMap;

use serde_json::Value;

/// Why prompt arguments could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptArgsError {
    #[error("`{0}` is not key=value")]
    NotAPair(String),
    #[error("an empty key in `{0}`")]
    EmptyKey(String),
    #[error("the quote opened in `{0}` is never closed")]
    UnclosedQuote(String),
    #[error("the argument `{0}` is given twice")]
    Duplicate(String),
    #[error("the JSON arguments must be one object of strings: {0}")]
    Json(String),
}

/// Parses `text`: a JSON object (`{"city": "Paris"}`; numbers and booleans become their text)
/// or whitespace-separated `key=value` pairs where a value may be quoted (`note="two words"`).
/// Backslashes are literal, so `path=C:\Users\me` stays as written; inside double quotes `\"`
/// is a quote.
pub fn parse_prompt_arguments(text: &str) -> Result<BTreeMap<String, String>, PromptArgsError> {
    let trimmed = text.trim();
    if trimmed.starts_with('{') {
        return parse_json(trimmed);
    }
    let mut arguments = BTreeMap::new();
    let mut rest = trimmed;
    while !rest.is_empty() {
        let (pair, remaining) = next_pair(rest)?;
        let (key, value) = pair;
        if arguments.insert(key.clone(), value).is_some() {
            return Err(PromptArgsError::Duplicate(key));
        }
        rest = remaining.trim_start();
    }
    Ok(arguments)
}

fn parse_json(text: &str) -> Result<BTreeMap<String, String>, PromptArgsError> {
    let value: Value =
        serde_json::from_str(text).map_err(|error| PromptArgsError::Json(error.to_string()))?;
    let Value::Object(map) = value else {
        return Err(PromptArgsError::Json("not an object".to_owned()));
    };
    map.into_iter()
        .map(|(key, value)| match value {
            Value::String(text) => Ok((key, text)),
            Value::Number(_) | Value::Bool(_) => Ok((key, value.to_string())),
            other => Err(PromptArgsError::Json(format!(
                "`{key}` is {other}, not a string"
            ))),
        })
        .collect()
}

/// One `key=value` from the front of `text`, and what follows it.
fn next_pair(text: &str) -> Result<((String, String), &str), PromptArgsError> {
    let word_end = text.find(char::is_whitespace).unwrap_or(text.len());
    let Some(equals) = text[..word_end].find('=') else {
        return Err(PromptArgsError::NotAPair(text[..word_end].to_owned()));
    };
    let key = text[..equals].to_owned();
    if key.is_empty() {
        return Err(PromptArgsError::EmptyKey(text[..word_end].to_owned()));
    }
    let after = &text[equals + 1..];
    match after.chars().next() {
        Some(quote @ ('"' | '\'')) => {
            let mut value = String::new();
            let mut chars = after[1..].char_indices();
            while let Some((index, c)) = chars.next() {
                if c == quote {
                    let consumed = 1 + index + c.len_utf8();
                    return Ok(((key, value), &after[consumed..]));
                }
                if c == '\\'
                    && quote == '"'
                    && let Some((_, escaped @ ('"' | '\\'))) = chars.clone().next()
                {
                    chars.next();
                    value.push(escaped);
                    continue;
                }
                value.push(c);
            }
            Err(PromptArgsError::UnclosedQuote(text.to_owned()))
        }
        _ => {
            let end = after.find(char::is_whitespace).unwrap_or(after.len());
            Ok(((key, after[..end].to_owned()), &after[end..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Vec<(String, String)> {
        parse_prompt_arguments(text).unwrap().into_iter().collect()
    }

    fn pair(key: &str, value: &str) -> (String, String) {
        (key.to_owned(), value.to_owned())
    }

    #[test]
    fn plain_and_quoted_pairs() {
        assert_eq!(
            parsed(r#"city=Paris note="two words" mood='very good'"#),
            [
                pair("city", "Paris"),
                pair("mood", "very good"),
                pair("note", "two words")
            ]
        );
    }

    #[test]
    fn windows_paths_keep_their_backslashes() {
        assert_eq!(
            parsed(r#"path=C:\Users\me\notes.txt quoted="D:\data\new folder""#),
            [
                pair("path", r"C:\Users\me\notes.txt"),
                pair("quoted", r"D:\data\new folder")
            ]
        );
    }

    #[test]
    fn escaped_quotes_inside_double_quotes() {
        assert_eq!(
            parsed(r#"say="he said \"hi\"""#),
            [pair("say", r#"he said "hi""#)]
        );
    }

    #[test]
    fn json_objects() {
        assert_eq!(
            parsed(r#"{"city": "Paris", "days": 3, "metric": true}"#),
            [
                pair("city", "Paris"),
                pair("days", "3"),
                pair("metric", "true")
            ]
        );
        assert!(matches!(
            parse_prompt_arguments(r#"{"nested": {"a": 1}}"#),
            Err(PromptArgsError::Json(_))
        ));
    }

    #[test]
    fn bad_input_is_named() {
        assert_eq!(
            parse_prompt_arguments("city"),
            Err(PromptArgsError::NotAPair("city".to_owned()))
        );
        assert!(matches!(
            parse_prompt_arguments("=x"),
            Err(PromptArgsError::EmptyKey(_))
        ));
        assert!(matches!(
            parse_prompt_arguments("a=\"open"),
            Err(PromptArgsError::UnclosedQuote(_))
        ));
        assert_eq!(
            parse_prompt_arguments("a=1 a=2"),
            Err(PromptArgsError::Duplicate("a".to_owned()))
        );
        assert!(parse_prompt_arguments("  ").unwrap().is_empty());
    }
}
