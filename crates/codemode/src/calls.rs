//! Tool calls from a sandbox: the per-execution budgets, and the two ways a call reaches the
//! host — polled on the sandbox thread itself ([`InlineCalls`], on a multi-threaded Tokio
//! runtime) or handed to the caller's task over channels ([`ChannelCalls`], elsewhere). Either
//! way, calls still running when the execution ends are cancelled through their token and polled
//! until they finish ([`wind_down`]), never dropped mid-call.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::channel::{mpsc, oneshot};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{BoxFuture, CANCELLED_CALLS_GRACE, CodeModeHost, CodeModeLimits, ToolCallError};

/// A `tools.call` from the script.
pub(super) struct CallRequest {
    /// Which of the script's promises the answer settles.
    pub id: u64,
    pub server: String,
    pub tool: String,
    /// The arguments as `JSON.stringify` wrote them.
    pub arguments: String,
}

/// A finished call: the promise it settles and the value or the message to throw.
pub(super) type Finished = (u64, Result<Value, ToolCallError>);

/// How the sandbox's calls reach the host.
pub(super) trait CallDriver {
    /// Hands a call over (or refuses it); its answer comes back from [`CallDriver::wait`].
    fn start(&mut self, request: CallRequest);
    /// Blocks until at least one call has an answer. `None` when the execution is stopping: the
    /// time limit passed, or the caller is gone.
    fn wait(&mut self) -> Option<Vec<Finished>>;
}

/// Per-execution budgets: total calls, calls in flight per server, result bytes.
pub(super) struct Budget {
    limits: CodeModeLimits,
    pub calls: u32,
    pub result_bytes: usize,
    in_flight: HashMap<String, usize>,
    queued: HashMap<String, VecDeque<CallRequest>>,
}

/// What [`Budget::admit`] decided.
pub(super) enum Admission {
    /// Start it now.
    Start(CallRequest),
    /// Its server is busy; [`Budget::next_queued`] hands it back later.
    Queued,
    /// A budget is spent: the call's answer is this refusal.
    Refused(Finished),
}

impl Budget {
    pub(crate) fn new(limits: CodeModeLimits) -> Self {
        Self {
            limits,
            calls: 0,
            result_bytes: 0,
            in_flight: HashMap::new(),
            queued: HashMap::new(),
        }
    }

    /// Refuses the call when a budget is spent, queues it when its server is busy, or hands it
    /// back to be started now.
    pub(crate) fn admit(&mut self, request: CallRequest) -> Admission {
        if self.calls >= self.limits.max_calls {
            return Admission::Refused((
                request.id,
                Err(ToolCallError::TooManyCalls {
                    max_calls: self.limits.max_calls,
                }),
            ));
        }
        if self.result_bytes >= self.limits.max_result_bytes {
            return Admission::Refused((
                request.id,
                Err(ToolCallError::ResultsSpent {
                    max_result_bytes: self.limits.max_result_bytes,
                }),
            ));
        }
        self.calls += 1;
        let running = self.in_flight.entry(request.server.clone()).or_default();
        if *running >= self.limits.max_concurrent_per_server.max(1) {
            self.queued
                .entry(request.server.clone())
                .or_default()
                .push_back(request);
            return Admission::Queued;
        }
        *running += 1;
        Admission::Start(request)
    }

    /// Accounts for a finished call; a result that overflows the byte budget is withheld.
    pub(crate) fn settle(
        &mut self,
        server: &str,
        result: Result<Value, ToolCallError>,
    ) -> Result<Value, ToolCallError> {
        if let Some(running) = self.in_flight.get_mut(server) {
            *running = running.saturating_sub(1);
        }
        let value = result?;
        let bytes = json_len(&value);
        if self.result_bytes + bytes > self.limits.max_result_bytes {
            self.result_bytes = self.limits.max_result_bytes;
            return Err(ToolCallError::ResultTooLarge {
                bytes,
                max_result_bytes: self.limits.max_result_bytes,
            });
        }
        self.result_bytes += bytes;
        Ok(value)
    }

    /// The next waiting call for `server`, now started.
    pub(crate) fn next_queued(&mut self, server: &str) -> Option<CallRequest> {
        let next = self.queued.get_mut(server)?.pop_front()?;
        *self.in_flight.entry(server.to_string()).or_default() += 1;
        Some(next)
    }

    /// Forgets the waiting calls (the execution is stopping).
    pub(crate) fn drop_queued(&mut self) {
        self.queued.clear();
    }
}

/// The length of `value`'s JSON encoding, without building the text.
fn json_len(value: &Value) -> usize {
    struct Counter(usize);
    impl io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}

/// A call's answer from the host, before the budget has seen it.
struct HostAnswer {
    id: u64,
    server: String,
    result: Result<Value, ToolCallError>,
}

/// One call to the host; `cancel` is the execution's token for its calls.
async fn call_host(
    host: &dyn CodeModeHost,
    request: CallRequest,
    cancel: CancellationToken,
) -> HostAnswer {
    let CallRequest {
        id,
        server,
        tool,
        arguments,
    } = request;
    let parsed = serde_json::from_str::<Value>(&arguments);
    // The text is not needed once parsed; only one copy is held while the call runs.
    drop(arguments);
    let result = match parsed {
        Ok(arguments) => host.call(&server, &tool, arguments, cancel).await,
        Err(error) => Err(ToolCallError::ArgumentsNotJson(error.to_string())),
    };
    HostAnswer { id, server, result }
}

/// The token an execution's calls share: the caller's cancellation reaches them at once, and the
/// execution cancels it when it ends.
fn calls_token(host: &dyn CodeModeHost) -> CancellationToken {
    host.cancellation()
        .map(|cancel| cancel.child_token())
        .unwrap_or_default()
}

/// Polls the calls still running after their token was cancelled until they have all finished
/// (each recorded by the gate, its server told), for at most [`CANCELLED_CALLS_GRACE`]; what is
/// left after that is dropped by the caller. Their answers are discarded: the script is gone.
async fn wind_down<F: std::future::Future<Output = HostAnswer>>(running: &mut FuturesUnordered<F>) {
    if running.is_empty() {
        return;
    }
    let drained = async { while running.next().await.is_some() {} };
    if tokio::time::timeout(CANCELLED_CALLS_GRACE, drained)
        .await
        .is_err()
    {
        tracing::warn!(
            calls = running.len(),
            grace = ?CANCELLED_CALLS_GRACE,
            "code-mode calls did not end within the grace after their cancellation and are dropped"
        );
    }
}

/// Calls polled on the sandbox thread itself: the script's thread drives the host's futures
/// with [`tokio::runtime::Handle::block_on`] whenever the script has nothing left to run, so a
/// call costs no hand-off between the sandbox and the caller's task. (The futures' IO stays on
/// the runtime's drivers.)
pub(super) struct InlineCalls<'h> {
    host: &'h dyn CodeModeHost,
    runtime: tokio::runtime::Handle,
    budget: Budget,
    running: FuturesUnordered<BoxFuture<'h, HostAnswer>>,
    /// Answers known without waiting (refusals).
    ready: Vec<Finished>,
    deadline: tokio::time::Instant,
    cancel: Option<CancellationToken>,
    /// Cancelled when the execution ends, for the calls still running.
    calls_cancel: CancellationToken,
}

impl<'h> InlineCalls<'h> {
    pub(crate) fn new(
        host: &'h dyn CodeModeHost,
        runtime: tokio::runtime::Handle,
        limits: CodeModeLimits,
        deadline: Instant,
    ) -> Self {
        Self {
            host,
            runtime,
            budget: Budget::new(limits),
            running: FuturesUnordered::new(),
            ready: Vec::new(),
            deadline: tokio::time::Instant::from_std(deadline),
            cancel: host.cancellation(),
            calls_cancel: calls_token(host),
        }
    }

    /// Ends the execution's calls — the waiting ones are forgotten (they never reached the
    /// host), the running ones cancelled and polled until they finish ([`wind_down`]) — and
    /// returns the calls made and result bytes delivered.
    pub(crate) fn finish(self) -> (u32, usize) {
        let Self {
            runtime,
            mut budget,
            mut running,
            calls_cancel,
            ..
        } = self;
        budget.drop_queued();
        calls_cancel.cancel();
        if !running.is_empty() {
            runtime.block_on(wind_down(&mut running));
        }
        // Whatever outlived the grace is dropped inside the runtime, whose resources it may hold.
        let _entered = runtime.enter();
        drop(running);
        (budget.calls, budget.result_bytes)
    }

    fn launch(&mut self, request: CallRequest) {
        let cancel = self.calls_cancel.clone();
        self.running
            .push(Box::pin(call_host(self.host, request, cancel)));
    }
}

impl CallDriver for InlineCalls<'_> {
    fn start(&mut self, request: CallRequest) {
        match self.budget.admit(request) {
            Admission::Start(request) => self.launch(request),
            Admission::Queued => {}
            Admission::Refused(answer) => self.ready.push(answer),
        }
    }

    fn wait(&mut self) -> Option<Vec<Finished>> {
        if !self.ready.is_empty() {
            return Some(std::mem::take(&mut self.ready));
        }
        let deadline = self.deadline;
        let cancel = self.cancel.as_ref();
        let running = &mut self.running;
        let done = self.runtime.block_on(async move {
            let first = tokio::select! {
                biased;
                Some(done) = running.next() => done,
                () = tokio::time::sleep_until(deadline) => return None,
                () = cancelled_or_never(cancel) => return None,
            };
            let mut done = vec![first];
            while let Some(Some(more)) = running.next().now_or_never() {
                done.push(more);
            }
            Some(done)
        })?;
        let mut answers = Vec::with_capacity(done.len());
        for HostAnswer { id, server, result } in done {
            answers.push((id, self.budget.settle(&server, result)));
            if let Some(next) = self.budget.next_queued(&server) {
                self.launch(next);
            }
        }
        Some(answers)
    }
}

/// Calls handed to the caller's task (for runtimes where the sandbox thread cannot borrow the
/// host: a current-thread runtime must keep polling its own tasks while the script runs).
pub(super) struct ChannelCalls {
    requests: mpsc::UnboundedSender<CallRequest>,
    answers: mpsc::UnboundedReceiver<Finished>,
    ready: Vec<Finished>,
}

impl ChannelCalls {
    /// The sandbox's end and the caller's end ([`serve_calls`]).
    pub(crate) fn new() -> (
        Self,
        mpsc::UnboundedReceiver<CallRequest>,
        mpsc::UnboundedSender<Finished>,
    ) {
        let (request_tx, request_rx) = mpsc::unbounded();
        let (answer_tx, answer_rx) = mpsc::unbounded();
        (
            Self {
                requests: request_tx,
                answers: answer_rx,
                ready: Vec::new(),
            },
            request_rx,
            answer_tx,
        )
    }
}

impl CallDriver for ChannelCalls {
    fn start(&mut self, request: CallRequest) {
        let id = request.id;
        if self.requests.unbounded_send(request).is_err() {
            self.ready.push((id, Err(ToolCallError::ExecutionEnding)));
        }
    }

    fn wait(&mut self) -> Option<Vec<Finished>> {
        if !self.ready.is_empty() {
            return Some(std::mem::take(&mut self.ready));
        }
        let first = futures::executor::block_on(self.answers.next())?;
        let mut answers = vec![first];
        while let Ok(more) = self.answers.try_recv() {
            answers.push(more);
        }
        Some(answers)
    }
}

/// How the caller's side of [`ChannelCalls`] ended.
pub(super) struct Served<T> {
    /// What the sandbox thread handed back (`None`: it ended without a word, or did not stop
    /// within the grace period after the time limit).
    pub outcome: Option<T>,
    pub timed_out: bool,
    pub calls: u32,
    pub result_bytes: usize,
}

/// Resolves when `cancel` fires; never without one.
pub(super) async fn cancelled_or_never(cancel: Option<&CancellationToken>) {
    match cancel {
        Some(cancel) => cancel.cancelled().await,
        None => std::future::pending().await,
    }
}

/// How long the caller waits for the sandbox thread to stop after the time limit fired.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The caller's side of [`ChannelCalls`]: runs the calls under the budgets until the sandbox
/// thread reports `done`, or the time limit stops it.
pub(super) async fn serve_calls<T>(
    host: &dyn CodeModeHost,
    limits: CodeModeLimits,
    stop: &AtomicBool,
    mut requests: mpsc::UnboundedReceiver<CallRequest>,
    answers: mpsc::UnboundedSender<Finished>,
    done: oneshot::Receiver<T>,
) -> Served<T> {
    let mut budget = Budget::new(limits);
    let mut in_flight = FuturesUnordered::new();
    let cancel = host.cancellation();
    let calls_cancel = calls_token(host);
    // The time limit or the caller's cancellation, whichever comes first.
    let deadline = async {
        tokio::select! {
            () = tokio::time::sleep(limits.time) => {}
            () = cancelled_or_never(cancel.as_ref()) => {}
        }
    };
    tokio::pin!(deadline);
    let mut done = done.fuse();
    let mut timed_out = false;
    let ended = loop {
        // Biased: the sandbox thread sends a call before it can report `done`, so a call made
        // just before the script ended is started (and then cancelled) like any other.
        tokio::select! {
            biased;
            () = &mut deadline, if !timed_out => {
                timed_out = true;
                stop.store(true, Ordering::SeqCst);
                break None;
            }
            Some(request) = requests.next() => match budget.admit(request) {
                Admission::Start(request) => {
                    in_flight.push(call_host(host, request, calls_cancel.clone()));
                }
                Admission::Queued => {}
                Admission::Refused(answer) => {
                    let _ = answers.unbounded_send(answer);
                }
            },
            Some(HostAnswer { id, server, result }) = in_flight.next() => {
                let result = budget.settle(&server, result);
                let _ = answers.unbounded_send((id, result));
                if let Some(next) = budget.next_queued(&server) {
                    in_flight.push(call_host(host, next, calls_cancel.clone()));
                }
            }
            outcome = &mut done => break Some(outcome.ok()),
        }
    };
    // However the run ended, nothing new starts, the waiting calls are forgotten (they never
    // reached the host) and the running ones are cancelled and wound down, never dropped.
    budget.drop_queued();
    requests.close();
    answers.close_channel();
    calls_cancel.cancel();
    wind_down(&mut in_flight).await;
    let outcome = match ended {
        Some(outcome) => outcome,
        None => tokio::time::timeout(STOP_GRACE, &mut done)
            .await
            .ok()
            .and_then(Result::ok),
    };
    Served {
        outcome,
        timed_out,
        calls: budget.calls,
        result_bytes: budget.result_bytes,
    }
}

/// Sets the stop flag when dropped, so a sandbox thread whose caller went away stops at its
/// next interrupt check instead of running to the time limit.
pub(super) struct StopOnDrop(pub Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}
