//! The errors of loading and validating configuration: each names the file, the key path and what was expected.

use std::fmt;
use std::path::PathBuf;

use crate::expand::TemplateError;

/// One thing wrong with a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file the problem is in.
    pub file: PathBuf,
    /// The dotted key path, e.g. `mcp_servers.github.tool_timeout_sec`; empty for the whole file.
    pub key: String,
    /// What is wrong.
    pub problem: Problem,
}

/// What is wrong at a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The file is not valid TOML (the parser's message carries line and column).
    Syntax(String),
    /// A key this table does not have.
    UnknownKey {
        /// The nearest valid key, when one is close enough.
        suggestion: Option<String>,
        /// Every key valid here.
        valid: Vec<&'static str>,
    },
    /// A value of the wrong TOML type.
    WrongType {
        expected: &'static str,
        found: &'static str,
    },
    /// A required key is absent.
    Missing { expected: &'static str },
    /// The type is right but the value is not acceptable.
    InvalidValue { expected: String },
    /// A key of one transport on an entry of the other.
    WrongTransport {
        belongs_to: &'static str,
        entry_is: &'static str,
    },
    /// A literal value in a shared (project) file where a `${...}` reference is required.
    LiteralSecret { reference: String },
    /// `schema_version` names a version this build does not know.
    UnsupportedSchemaVersion {
        found: String,
        supported: &'static [i64],
    },
    /// A `${...}` expression that is not one of the known forms.
    Template(TemplateError),
    /// A key this file has no authority to set (e.g. hooks in a project file); the reason says why.
    NotAllowed { reason: String },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Syntax(message) => write!(f, "not valid TOML: {message}"),
            Problem::UnknownKey { suggestion, valid } => {
                write!(f, "unknown key")?;
                match suggestion {
                    Some(near) => write!(f, "; did you mean `{near}`?"),
                    None => write!(f, "; valid keys here: {}", valid.join(", ")),
                }
            }
            Problem::WrongType { expected, found } => {
                write!(f, "expected {expected}, found {found}")
            }
            Problem::Missing { expected } => write!(f, "missing: expected {expected}"),
            Problem::InvalidValue { expected } => write!(f, "expected {expected}"),
            Problem::WrongTransport {
                belongs_to,
                entry_is,
            } => write!(
                f,
                "this key belongs to {belongs_to} servers, but this entry is a {entry_is} server"
            ),
            Problem::LiteralSecret { reference } => write!(
                f,
                "a project file is shared, so this value must be a ${{...}} reference, not a literal; \
                 write {reference} and set the variable in your environment"
            ),
            Problem::UnsupportedSchemaVersion { found, supported } => {
                let list: Vec<String> = supported.iter().map(i64::to_string).collect();
                write!(
                    f,
                    "schema_version {found} is not supported; this build supports {}",
                    list.join(", ")
                )
            }
            Problem::Template(error) => write!(f, "{error}"),
            Problem::NotAllowed { reason } => write!(f, "{reason}"),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.problem)
        } else {
            write!(f, "{}: {}: {}", self.file.display(), self.key, self.problem)
        }
    }
}

/// Loading configuration failed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file exists but could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file given with `-c` does not exist.
    #[error("the configuration file {} given with -c does not exist", .0.display())]
    ExplicitFileMissing(PathBuf),
    /// The trust store, which says which project agent profiles may load, cannot be read.
    #[error(transparent)]
    Trust(#[from] crate::trust::TrustError),
    /// One or more files are invalid; every problem found is listed.
    #[error("{}", render_diagnostics(.0))]
    Invalid(Vec<Diagnostic>),
}

impl ConfigError {
    /// The individual problems, when the error is about file contents.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            ConfigError::Invalid(list) => list,
            _ => &[],
        }
    }
}

fn render_diagnostics(list: &[Diagnostic]) -> String {
    let mut out = match list.len() {
        1 => String::from("invalid configuration:"),
        n => format!("invalid configuration ({n} problems):"),
    };
    for diagnostic in list {
        out.push_str("\n  ");
        out.push_str(&diagnostic.to_string());
    }
    out
}
