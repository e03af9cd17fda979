//! A small pool of PostgreSQL connections: at most `size` clients, handed out behind a
//! semaphore and put back when done; a closed one is dropped and replaced on the next demand.

use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, PoisonError};

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_postgres::{Client, Config, NoTls};
use warden_store::StoreError;

use crate::db;

pub(crate) struct Pool {
    config: Config,
    size: usize,
    idle: Mutex<Vec<Client>>,
    permits: Semaphore,
}

/// A connection taken from the pool; it goes back when dropped (unless it closed).
pub(crate) struct Pooled<'a> {
    pool: &'a Pool,
    client: Option<Client>,
    _permit: SemaphorePermit<'a>,
}

impl Pool {
    pub(crate) fn new(config: Config, size: usize) -> Self {
        Self {
            config,
            size,
            idle: Mutex::new(Vec::with_capacity(size)),
            permits: Semaphore::new(size),
        }
    }

    /// How its connections connect (a writer that keeps a connection of its own uses it).
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// How many connections it keeps at most.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// A connection: an idle one, or a new one while fewer than `size` are out.
    pub(crate) async fn get(&self) -> Result<Pooled<'_>, StoreError> {
        let permit =
            self.permits.acquire().await.map_err(|_| {
                StoreError::Backend("the PostgreSQL connection pool closed".to_owned())
            })?;
        let reused = loop {
            let next = self
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            match next {
                Some(client) if client.is_closed() => continue,
                other => break other,
            }
        };
        let client = match reused {
            Some(client) => client,
            None => {
                let (client, connection) = self.config.connect(NoTls).await.map_err(db)?;
                tokio::spawn(async move {
                    if let Err(error) = connection.await {
                        tracing::warn!("a PostgreSQL connection ended: {error}");
                    }
                });
                client
            }
        };
        Ok(Pooled {
            pool: self,
            client: Some(client),
            _permit: permit,
        })
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take().filter(|client| !client.is_closed()) {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(client);
        }
    }
}

impl Deref for Pooled<'_> {
    type Target = Client;

    fn deref(&self) -> &Client {
        // Present from `get` until `drop`.
        match &self.client {
            Some(client) => client,
            None => unreachable!("a pooled connection is taken only when dropped"),
        }
    }
}

impl DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        match &mut self.client {
            Some(client) => client,
            None => unreachable!("a pooled connection is taken only when dropped"),
        }
    }
}
