//! `${env:VAR}`, `${workspaceFolder}` and `${HOME}` expansion, applied when a server is connected.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A string holding a secret (a token, client secret, private key, header or env value):
/// `Debug` and `Display` show `[redacted]`; read it with [`Secret::expose`]. Serialized as the
/// bare string, for the token store. The one secret type of warden: `warden_oauth::Secret` and
/// `warden_mcp::SecretString` are this type re-exported.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret value. Call this only where the value is sent, never to print it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

/// A variable a template may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Variable {
    /// `${env:NAME}`
    Env(String),
    /// `${workspaceFolder}`
    WorkspaceFolder,
    /// `${HOME}`
    Home,
}

impl fmt::Display for Variable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Variable::Env(name) => write!(f, "${{env:{name}}}"),
            Variable::WorkspaceFolder => f.write_str("${workspaceFolder}"),
            Variable::Home => f.write_str("${HOME}"),
        }
    }
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Literal(String),
    Variable(Variable),
}

/// A `${...}` expression that is not well formed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("`${{` at byte {offset} is not closed with `}}` (write `$${{` for a literal `${{`)")]
    Unterminated { offset: usize },
    #[error(
        "unknown variable `${{{name}}}`: the known forms are ${{env:NAME}}, ${{workspaceFolder}} and ${{HOME}} (write `$${{` for a literal `${{`)"
    )]
    UnknownVariable { name: String },
    #[error(
        "`${{env:{name}}}` does not name an environment variable (letters, digits and `_`, not starting with a digit)"
    )]
    BadEnvName { name: String },
}

/// Splits a template into literal text and variables. `$${` is a literal `${`.
pub fn parse_template(text: &str) -> Result<Vec<Segment>, TemplateError> {
    let mut segments = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(pos) = rest.find('$') {
        literal.push_str(&rest[..pos]);
        let after = &rest[pos..];
        if let Some(tail) = after.strip_prefix("$${") {
            literal.push_str("${");
            offset += pos + 3;
            rest = tail;
        } else if let Some(body) = after.strip_prefix("${") {
            let Some(close) = body.find('}') else {
                return Err(TemplateError::Unterminated {
                    offset: offset + pos,
                });
            };
            let variable = parse_variable(&body[..close])?;
            if !literal.is_empty() {
                segments.push(Segment::Literal(std::mem::take(&mut literal)));
            }
            segments.push(Segment::Variable(variable));
            offset += pos + 2 + close + 1;
            rest = &body[close + 1..];
        } else {
            literal.push('$');
            offset += pos + 1;
            rest = &after[1..];
        }
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        segments.push(Segment::Literal(literal));
    }
    Ok(segments)
}

fn parse_variable(inner: &str) -> Result<Variable, TemplateError> {
    match inner {
        "workspaceFolder" => Ok(Variable::WorkspaceFolder),
        "HOME" => Ok(Variable::Home),
        _ => match inner.strip_prefix("env:") {
            Some(name) if is_env_name(name) => Ok(Variable::Env(name.to_string())),
            Some(name) => Err(TemplateError::BadEnvName {
                name: name.to_string(),
            }),
            None => Err(TemplateError::UnknownVariable {
                name: inner.to_string(),
            }),
        },
    }
}

/// Whether `name` is a portable environment variable name.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether a template consists only of `${...}` references (no literal text); empty counts.
pub fn is_reference_only(text: &str) -> bool {
    parse_template(text).is_ok_and(|segments| {
        segments
            .iter()
            .all(|segment| matches!(segment, Segment::Variable(_)))
    })
}

/// Longest authentication scheme word accepted before a reference (`Bearer`, `token`, `Basic`,
/// `DPoP`, `Negotiate`, … are all far shorter).
const MAX_SCHEME_LEN: usize = 20;

/// Whether a value is an authentication scheme word, one space, then exactly one whole
/// `${env:NAME}` reference — `Bearer ${env:GITHUB_TOKEN}`, the form other hosts' docs use for an
/// `Authorization` header. The scheme is letters, digits and `-` (starting with a letter, at most
/// 20 characters): a word that names how the credential is sent, not the credential.
pub fn is_scheme_reference(text: &str) -> bool {
    let Some((scheme, reference)) = text.split_once(' ') else {
        return false;
    };
    is_scheme_word(scheme)
        && reference.starts_with("${env:")
        && matches!(
            parse_template(reference).as_deref(),
            Ok([Segment::Variable(Variable::Env(_))])
        )
}

/// Whether `word` may be an authentication scheme: letters, digits and `-`, starting with a
/// letter, at most 20 characters.
pub(crate) fn is_scheme_word(word: &str) -> bool {
    word.len() <= MAX_SCHEME_LEN
        && word.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// Whether a header of this name carries `SCHEME CREDENTIALS` (`Authorization`,
/// `Proxy-Authorization`), so that [`is_scheme_reference`] values are references, not literals.
pub fn is_authorization_header(name: &str) -> bool {
    name.eq_ignore_ascii_case("authorization") || name.eq_ignore_ascii_case("proxy-authorization")
}

/// Whether a header value holds no literal secret: only `${...}` references, or — for an
/// authorization header — a scheme word and one `${env:NAME}` reference. A project file may
/// hold such a value, and `warden mcp get` and the trust prompt show it as written.
pub fn is_shareable_header_value(name: &str, value: &str) -> bool {
    is_reference_only(value) || (is_authorization_header(name) && is_scheme_reference(value))
}

/// Escapes a literal value so that expansion gives it back unchanged (`${` becomes `$${`).
pub fn escape_literal(text: &str) -> String {
    text.replace("${", "$${")
}

type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What the variables expand to.
#[derive(Clone)]
pub struct VarContext {
    /// `${workspaceFolder}`.
    pub workspace_folder: PathBuf,
    /// `${HOME}`; `None` makes `${HOME}` undefined.
    pub home: Option<PathBuf>,
    /// `${env:NAME}`: looked up when the template is expanded, so a rotated value needs no restart.
    pub env: EnvLookup,
}

impl fmt::Debug for VarContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VarContext")
            .field("workspace_folder", &self.workspace_folder)
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

impl VarContext {
    /// Variables from this process: its environment and the home directory.
    pub fn from_process(workspace_folder: &Path) -> Self {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| etcetera::home_dir().ok());
        Self {
            workspace_folder: workspace_folder.to_path_buf(),
            home,
            env: Arc::new(|name| std::env::var(name).ok()),
        }
    }

    /// Variables from a fixed map (tests, or a caller that snapshots the environment).
    pub fn from_map(
        workspace_folder: &Path,
        home: Option<&Path>,
        env: BTreeMap<String, String>,
    ) -> Self {
        Self {
            workspace_folder: workspace_folder.to_path_buf(),
            home: home.map(Path::to_path_buf),
            env: Arc::new(move |name| env.get(name).cloned()),
        }
    }

    fn value_of(&self, variable: &Variable) -> Option<String> {
        match variable {
            Variable::Env(name) => (self.env)(name),
            Variable::WorkspaceFolder => Some(self.workspace_folder.to_string_lossy().into_owned()),
            Variable::Home => self
                .home
                .as_ref()
                .map(|home| home.to_string_lossy().into_owned()),
        }
    }
}

/// Expanding a server entry's variables failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {key}: {kind}", file.display())]
pub struct ExpandError {
    /// The file declaring the entry.
    pub file: PathBuf,
    /// The key path of the value, e.g. `mcp_servers.github.headers.Authorization`.
    pub key: String,
    pub kind: ExpandErrorKind,
}

/// Why a value could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandErrorKind {
    #[error("{variable} is not defined")]
    Undefined { variable: String },
    #[error(transparent)]
    Syntax(#[from] TemplateError),
}

/// Expands one template; `Err` carries the kind only (the caller adds file and key).
pub fn expand(text: &str, vars: &VarContext) -> Result<String, ExpandErrorKind> {
    let mut out = String::with_capacity(text.len());
    for segment in parse_template(text)? {
        match segment {
            Segment::Literal(literal) => out.push_str(&literal),
            Segment::Variable(variable) => match vars.value_of(&variable) {
                Some(value) => out.push_str(&value),
                None => {
                    return Err(ExpandErrorKind::Undefined {
                        variable: variable.to_string(),
                    });
                }
            },
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn vars() -> VarContext {
        let env = BTreeMap::from([("TOKEN".to_string(), "s3cret".to_string())]);
        VarContext::from_map(Path::new("/repo"), Some(Path::new("/home/u")), env)
    }

    #[test]
    fn expands_the_three_forms() {
        assert_eq!(
            expand("Bearer ${env:TOKEN}", &vars()).unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(
            expand("${workspaceFolder}/x:${HOME}", &vars()).unwrap(),
            "/repo/x:/home/u"
        );
    }

    #[test]
    fn double_dollar_is_a_literal_and_lone_dollar_stays() {
        assert_eq!(expand("a$${env:X}b $5", &vars()).unwrap(), "a${env:X}b $5");
        assert_eq!(escape_literal("${x} and $y"), "$${x} and $y");
        assert_eq!(expand(&escape_literal("${x}"), &vars()).unwrap(), "${x}");
    }

    #[test]
    fn undefined_and_malformed_variables_are_errors() {
        assert_eq!(
            expand("${env:MISSING}", &vars()),
            Err(ExpandErrorKind::Undefined {
                variable: "${env:MISSING}".into()
            })
        );
        assert!(matches!(
            parse_template("${foo}"),
            Err(TemplateError::UnknownVariable { name }) if name == "foo"
        ));
        assert!(matches!(
            parse_template("x ${env:A"),
            Err(TemplateError::Unterminated { offset: 2 })
        ));
        assert!(matches!(
            parse_template("${env:1A}"),
            Err(TemplateError::BadEnvName { .. })
        ));
        let no_home = VarContext::from_map(Path::new("/r"), None, BTreeMap::new());
        assert!(expand("${HOME}", &no_home).is_err());
    }

    #[test]
    fn reference_only_detects_literals() {
        assert!(is_reference_only("${env:A}"));
        assert!(is_reference_only("${env:A}${env:B}"));
        assert!(is_reference_only(""));
        assert!(!is_reference_only("Bearer ${env:A}"));
        assert!(!is_reference_only("plain"));
        assert!(!is_reference_only("$${env:A}"));
    }

    #[test]
    fn a_scheme_word_before_one_env_reference_is_a_reference() {
        for accepted in [
            "Bearer ${env:GH_TOKEN}",
            "token ${env:A}",
            "DPoP ${env:A_1}",
            "X-Custom-1 ${env:A}",
        ] {
            assert!(is_scheme_reference(accepted), "{accepted}");
        }
        for refused in [
            "Bearer abc",
            "Bearer ${env:A}${env:B}",
            "Bearer  ${env:A}",
            " ${env:A}",
            "Bearer ${env:A} x",
            "Bearer ${env:A}x",
            "Bearer x${env:A}",
            "Bearer ${HOME}",
            "Bearer ${workspaceFolder}",
            "Bearer $${env:A}",
            "Bearer ${env:A",
            "ghp_0123456789abcdef ${env:A}",
            "abcdefghijklmnopqrstu ${env:A}",
            "1Bearer ${env:A}",
            "Be.arer ${env:A}",
            "${env:A}",
        ] {
            assert!(!is_scheme_reference(refused), "{refused}");
        }
        assert!(is_shareable_header_value(
            "authorization",
            "Bearer ${env:A}"
        ));
        assert!(is_shareable_header_value(
            "Proxy-Authorization",
            "Basic ${env:A}"
        ));
        assert!(is_shareable_header_value("X-Api-Key", "${env:A}"));
        assert!(!is_shareable_header_value("X-Api-Key", "Key ${env:A}"));
        assert!(!is_shareable_header_value("Authorization", "Bearer abc"));
    }

    #[test]
    fn secrets_never_print() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret} {secret:?}"), "[redacted] [redacted]");
        assert_eq!(secret.expose(), "hunter2");
    }
}
