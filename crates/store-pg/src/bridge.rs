//! The bridge the synchronous contracts stand on: the gate's audit trail (`AuditLog`, and `AuditSink::record`) and the knowledge collections (`KnowledgeBackend`) are called from threads that block for their answer, so they run their PostgreSQL work on a small runtime of their own (two worker threads) with a pool of their own. The service storage has neither: it awaits on its caller's runtime.

use std::future::Future;
use std::sync::Arc;

use tokio_postgres::Config;
use warden_store::StoreError;

use crate::pool::Pool;

/// A runtime and a pool for the synchronous contracts; shut down when the last of them goes.
pub(crate) struct Bridge {
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    pool: Arc<Pool>,
}

impl Bridge {
    /// A runtime of two worker threads and a pool of at most `size` connections to `config`.
    pub(crate) fn new(config: Config, size: usize) -> Result<Self, StoreError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("warden-pg")
            .enable_all()
            .build()
            .map_err(|error| StoreError::Backend(format!("a runtime for PostgreSQL: {error}")))?;
        Ok(Self {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            pool: Arc::new(Pool::new(config, size)),
        })
    }

    /// Where its tasks run.
    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// Its connections.
    pub(crate) fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Runs `job` on the bridge's runtime and waits for its answer on this thread (never
    /// `block_on`, which panics inside another runtime).
    pub(crate) fn run<T, F, Fut>(&self, job: F) -> Result<T, Stopped>
    where
        F: FnOnce(Arc<Pool>) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        let future = job(Arc::clone(&self.pool));
        self.handle.spawn(async move {
            let _ = sender.send(future.await);
        });
        receiver.recv().map_err(|_| Stopped)
    }
}

/// The bridge's runtime stopped before answering.
#[derive(Debug)]
pub(crate) struct Stopped;

impl From<Stopped> for StoreError {
    fn from(_: Stopped) -> Self {
        StoreError::Backend("the PostgreSQL storage stopped before answering".to_owned())
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // Dropping a runtime inside another one's task panics; this one is let go in the
        // background instead (its connections close as their clients drop).
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
