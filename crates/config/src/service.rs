//! `[service] database_url`: the PostgreSQL database `warden service` keeps its data in instead
//! of the embedded SQLite file — a literal `postgres://` URL (its password never printed: Debug,
//! Display and errors show `[redacted]`) or `${env:NAME}`, the variable holding one.

use crate::expand::is_env_name;

/// What `database_url` may be, for messages.
pub const DATABASE_URL_FORMS: &str =
    "a postgres:// (or postgresql://) URL, or ${env:NAME} naming the variable that holds one";

/// `[service] database_url` as written: a URL or an environment reference.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(DatabaseUrlSource);

#[derive(Clone, PartialEq, Eq)]
enum DatabaseUrlSource {
    Literal(String),
    Env(String),
}

/// Why `database_url` gave no URL when the service started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatabaseUrlError {
    #[error(
        "[service] database_url reads ${{env:{0}}}, which is not set: set it to a postgres:// URL, or remove database_url to use the embedded SQLite database"
    )]
    Unset(String),
    #[error("${{env:{name}}} of [service] database_url holds {shown}, not {DATABASE_URL_FORMS}")]
    NotPostgres { name: String, shown: String },
}

impl DatabaseUrl {
    /// Reads the written value; the error is what the value should have been (with it
    /// redacted).
    pub fn parse(text: &str) -> Result<Self, String> {
        if let Some(name) = text
            .strip_prefix("${env:")
            .and_then(|rest| rest.strip_suffix('}'))
        {
            return if is_env_name(name) {
                Ok(Self(DatabaseUrlSource::Env(name.to_owned())))
            } else {
                Err(format!(
                    "{DATABASE_URL_FORMS}; \"{name}\" is not a variable name"
                ))
            };
        }
        if is_postgres_url(text) {
            Ok(Self(DatabaseUrlSource::Literal(text.to_owned())))
        } else {
            Err(format!(
                "{DATABASE_URL_FORMS}, not \"{}\"",
                redact_database_url(text)
            ))
        }
    }

    /// The URL to connect to: the literal, or the variable's value read now.
    pub fn resolve(&self) -> Result<String, DatabaseUrlError> {
        match &self.0 {
            DatabaseUrlSource::Literal(url) => Ok(url.clone()),
            DatabaseUrlSource::Env(name) => {
                let value = std::env::var(name)
                    .ok()
                    .filter(|value| !value.is_empty())
                    .ok_or_else(|| DatabaseUrlError::Unset(name.clone()))?;
                if is_postgres_url(&value) {
                    Ok(value)
                } else {
                    Err(DatabaseUrlError::NotPostgres {
                        name: name.clone(),
                        shown: if value.contains("://") {
                            format!("\"{}\"", redact_database_url(&value))
                        } else {
                            "a value".to_owned()
                        },
                    })
                }
            }
        }
    }

    /// As written, with a literal URL's password `[redacted]`.
    pub fn redacted(&self) -> String {
        match &self.0 {
            DatabaseUrlSource::Literal(url) => redact_database_url(url),
            DatabaseUrlSource::Env(name) => format!("${{env:{name}}}"),
        }
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DatabaseUrl({:?})", self.redacted())
    }
}

impl std::fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl serde::Serialize for DatabaseUrl {
    /// Serialized as shown: a password never leaves through a dump of the settings.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.redacted())
    }
}

impl schemars::JsonSchema for DatabaseUrl {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DatabaseUrl".into()
    }

    fn json_schema(_generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^(postgres(ql)?://.+|\\$\\{env:[A-Za-z_][A-Za-z0-9_]*\\})$",
            "description": "A postgres:// URL, or ${env:NAME} naming the variable that holds one."
        })
    }
}

fn is_postgres_url(text: &str) -> bool {
    ["postgres://", "postgresql://"].iter().any(|scheme| {
        text.strip_prefix(scheme)
            .is_some_and(|rest| !rest.is_empty())
    })
}

/// `scheme://user:secret@host/…` with the password shown as `[redacted]`; anything else as is.
pub fn redact_database_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    let tail = redact_query_password(tail);
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:[redacted]@{host}{tail}"),
        None => format!("{scheme}://{userinfo}@{host}{tail}"),
    }
}

/// `?password=…` in a URL's query (libpq's form) redacted too.
fn redact_query_password(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_owned();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => {
                format!("{key}=[redacted]")
            }
            _ => pair.to_owned(),
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_literal_url_keeps_its_password_for_connecting_but_never_shows_it() {
        let url = DatabaseUrl::parse("postgres://warden:hunter2@db.internal:5432/warden").unwrap();
        assert_eq!(
            url.resolve().unwrap(),
            "postgres://warden:hunter2@db.internal:5432/warden"
        );
        for shown in [
            format!("{url:?}"),
            url.to_string(),
            serde_json::to_string(&url).unwrap(),
        ] {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(
                shown.contains("warden:[redacted]@db.internal:5432/warden"),
                "{shown}"
            );
        }
        assert_eq!(
            redact_database_url("postgresql://u@h/db?sslmode=disable&password=pw"),
            "postgresql://u@h/db?sslmode=disable&password=[redacted]"
        );
        assert_eq!(redact_database_url("postgres://h/db"), "postgres://h/db");
    }

    #[test]
    fn an_env_reference_is_read_when_resolved_and_other_values_are_refused() {
        let url = DatabaseUrl::parse("${env:WARDEN_TEST_DB_URL_UNSET_6271}").unwrap();
        assert_eq!(url.to_string(), "${env:WARDEN_TEST_DB_URL_UNSET_6271}");
        let error = url.resolve().unwrap_err();
        assert_eq!(
            error,
            DatabaseUrlError::Unset("WARDEN_TEST_DB_URL_UNSET_6271".into())
        );
        assert!(error.to_string().contains("is not set"));
        let refused = DatabaseUrl::parse("mysql://root:hunter2@db/x").unwrap_err();
        assert!(refused.contains("postgres://"), "{refused}");
        assert!(!refused.contains("hunter2"), "{refused}");
        assert!(DatabaseUrl::parse("${env:1BAD}").is_err());
        assert!(DatabaseUrl::parse("postgres://").is_err());
        assert!(DatabaseUrl::parse("").is_err());
    }
}
