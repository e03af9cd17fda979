//! One route of the API, declared once: its method, path and handler (what the router mounts) and what the OpenAPI document says of it (summary, query parameters, request and response shapes, error statuses).

use axum::handler::Handler;
use axum::routing::MethodRouter;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::Value;

use super::ServiceState;

/// Writes a type's JSON Schema among the document's components and answers a reference to it.
pub(crate) type SchemaOf = fn(&mut SchemaGenerator) -> Schema;

/// One query parameter: name, JSON Schema, description.
pub(crate) type Query = (&'static str, Value, &'static str);

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// What one operation answers on success.
pub(crate) enum Success {
    Json(u16, SchemaOf),
    /// 201 when it made something, 200 when it replaced it.
    CreatedOrReplaced(SchemaOf),
    NoContent,
    EventStream,
    /// A file, as an attachment of its own media type.
    Attachment,
}

/// A route that needs a key: the router mounts `handler` at `method` and `path`; the OpenAPI
/// document describes it from the rest.
pub(crate) struct Route {
    pub(crate) method: &'static str,
    pub(crate) path: &'static str,
    pub(crate) handler: MethodRouter<ServiceState>,
    pub(crate) summary: &'static str,
    /// The body's schema and whether the body is required.
    pub(crate) request: Option<(SchemaOf, bool)>,
    pub(crate) query: Vec<Query>,
    /// 204 unless said otherwise.
    pub(crate) success: Success,
    /// Error statuses beyond 401 and 429 (every operation needs a key and counts against its
    /// quota).
    pub(crate) errors: &'static [u16],
}

macro_rules! method {
    ($name:ident) => {
        pub(crate) fn $name<H, T>(path: &'static str, handler: H, summary: &'static str) -> Self
        where
            H: Handler<T, ServiceState>,
            T: 'static,
        {
            Self {
                method: stringify!($name),
                path,
                handler: axum::routing::$name(handler),
                summary,
                request: None,
                query: Vec::new(),
                success: Success::NoContent,
                errors: &[],
            }
        }
    };
}

impl Route {
    method!(get);
    method!(post);
    method!(put);
    method!(delete);

    /// A JSON body of type `T` is required.
    pub(crate) fn body<T: JsonSchema>(mut self) -> Self {
        self.request = Some((schema_of::<T>, true));
        self
    }

    /// A JSON body of type `T` may be sent.
    pub(crate) fn optional_body<T: JsonSchema>(mut self) -> Self {
        self.request = Some((schema_of::<T>, false));
        self
    }

    pub(crate) fn query(mut self, query: Vec<Query>) -> Self {
        self.query = query;
        self
    }

    /// Answers `status` with a JSON `T`.
    pub(crate) fn json<T: JsonSchema>(mut self, status: u16) -> Self {
        self.success = Success::Json(status, schema_of::<T>);
        self
    }

    /// Answers a JSON `T`: 201 when it made something, 200 when it replaced it.
    pub(crate) fn created_or_replaced<T: JsonSchema>(mut self) -> Self {
        self.success = Success::CreatedOrReplaced(schema_of::<T>);
        self
    }

    pub(crate) fn event_stream(mut self) -> Self {
        self.success = Success::EventStream;
        self
    }

    pub(crate) fn attachment(mut self) -> Self {
        self.success = Success::Attachment;
        self
    }

    pub(crate) fn errors(mut self, errors: &'static [u16]) -> Self {
        self.errors = errors;
        self
    }
}
