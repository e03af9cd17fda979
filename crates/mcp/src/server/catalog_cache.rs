//! The catalogue cache: tools, resources, templates and prompts fetched with pagination, kept under `ttlMs` and connection epochs, and refreshed on `list_changed`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    PaginatedRequestParams, Prompt, ProtocolVersion, Resource, ResourceTemplate, Tool,
};
use tokio::sync::mpsc;

use super::failure::bounded;
use super::{Live, ServerSlot};
use crate::catalog::{Catalog, Listed, McpTool, ToolIdentity, list_pages};
use crate::client::ListKind;
use crate::error::McpError;

pub(super) struct Cached<T> {
    pub(super) items: Vec<T>,
    pub(super) fetched_at: Instant,
    pub(super) ttl: Option<Duration>,
    pub(super) change_epoch: u64,
    pub(super) connection_epoch: u64,
}

#[derive(Default)]
pub(super) struct CatalogCache {
    pub(super) tools: Option<Cached<Tool>>,
    pub(super) resources: Option<Cached<Resource>>,
    pub(super) templates: Option<Cached<ResourceTemplate>>,
    pub(super) prompts: Option<Cached<Prompt>>,
    pub(super) generation: u64,
    pub(super) tools_epoch: u64,
    pub(super) resources_epoch: u64,
    pub(super) prompts_epoch: u64,
    pub(super) warnings: Vec<String>,
}

impl CatalogCache {
    /// Puts a freshly fetched list in its slot; bumps the generation when the items changed.
    fn store<T: PartialEq>(
        &mut self,
        slot: impl FnOnce(&mut Self) -> &mut Option<Cached<T>>,
        fresh: Cached<T>,
    ) {
        let stored = slot(self);
        let changed = stored.as_ref().is_none_or(|old| old.items != fresh.items);
        *stored = Some(fresh);
        if changed {
            self.generation += 1;
        }
    }

    fn epoch(&self, kind: ListKind) -> u64 {
        match kind {
            ListKind::Tools => self.tools_epoch,
            ListKind::Resources => self.resources_epoch,
            ListKind::Prompts => self.prompts_epoch,
        }
    }

    /// Keeps `warning` (once: the same failure met again, by a `list_changed` and then by the
    /// next listing, is said once).
    fn warn(&mut self, warning: String) {
        const KEPT: usize = 20;
        if self.warnings.contains(&warning) {
            return;
        }
        if self.warnings.len() == KEPT {
            self.warnings.remove(0);
        }
        self.warnings.push(warning);
    }
}

/// Which list to fetch.
#[derive(Clone, Copy)]
pub(super) enum ListWhich {
    Tools,
    Resources,
    Templates,
    Prompts,
}

impl ServerSlot {
    pub(super) fn filtered(&self, tools: &[Tool]) -> Vec<McpTool> {
        tools
            .iter()
            .filter(|tool| self.spec.tool_filter.admits(&tool.name))
            .map(|tool| McpTool {
                identity: ToolIdentity::new(self.spec.name.clone(), tool.name.to_string()),
                definition: tool.clone(),
            })
            .collect()
    }

    /// A 2026-07-28 server sends `list_changed` only on a `subscriptions/listen` stream: open one
    /// for the lists it says can change. The connection is ready only once the server has
    /// acknowledged it, so no change made after connecting can slip by unnoticed. A failed
    /// listen is a warning, never fatal.
    pub(super) async fn listen_for_list_changes(&self, live: &Arc<Live>) {
        use rmcp::model::SubscriptionFilter;
        let Some(info) = live.peer_info() else {
            return;
        };
        if info.protocol_version < ProtocolVersion::V_2026_07_28 {
            return;
        }
        let capabilities = &info.capabilities;
        let mut filter = SubscriptionFilter::builder();
        let mut wanted = false;
        if capabilities
            .tools
            .as_ref()
            .and_then(|tools| tools.list_changed)
            .unwrap_or(false)
        {
            filter = filter.tools_list_changed();
            wanted = true;
        }
        if capabilities
            .resources
            .as_ref()
            .and_then(|resources| resources.list_changed)
            .unwrap_or(false)
        {
            filter = filter.resources_list_changed();
            wanted = true;
        }
        if capabilities
            .prompts
            .as_ref()
            .and_then(|prompts| prompts.list_changed)
            .unwrap_or(false)
        {
            filter = filter.prompts_list_changed();
            wanted = true;
        }
        if !wanted {
            return;
        }
        let filter = filter.build();
        let peer = live.service.peer().clone();
        let changes = live.context.list_changed.clone();
        let closed = live.closed.clone();
        let timeout = self.spec.request_timeout;
        let subscription = match tokio::time::timeout(timeout, peer.listen(filter)).await {
            Ok(Ok(subscription)) => subscription,
            Ok(Err(error)) => {
                self.lock_catalog().warn(format!(
                    "subscriptions/listen failed, list changes will not be noticed: {error}"
                ));
                return;
            }
            Err(_elapsed) => {
                self.lock_catalog().warn(
                    "subscriptions/listen was not acknowledged; list changes will not be noticed"
                        .to_owned(),
                );
                return;
            }
        };
        tokio::spawn(async move {
            let mut subscription = subscription;
            loop {
                let next = tokio::select! {
                    () = closed.cancelled() => break,
                    next = subscription.next() => next,
                };
                let kind = match next {
                    Ok(Some(notification)) => match ListKind::changed_by(&notification) {
                        Some(kind) => kind,
                        None => continue,
                    },
                    Ok(None) | Err(_) => break,
                };
                if changes.send(kind).is_err() {
                    break;
                }
            }
        });
    }

    pub(super) fn watch_list_changes(
        &self,
        mut changes: mpsc::UnboundedReceiver<ListKind>,
        epoch: u64,
    ) {
        let weak = self.weak_self.clone();
        tokio::spawn(async move {
            while let Some(kind) = changes.recv().await {
                let Some(slot) = weak.upgrade() else {
                    break;
                };
                slot.list_changed(kind, epoch).await;
            }
        });
    }

    /// Moves the counter of the list a `list_changed` names: what was read under the old one
    /// is out of date from now on. Called by the transport as the notification arrives, before
    /// anything the server sent after it is delivered.
    pub(super) fn note_list_change(&self, kind: ListKind) {
        let mut catalog = self.lock_catalog();
        match kind {
            ListKind::Tools => catalog.tools_epoch += 1,
            ListKind::Resources => catalog.resources_epoch += 1,
            ListKind::Prompts => catalog.prompts_epoch += 1,
        }
    }

    /// A `list_changed` notification: refetch that list under the generation counter (moved
    /// again here, for a change that reached the runtime some other way than a transport's
    /// notification, and so that a listing made between the two is refetched).
    pub(super) async fn list_changed(&self, kind: ListKind, epoch: u64) {
        self.note_list_change(kind);
        let live = {
            let state = self.lock_state();
            match &state.live {
                Some(live) if live.epoch == epoch => live.clone(),
                _ => return,
            }
        };
        let which: &[ListWhich] = match kind {
            ListKind::Tools => &[ListWhich::Tools],
            ListKind::Resources => &[ListWhich::Resources, ListWhich::Templates],
            ListKind::Prompts => &[ListWhich::Prompts],
        };
        for list in which {
            if let Err(error) = self.refresh(&live, *list).await {
                self.lock_catalog().warn(format!(
                    "refreshing a list failed, the last one is kept: {error}"
                ));
            }
        }
        self.options
            .events
            .send(crate::upstream::UpstreamEvent::CatalogChanged {
                server: self.spec.name.clone(),
                kind,
            });
    }

    pub(super) fn supports(&self, live: &Live, list: ListWhich) -> bool {
        let Some(info) = live.peer_info() else {
            return true;
        };
        let capabilities = &info.capabilities;
        match list {
            ListWhich::Tools => capabilities.tools.is_some(),
            ListWhich::Resources | ListWhich::Templates => capabilities.resources.is_some(),
            ListWhich::Prompts => capabilities.prompts.is_some(),
        }
    }

    /// Fetches one list now and stores it; bumps the generation when it changed.
    pub(super) async fn refresh(&self, live: &Live, list: ListWhich) -> Result<(), McpError> {
        if !self.supports(live, list) {
            let mut catalog = self.lock_catalog();
            match list {
                ListWhich::Tools => catalog.tools = Some(empty_cache(live.epoch)),
                ListWhich::Resources => catalog.resources = Some(empty_cache(live.epoch)),
                ListWhich::Templates => catalog.templates = Some(empty_cache(live.epoch)),
                ListWhich::Prompts => catalog.prompts = Some(empty_cache(live.epoch)),
            }
            return Ok(());
        }
        let kind = match list {
            ListWhich::Tools => ListKind::Tools,
            ListWhich::Resources | ListWhich::Templates => ListKind::Resources,
            ListWhich::Prompts => ListKind::Prompts,
        };
        let change_epoch = self.lock_catalog().epoch(kind);
        let peer = live.service.peer().clone();
        let timeout = self.spec.request_timeout;
        let name = self.name().to_owned();
        let page =
            move |cursor: Option<String>| PaginatedRequestParams::default().with_cursor(cursor);
        let label = match list {
            ListWhich::Tools => "tools/list",
            ListWhich::Resources => "resources/list",
            ListWhich::Templates => "resources/templates/list",
            ListWhich::Prompts => "prompts/list",
        };
        macro_rules! fetch {
            ($method:ident, $field:ident) => {{
                let listed = list_pages(|cursor| {
                    let peer = peer.clone();
                    let params = page(cursor);
                    async move {
                        let result = peer.$method(Some(params)).await?;
                        Ok((result.$field, result.next_cursor, result.ttl_ms))
                    }
                });
                bounded(&name, label, timeout, listed).await?
            }};
        }
        let now_epoch = live.epoch;
        let mut catalog_warning = None;
        let note_truncation = |truncated: bool, warning: &mut Option<String>| {
            if truncated {
                *warning = Some(format!(
                    "{label} stopped after {} pages (the safety limit); the list may be incomplete",
                    crate::catalog::PAGE_LIMIT
                ));
            }
        };
        macro_rules! fetch_and_store {
            ($method:ident, $field:ident, $slot:ident) => {{
                let listed = fetch!($method, $field);
                note_truncation(listed.truncated, &mut catalog_warning);
                self.lock_catalog().store(
                    |catalog| &mut catalog.$slot,
                    cache_of(listed, change_epoch, now_epoch),
                );
            }};
        }
        match list {
            ListWhich::Tools => fetch_and_store!(list_tools, tools, tools),
            ListWhich::Resources => fetch_and_store!(list_resources, resources, resources),
            ListWhich::Templates => {
                fetch_and_store!(list_resource_templates, resource_templates, templates)
            }
            ListWhich::Prompts => fetch_and_store!(list_prompts, prompts, prompts),
        }
        if let Some(warning) = catalog_warning {
            tracing::warn!(server = %self.name(), "{warning}");
            self.lock_catalog().warn(warning);
        }
        Ok(())
    }

    /// Whether the cached list is usable without refetching.
    pub(super) fn cached_fresh(&self, list: ListWhich, connection_epoch: u64) -> bool {
        let catalog = self.lock_catalog();
        match list {
            ListWhich::Tools => catalog
                .tools
                .as_ref()
                .is_some_and(|cached| is_fresh(cached, catalog.tools_epoch, connection_epoch)),
            ListWhich::Resources => catalog
                .resources
                .as_ref()
                .is_some_and(|cached| is_fresh(cached, catalog.resources_epoch, connection_epoch)),
            ListWhich::Templates => catalog
                .templates
                .as_ref()
                .is_some_and(|cached| is_fresh(cached, catalog.resources_epoch, connection_epoch)),
            ListWhich::Prompts => catalog
                .prompts
                .as_ref()
                .is_some_and(|cached| is_fresh(cached, catalog.prompts_epoch, connection_epoch)),
        }
    }

    /// Makes sure `list` is current: connects lazily, refetches when stale. A down server
    /// keeps its last lists; the failure is returned only when there is nothing to show.
    pub(super) async fn ensure_list(&self, list: ListWhich) -> Result<(), McpError> {
        let live = match self.connection().await {
            Ok(live) => live,
            Err(failure) => {
                if self.has_cached(list) {
                    return Ok(());
                }
                return Err(failure);
            }
        };
        if self.cached_fresh(list, live.epoch) {
            return Ok(());
        }
        match self.refresh(&live, list).await {
            Ok(()) => Ok(()),
            Err(error) if self.has_cached(list) => {
                self.lock_catalog().warn(format!(
                    "refreshing a list failed, the last one is kept: {error}"
                ));
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    pub(super) fn has_cached(&self, list: ListWhich) -> bool {
        let catalog = self.lock_catalog();
        match list {
            ListWhich::Tools => catalog.tools.is_some(),
            ListWhich::Resources => catalog.resources.is_some(),
            ListWhich::Templates => catalog.templates.is_some(),
            ListWhich::Prompts => catalog.prompts.is_some(),
        }
    }

    /// The filtered tools, fetched when stale.
    pub(crate) async fn tools(&self) -> Result<Vec<McpTool>, McpError> {
        self.ensure_list(ListWhich::Tools).await?;
        let catalog = self.lock_catalog();
        Ok(catalog
            .tools
            .as_ref()
            .map(|cached| self.filtered(&cached.items))
            .unwrap_or_default())
    }

    /// The items of `list` in the cache `slot`, fetched when stale; empty when there are none.
    pub(super) async fn current_items<T: Clone>(
        &self,
        list: ListWhich,
        slot: fn(&CatalogCache) -> &Option<Cached<T>>,
    ) -> Result<Vec<T>, McpError> {
        self.ensure_list(list).await?;
        let catalog = self.lock_catalog();
        Ok(slot(&catalog)
            .as_ref()
            .map(|cached| cached.items.clone())
            .unwrap_or_default())
    }

    pub(crate) async fn resources(&self) -> Result<Vec<Resource>, McpError> {
        self.current_items(ListWhich::Resources, |catalog| &catalog.resources)
            .await
    }

    pub(crate) async fn resource_templates(&self) -> Result<Vec<ResourceTemplate>, McpError> {
        self.current_items(ListWhich::Templates, |catalog| &catalog.templates)
            .await
    }

    pub(crate) async fn prompts(&self) -> Result<Vec<Prompt>, McpError> {
        self.current_items(ListWhich::Prompts, |catalog| &catalog.prompts)
            .await
    }

    /// Every list of this server (connecting it even when deferred).
    pub(crate) async fn catalog(&self) -> Result<Catalog, McpError> {
        let tools = self.tools().await?;
        let resources = self.or_warn(self.resources().await, "resources");
        let resource_templates =
            self.or_warn(self.resource_templates().await, "resource templates");
        let prompts = self.or_warn(self.prompts().await, "prompts");
        let instructions = self.lock_state().instructions.clone();
        let catalog = self.lock_catalog();
        Ok(Catalog {
            server: self.spec.name.clone(),
            tools,
            resources,
            resource_templates,
            prompts,
            instructions,
            generation: catalog.generation,
            warnings: catalog.warnings.clone(),
        })
    }

    /// A list that could not be fetched is empty, with a warning: never the end of the catalogue.
    pub(super) fn or_warn<T>(&self, listed: Result<Vec<T>, McpError>, what: &str) -> Vec<T> {
        listed.unwrap_or_else(|error| {
            self.lock_catalog()
                .warn(format!("listing {what} failed: {}", error.what()));
            Vec::new()
        })
    }

    pub(crate) fn warnings(&self) -> Vec<String> {
        self.lock_catalog().warnings.clone()
    }

    /// The connection and tools list-change counters (see [`crate::ToolListEpoch`]).
    pub(crate) fn tool_list_epoch(&self) -> crate::runtime::ToolListEpoch {
        let connection = self.lock_state().epoch;
        crate::runtime::ToolListEpoch {
            connection,
            tools: self.lock_catalog().tools_epoch,
        }
    }

    /// The connection and list-change counters (see [`crate::ListEpochs`]).
    pub(crate) fn list_epochs(&self) -> crate::runtime::ListEpochs {
        let connection = self.lock_state().epoch;
        let catalog = self.lock_catalog();
        crate::runtime::ListEpochs {
            connection,
            resources: catalog.resources_epoch,
            prompts: catalog.prompts_epoch,
        }
    }
}

pub(super) fn is_fresh<T>(cached: &Cached<T>, change_epoch: u64, connection_epoch: u64) -> bool {
    cached.change_epoch == change_epoch
        && cached.connection_epoch == connection_epoch
        && cached
            .ttl
            .is_some_and(|ttl| cached.fetched_at.elapsed() < ttl)
}

pub(super) fn empty_cache<T>(connection_epoch: u64) -> Cached<T> {
    Cached {
        items: Vec::new(),
        fetched_at: Instant::now(),
        ttl: None,
        change_epoch: 0,
        connection_epoch,
    }
}

pub(super) fn cache_of<T>(
    listed: Listed<T>,
    change_epoch: u64,
    connection_epoch: u64,
) -> Cached<T> {
    Cached {
        items: listed.items,
        fetched_at: Instant::now(),
        ttl: listed.ttl_ms.map(Duration::from_millis),
        change_epoch,
        connection_epoch,
    }
}
