//! Keeps an agent session's tool list current between model requests: tools a server added
//! since the list was read (its `notifications/tools/list_changed`, a reconnect) join the list,
//! a list that could not be refreshed and catalogue warnings are reported, each once.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use warden_agent::{ToolList, ToolRefresh};
use warden_host::Host;
use warden_mcp::ToolListEpoch;

use crate::deferral::tool_spec;

/// What the session has seen of its servers' tool lists.
pub(crate) struct CatalogWatch {
    host: Arc<Host>,
    offered: ToolList,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    /// Each server's counters when its tools were last listed for the model.
    epochs: HashMap<String, ToolListEpoch>,
    /// Catalogue warnings already reported.
    warnings: HashSet<String>,
}

impl CatalogWatch {
    pub(crate) fn new(host: Arc<Host>, offered: ToolList) -> Self {
        Self {
            host,
            offered,
            seen: Mutex::new(Seen::default()),
        }
    }

    fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records where every server's tool list stands now (right after the session listed
    /// them); returns the catalogue warnings of that listing.
    pub(crate) fn baseline(&self) -> Vec<String> {
        let servers = self.host.servers();
        let epochs: HashMap<String, ToolListEpoch> = servers
            .names()
            .into_iter()
            .filter_map(|name| {
                let epoch = servers.tool_list_epoch(&name).ok()?;
                Some((name, epoch))
            })
            .collect();
        self.seen().epochs = epochs;
        self.new_warnings()
    }

    /// Lists afresh every non-deferred server whose tools changed (or whose connection was
    /// replaced) since they were last listed, appends the tools it added to the model's list,
    /// and returns them with the warnings not reported yet. Withdrawn tools stay in the list
    /// (it is never rewritten); the gate explains them when they are called.
    pub(crate) async fn refresh(&self) -> ToolRefresh {
        let servers = self.host.servers();
        let deferred: BTreeSet<String> = self
            .host
            .deferred_servers()
            .into_iter()
            .map(|(name, _summary)| name)
            .collect();
        let changed: Vec<(String, ToolListEpoch)> = {
            let seen = self.seen();
            servers
                .names()
                .into_iter()
                .filter(|name| !deferred.contains(name))
                .filter_map(|name| {
                    let now = servers.tool_list_epoch(&name).ok()?;
                    let before = seen.epochs.get(&name).copied().unwrap_or_default();
                    (now != before).then_some((name, now))
                })
                .collect()
        };
        let mut refresh = ToolRefresh::default();
        for (server, epoch) in changed {
            match self.host.server_tools(&server).await {
                Ok(tools) => {
                    let specs: Vec<_> = tools
                        .iter()
                        .map(tool_spec)
                        .filter(|spec| !self.offered.contains(&spec.name))
                        .collect();
                    refresh
                        .added
                        .extend(specs.iter().map(|spec| spec.name.clone()));
                    self.offered.append(specs);
                }
                Err(error) => refresh
                    .warnings
                    .push(format!("{error} (the tools it offered before stay listed)")),
            }
            // The counters read before the fetch: a change announced meanwhile is seen next time.
            self.seen().epochs.insert(server, epoch);
        }
        refresh.warnings.extend(self.new_warnings());
        refresh
    }

    /// Every server's catalogue warnings not reported yet.
    fn new_warnings(&self) -> Vec<String> {
        let lines: Vec<String> = self
            .host
            .servers()
            .names()
            .iter()
            .flat_map(|server| self.host.catalog_warnings(server))
            .collect();
        let mut seen = self.seen();
        lines
            .into_iter()
            .filter(|line| seen.warnings.insert(line.clone()))
            .collect()
    }
}
