//! A bounded cache of compiled argument validators, keyed by tool identity and the tool's input
//! schema, so the gate compiles a schema once per catalogue generation, not per call; a call
//! whose descriptor shares the cached schema (the same `Arc`) is a lookup.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::tool::ToolIdentity;
use crate::validate::{check_arguments, check_without_schema, compile_schema};

/// How many tools' validators a gate keeps by default (the least recently used one goes first).
pub const DEFAULT_SCHEMA_CACHE_CAPACITY: usize = 1024;

/// A compiled schema, or why it cannot be compiled (the call is refused with that reason).
type Compiled = Result<Arc<jsonschema::Validator>, String>;

/// One tool's compiled schema, with the schema it was compiled from.
struct CachedSchema {
    /// The schema itself. A call whose descriptor holds this very allocation (the catalogue
    /// hands out one `Arc` per tool and generation) is a hit without looking inside it; this
    /// entry keeps the allocation alive, so its address cannot be reused by another schema.
    /// Any other allocation is compared by value, and on a match adopted, so the next call is a
    /// pointer check again.
    schema: Arc<Value>,
    compiled: Compiled,
    last_used: u64,
}

#[derive(Default)]
struct CacheState {
    entries: HashMap<ToolIdentity, CachedSchema>,
    clock: u64,
}

/// Compiled validators, one per tool identity. A schema that changes (a new catalogue
/// generation) no longer matches the cached one, so it is compiled afresh and replaces the old
/// entry; when the cache is full the least recently used tool is dropped.
pub struct SchemaCache {
    capacity: usize,
    state: Mutex<CacheState>,
}

impl std::fmt::Debug for SchemaCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaCache")
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .finish()
    }
}

impl Default for SchemaCache {
    fn default() -> Self {
        Self::new(DEFAULT_SCHEMA_CACHE_CAPACITY)
    }
}

impl SchemaCache {
    /// An empty cache holding at most `capacity` tools (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            state: Mutex::new(CacheState::default()),
        }
    }

    /// How many tools have a compiled schema cached.
    pub fn len(&self) -> usize {
        self.state.lock().map_or(0, |state| state.entries.len())
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks `arguments` against `schema` (the schema `identity` has now), compiling it only
    /// when this identity has no cached validator for exactly this schema. Same answers as
    /// [`crate::validate_arguments`].
    pub fn validate(
        &self,
        identity: &ToolIdentity,
        schema: &Arc<Value>,
        arguments: &Value,
    ) -> Result<(), String> {
        if schema.is_null() {
            return check_without_schema(arguments);
        }
        match self.compiled(identity, schema) {
            Ok(validator) => check_arguments(&validator, arguments),
            Err(reason) => Err(reason),
        }
    }

    fn compiled(&self, identity: &ToolIdentity, schema: &Arc<Value>) -> Compiled {
        if let Ok(mut state) = self.state.lock() {
            state.clock += 1;
            let now = state.clock;
            if let Some(entry) = state.entries.get_mut(identity) {
                let hit = Arc::ptr_eq(&entry.schema, schema) || {
                    // Another allocation (a host tool that builds its schema per call, a new
                    // catalogue generation): the same schema by value is still a hit.
                    let same = *entry.schema == **schema;
                    if same {
                        entry.schema = schema.clone();
                    }
                    same
                };
                if hit {
                    entry.last_used = now;
                    return entry.compiled.clone();
                }
            }
        }
        // Compiled outside the lock: other calls go on meanwhile (two racing misses compile twice).
        let compiled = compile_schema(schema).map(Arc::new);
        if let Ok(mut state) = self.state.lock() {
            state.clock += 1;
            let last_used = state.clock;
            if !state.entries.contains_key(identity) && state.entries.len() >= self.capacity {
                let oldest = state
                    .entries
                    .iter()
                    .min_by_key(|(_, entry)| entry.last_used)
                    .map(|(identity, _)| identity.clone());
                if let Some(oldest) = oldest {
                    state.entries.remove(&oldest);
                }
            }
            state.entries.insert(
                identity.clone(),
                CachedSchema {
                    schema: schema.clone(),
                    compiled: compiled.clone(),
                    last_used,
                },
            );
        }
        compiled
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn string_path() -> Arc<Value> {
        Arc::new(
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        )
    }

    fn integer_path() -> Arc<Value> {
        Arc::new(
            json!({"type": "object", "properties": {"path": {"type": "integer"}}, "required": ["path"]}),
        )
    }

    fn compiled_of(cache: &SchemaCache, tool: &ToolIdentity) -> Arc<jsonschema::Validator> {
        let state = cache.state.lock().unwrap();
        state.entries[tool].compiled.clone().unwrap()
    }

    #[test]
    fn the_same_schema_in_another_allocation_is_adopted_not_compiled_again() {
        let cache = SchemaCache::default();
        let tool = ToolIdentity::mcp("fs", "read");
        let first = string_path();
        assert!(
            cache
                .validate(&tool, &first, &json!({"path": "/a"}))
                .is_ok()
        );
        let compiled = compiled_of(&cache, &tool);
        let second = string_path();
        assert!(!Arc::ptr_eq(&first, &second));
        assert!(cache.validate(&tool, &second, &json!({"path": 1})).is_err());
        assert!(Arc::ptr_eq(&compiled, &compiled_of(&cache, &tool)));
        let state = cache.state.lock().unwrap();
        assert!(Arc::ptr_eq(&state.entries[&tool].schema, &second));
    }

    #[test]
    fn a_changed_schema_is_compiled_afresh() {
        let cache = SchemaCache::default();
        let tool = ToolIdentity::mcp("fs", "read");
        let text = json!({"path": "/tmp"});
        let number = json!({"path": 7});
        assert!(cache.validate(&tool, &string_path(), &text).is_ok());
        assert!(cache.validate(&tool, &string_path(), &number).is_err());
        assert!(cache.validate(&tool, &integer_path(), &number).is_ok());
        assert!(cache.validate(&tool, &integer_path(), &text).is_err());
        assert_eq!(cache.len(), 1, "one entry per tool");
    }

    #[test]
    fn answers_match_the_uncached_validation() {
        let cache = SchemaCache::default();
        let tool = ToolIdentity::mcp("fs", "read");
        for arguments in [
            json!({"path": "/tmp"}),
            json!({"path": 7}),
            json!({}),
            json!([1]),
        ] {
            assert_eq!(
                cache.validate(&tool, &string_path(), &arguments),
                crate::validate_arguments(&string_path(), &arguments)
            );
        }
        let broken = Arc::new(json!({"type": 12}));
        assert_eq!(
            cache.validate(&tool, &broken, &json!({})),
            crate::validate_arguments(&broken, &json!({}))
        );
        let none = Arc::new(Value::Null);
        assert!(cache.validate(&tool, &none, &json!({"x": 1})).is_ok());
        assert!(cache.validate(&tool, &none, &json!(1)).is_err());
    }

    #[test]
    fn the_least_recently_used_tool_is_dropped_when_full() {
        let cache = SchemaCache::new(2);
        let (a, b, c) = (
            ToolIdentity::mcp("s", "a"),
            ToolIdentity::mcp("s", "b"),
            ToolIdentity::mcp("s", "c"),
        );
        let arguments = json!({"path": "x"});
        cache.validate(&a, &string_path(), &arguments).unwrap();
        cache.validate(&b, &string_path(), &arguments).unwrap();
        cache.validate(&a, &string_path(), &arguments).unwrap();
        cache.validate(&c, &string_path(), &arguments).unwrap();
        let state = cache.state.lock().unwrap();
        assert_eq!(state.entries.len(), 2);
        assert!(state.entries.contains_key(&a));
        assert!(state.entries.contains_key(&c));
        assert!(!state.entries.contains_key(&b));
    }
}
