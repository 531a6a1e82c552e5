//! One snapshot for every replica that asks for a full sync at about the same time, as
//! Redis shares one fork between them: a replica that asks while a job waits for its cut
//! joins it. With `repl-diskless-sync` the job waits `repl-diskless-sync-delay` seconds (or
//! until `repl-diskless-sync-max-replicas` joined) for more replicas first; otherwise it
//! cuts at once.
//!
//! The cut registers every joined replica at the same place in the stream
//! (`Feed::register_at_cut`, under every shard lock), then one blocking thread serializes
//! the RDB once, in chunks every replica's connection sends as they come (`$EOF:` framing)
//! or, when the replica needs the length first (`$<length>`), once the last one is made.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{oneshot, watch, Notify};
use tracing::info;

use super::feed::Registration;
use crate::persistence::snapshot;
use crate::server::Server;

/// Where a replica's stream starts: its registration, the offset the RDB stands for, and
/// the history's id.
pub type Start = (Registration, u64, String);

/// The RDB as it is serialized: its chunks so far, and how it ended.
#[derive(Default)]
pub struct Rdb {
    chunks: Mutex<Vec<bytes::Bytes>>,
}

impl Rdb {
    /// The chunks from `from` on, as far as they are made.
    pub fn chunks_from(&self, from: usize) -> Vec<bytes::Bytes> {
        self.chunks.lock()[from..].to_vec()
    }
}

/// How far the serialization is: chunks made, and the end (the total length, or why it
/// failed).
#[derive(Clone, Debug, Default)]
pub struct Progress {
    pub chunks: usize,
    pub end: Option<Result<u64, String>>,
}

/// The size of the chunks replicas are sent.
const CHUNK: usize = 256 * 1024;

/// Collects the serializer's output into chunks, publishing each.
struct ChunkWriter {
    rdb: Arc<Rdb>,
    progress: Arc<watch::Sender<Progress>>,
    buffer: Vec<u8>,
    total: u64,
}

impl ChunkWriter {
    fn publish(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let chunk = bytes::Bytes::from(std::mem::replace(
            &mut self.buffer,
            Vec::with_capacity(CHUNK),
        ));
        self.total += chunk.len() as u64;
        let count = {
            let mut chunks = self.rdb.chunks.lock();
            chunks.push(chunk);
            chunks.len()
        };
        self.progress
            .send_modify(|progress| progress.chunks = count);
    }
}

impl std::io::Write for ChunkWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(data);
        if self.buffer.len() >= CHUNK {
            self.publish();
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub struct SyncJob {
    joined: Mutex<Vec<Joiner>>,
    /// Set when the cut is taken: later replicas start a job of their own.
    cut_taken: AtomicBool,
    joined_more: Notify,
    rdb: Arc<Rdb>,
    progress: Arc<watch::Sender<Progress>>,
    /// Waits `repl-diskless-sync-delay` for more replicas (a diskless transfer), until
    /// a replica that cannot take one joins.
    delayed: AtomicBool,
}

struct Joiner {
    id: u64,
    hard_limit: u64,
    start: oneshot::Sender<Start>,
}

/// What a replica holds while its snapshot is made.
pub struct Ticket {
    pub start: oneshot::Receiver<Start>,
    pub rdb: Arc<Rdb>,
    pub progress: watch::Receiver<Progress>,
}

/// Joins the job waiting for its cut, or starts one. `eof_capable`: the replica reads the
/// `$EOF:` framing (REPLCONF capa eof); one that does not gets its snapshot at once, as
/// Redis starts a disk snapshot at once for it (the diskless delay waits only for
/// replicas that can take a diskless transfer).
pub fn join(server: &Arc<Server>, id: u64, hard_limit: u64, eof_capable: bool) -> Ticket {
    let (start, start_rx) = oneshot::channel();
    let joiner = Joiner {
        id,
        hard_limit,
        start,
    };
    let mut slot = server.replication.sync_job.lock();
    if let Some(job) = slot.as_ref() {
        if !job.cut_taken.load(Ordering::Acquire) {
            job.joined.lock().push(joiner);
            if !eof_capable {
                job.delayed.store(false, Ordering::Release);
            }
            job.joined_more.notify_one();
            return Ticket {
                start: start_rx,
                rdb: Arc::clone(&job.rdb),
                progress: job.progress.subscribe(),
            };
        }
    }
    let job = Arc::new(SyncJob {
        joined: Mutex::new(vec![joiner]),
        cut_taken: AtomicBool::new(false),
        joined_more: Notify::new(),
        rdb: Arc::default(),
        progress: Arc::new(watch::channel(Progress::default()).0),
        delayed: AtomicBool::new(eof_capable),
    });
    *slot = Some(Arc::clone(&job));
    drop(slot);
    let ticket = Ticket {
        start: start_rx,
        rdb: Arc::clone(&job.rdb),
        progress: job.progress.subscribe(),
    };
    let server = Arc::clone(server);
    tokio::spawn(async move { run(server, job).await });
    ticket
}

async fn run(server: Arc<Server>, job: Arc<SyncJob>) {
    if job.delayed.load(Ordering::Acquire) && server.config.get_bool("repl-diskless-sync") {
        let delay =
            Duration::from_secs(server.config.get_i64("repl-diskless-sync-delay").max(0) as u64);
        let most = server
            .config
            .get_i64("repl-diskless-sync-max-replicas")
            .max(0) as usize;
        let deadline = tokio::time::Instant::now() + delay;
        while (most == 0 || job.joined.lock().len() < most) && job.delayed.load(Ordering::Acquire) {
            let more = job.joined_more.notified();
            if tokio::time::timeout_at(deadline, more).await.is_err() {
                break;
            }
        }
    }
    // From here on, replicas that ask start another job.
    let joined = {
        let mut slot = server.replication.sync_job.lock();
        job.cut_taken.store(true, Ordering::Release);
        if slot
            .as_ref()
            .is_some_and(|current| Arc::ptr_eq(current, &job))
        {
            *slot = None;
        }
        std::mem::take(&mut *job.joined.lock())
    };
    let count = joined.len();
    let worker = Arc::clone(&server);
    let writer = ChunkWriter {
        rdb: Arc::clone(&job.rdb),
        progress: Arc::clone(&job.progress),
        buffer: Vec::with_capacity(CHUNK),
        total: 0,
    };
    let serialized = tokio::task::spawn_blocking(move || {
        let server = worker;
        let _job = server.persistence.snapshot_job.lock();
        let mut starts = Vec::with_capacity(joined.len());
        let cut = snapshot::cut_for_job(&server, || {
            for joiner in &joined {
                starts.push(
                    server
                        .persistence
                        .feed
                        .register_at_cut(joiner.id, joiner.hard_limit),
                );
            }
        });
        let replid = server.replication.ids().replid;
        let (offset, db) = starts
            .first()
            .map_or((0, 0), |(_, offset, db)| (*offset, *db));
        for (joiner, (registration, offset, _)) in joined.into_iter().zip(starts) {
            if let Err((registration, _, _)) =
                joiner.start.send((registration, offset, replid.clone()))
            {
                // The replica left before its snapshot was cut.
                server.persistence.feed.unregister(registration.id);
            }
        }
        let aux = snapshot::ReplAux { replid, offset, db };
        let started = std::time::Instant::now();
        let mut writer = snapshot::write_rdb_into(&server, &cut, writer, false, Some(&aux))
            .map_err(|error| format!("{error:#}"))?;
        writer.publish();
        info!(
            bytes = writer.total,
            replicas = count,
            seconds = started.elapsed().as_secs_f64(),
            "snapshot for replicas' full sync serialized"
        );
        Ok::<_, String>(writer.total)
    })
    .await
    .unwrap_or_else(|error| Err(format!("the snapshot thread failed: {error}")));
    job.progress
        .send_modify(|progress| progress.end = Some(serialized));
}
