//! The AOF directory, in Redis 7's layout: `appenddirname/` holds a manifest naming one
//! base file (a snapshot, RDB-format) and the incremental command files written since.
//!
//! - **Start**: load the base and the incremental files in order; a torn tail on the last
//!   one is cut off (`aof-load-truncated yes`) and logging continues in that file. A
//!   legacy single `appendfilename` beside it is adopted as the base, as Redis 7 does. With
//!   no AOF at all, an empty base and a first incremental file are created.
//! - **Rewrite** (BGREWRITEAOF, automatic rewrites, CONFIG SET appendonly yes): open a new
//!   incremental file and record it in the manifest; under every shard lock, switch the log
//!   to it and cut a snapshot (one point of the command stream); write the snapshot as the
//!   new base; then a manifest with only the new base and the new incremental file, and
//!   delete the old files. Clients wait only for the switch; a crash at any step leaves a
//!   manifest that names everything needed.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::Context;
use latch_persist::aof::{self as format, AofFile, FileKind, Manifest};
use tracing::{info, warn};

use super::aof::{AofLog, Fsync};
use super::{replay, snapshot};
use crate::server::Server;

/// The directory's state while the AOF is on.
pub struct AofDir {
    pub dir: PathBuf,
    pub appendfilename: String,
    pub manifest: Manifest,
}

fn dir_and_name(server: &Server) -> (PathBuf, String) {
    let dir = PathBuf::from(server.config.text("appenddirname").unwrap_or_default());
    let name = server.config.text("appendfilename").unwrap_or_default();
    (dir, name)
}

fn open_append(path: &Path) -> anyhow::Result<(File, u64)> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let size = file.metadata()?.len();
    Ok((file, size))
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Loads the AOF (creating it when there is none) and starts logging.
pub fn open_at_start(server: &Arc<Server>) -> anyhow::Result<()> {
    let (dir, name) = dir_and_name(server);
    let manifest_path = dir.join(format::manifest_name(&name));
    let legacy = PathBuf::from(&name);
    let mut manifest = if manifest_path.exists() {
        let text = std::fs::read(&manifest_path)
            .with_context(|| format!("reading {}", manifest_path.display()))?;
        let manifest = Manifest::parse(&text).map_err(|error| {
            log_manifest_error(&text, &error);
            anyhow::anyhow!("{}: {error}", manifest_path.display())
        })?;
        // An upgrade from a single-file AOF that stopped between writing the manifest and
        // moving the file: the manifest names only the old file as its base, which is still
        // in the server's directory. Move it in, as Redis does, and go on.
        let interrupted = manifest.incrs.is_empty()
            && manifest.base.as_ref().is_some_and(|base| base.name == name)
            && !dir.join(&name).exists()
            && legacy.is_file();
        if interrupted {
            std::fs::rename(&legacy, dir.join(&name))
                .with_context(|| format!("moving {} into {}", legacy.display(), dir.display()))?;
            info!(
                "moved {} into {} (an interrupted upgrade)",
                legacy.display(),
                dir.display()
            );
        }
        manifest
    } else if legacy.is_file() {
        // Redis 7 moves a pre-7 single AOF into the directory and makes it the base.
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let moved = dir.join(&name);
        std::fs::rename(&legacy, &moved)
            .with_context(|| format!("moving {} into {}", legacy.display(), dir.display()))?;
        info!(file = %legacy.display(), "adopting a single-file AOF as the base of {}", dir.display());
        let manifest = Manifest {
            base: Some(AofFile {
                name: name.clone(),
                seq: 1,
                kind: FileKind::Base,
            }),
            incrs: Vec::new(),
            history: Vec::new(),
        };
        format::write_manifest(&dir, &name, &manifest)?;
        manifest
    } else {
        create_fresh(server, &dir, &name)?
    };
    let base_size = manifest
        .base
        .as_ref()
        .map_or(0, |base| file_size(&dir.join(&base.name)));
    load_files(server, &dir, &manifest)?;
    // Append to the last incremental file, or start one.
    let current = match manifest.incrs.last() {
        Some(last) => dir.join(&last.name),
        None => {
            let seq = manifest.next_incr_seq();
            let incr = AofFile {
                name: format::incr_name(&name, seq),
                seq,
                kind: FileKind::Incr,
            };
            let path = dir.join(&incr.name);
            open_append(&path)?;
            manifest.incrs.push(incr);
            format::write_manifest(&dir, &name, &manifest)?;
            path
        }
    };
    let (file, size) = open_append(&current)?;
    let policy = Fsync::from_name(&server.config.appendfsync());
    let log = AofLog::start(
        file,
        size,
        policy,
        base_size,
        server.persistence.next_offset(),
    )?;
    server.persistence.attach(log);
    *server.persistence.dir.lock() = Some(AofDir {
        dir,
        appendfilename: name,
        manifest,
    });
    Ok(())
}

/// DEBUG LOADAOF: writes and syncs what the AOF has pending, empties the data set and its
/// functions, and loads the files the manifest on disk names, as a start would (logging
/// goes on in the same file). Without a manifest the data set is left empty.
pub fn reload(server: &Server) -> anyhow::Result<()> {
    if let Some(log) = server.persistence.aof() {
        log.write_through(log.appended());
        log.sync_now();
    }
    let (dir, name) = dir_and_name(server);
    let manifest_path = dir.join(format::manifest_name(&name));
    let manifest = if manifest_path.exists() {
        let text = std::fs::read(&manifest_path)
            .with_context(|| format!("reading {}", manifest_path.display()))?;
        Some(
            Manifest::parse(&text)
                .map_err(|error| anyhow::anyhow!("{}: {error}", manifest_path.display()))?,
        )
    } else {
        None
    };
    crate::scripting::flush_functions(server);
    let mut view = server.keyspace.lock_all();
    for db in 0..server.keyspace.num_dbs() {
        view.flush_db_freeing(db, true);
    }
    drop(view);
    let Some(manifest) = manifest else {
        return Ok(());
    };
    server.keyspace.set_loading(true);
    let loaded = load_files(server, &dir, &manifest);
    server.keyspace.set_loading(false);
    loaded
}

/// Loads the files a manifest names: the base, then every incremental file in order (only
/// the last may have a torn tail).
fn load_files(server: &Server, dir: &Path, manifest: &Manifest) -> anyhow::Result<()> {
    if let Some(base) = &manifest.base {
        replay::load_file(server, &dir.join(&base.name), false)?;
    }
    let count = manifest.incrs.len();
    for (index, incr) in manifest.incrs.iter().enumerate() {
        replay::load_file(server, &dir.join(&incr.name), index + 1 == count)?;
    }
    Ok(())
}

/// The lines redis-server logs for a manifest it cannot read (its reason in its words).
fn log_manifest_error(text: &[u8], error: &latch_persist::aof::ManifestError) {
    warn!("*** FATAL AOF MANIFEST FILE ERROR ***");
    if let Some(line) = error.line() {
        let content = text
            .split(|&b| b == b'\n')
            .nth(line.saturating_sub(1))
            .unwrap_or_default();
        warn!("Reading the manifest file, at line {line}");
        warn!(">>> '{}'", String::from_utf8_lossy(content).trim_end());
    }
    warn!("{}", error.redis_reason());
}

/// A new AOF directory for an empty dataset: an empty base, a first incremental file.
fn create_fresh(server: &Server, dir: &Path, name: &str) -> anyhow::Result<Manifest> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let base = AofFile {
        name: format::base_name(name, 1, snapshot::rdb_preamble(server)),
        seq: 1,
        kind: FileKind::Base,
    };
    let cut = snapshot::cut(server, || {});
    snapshot::write_aof_base(server, &cut, &dir.join(&base.name))?;
    let incr = AofFile {
        name: format::incr_name(name, 1),
        seq: 1,
        kind: FileKind::Incr,
    };
    open_append(&dir.join(&incr.name))?;
    let manifest = Manifest {
        base: Some(base),
        incrs: vec![incr],
        history: Vec::new(),
    };
    format::write_manifest(dir, name, &manifest)?;
    info!(dir = %dir.display(), "created the append only file directory");
    Ok(manifest)
}

/// Starts a rewrite on a thread. False when one is already running.
pub fn rewrite_in_background(server: &Arc<Server>) -> bool {
    let persistence = &server.persistence;
    if persistence.rewrite_in_progress.swap(true, Ordering::AcqRel) {
        return false;
    }
    snapshot::REWRITE_ABORT.store(false, Ordering::Release);
    let server = Arc::clone(server);
    let spawned = std::thread::Builder::new()
        .name("aof-rewrite".into())
        .spawn(move || {
            snapshot::stop_when(&snapshot::REWRITE_ABORT);
            let started = std::time::Instant::now();
            let result = rewrite(&server);
            let persistence = &server.persistence;
            persistence
                .last_rewrite_time_s
                .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
            match result {
                Ok(()) => {
                    persistence.last_rewrite_ok.store(true, Ordering::Relaxed);
                    persistence.rewrites.fetch_add(1, Ordering::Relaxed);
                    info!("Background AOF rewrite finished successfully");
                }
                Err(error) if snapshot::was_stopped(&error) => {
                    warn!("Background AOF rewrite stopped: AOF turned off")
                }
                Err(error) => {
                    persistence.last_rewrite_ok.store(false, Ordering::Relaxed);
                    warn!("Background AOF rewrite failed: {error:#}");
                }
            }
            persistence
                .rewrite_in_progress
                .store(false, Ordering::Release);
        });
    if spawned.is_err() {
        persistence
            .rewrite_in_progress
            .store(false, Ordering::Release);
        return false;
    }
    true
}

/// Rewrites the AOF (or, when it is off but being turned on, creates it from the data).
fn rewrite(server: &Arc<Server>) -> anyhow::Result<()> {
    let persistence = &server.persistence;
    let _job = persistence.snapshot_job.lock();
    let (dir, name) = dir_and_name(server);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let old = persistence
        .dir
        .lock()
        .as_ref()
        .map(|state| state.manifest.clone());
    let mut manifest = match &old {
        Some(manifest) => manifest.clone(),
        None => {
            // Turning the AOF on: whatever an earlier run left in the directory is replaced.
            let path = dir.join(format::manifest_name(&name));
            match std::fs::read(&path) {
                Ok(text) => Manifest::parse(&text).unwrap_or_else(|_| empty_manifest()),
                Err(_) => empty_manifest(),
            }
        }
    };
    let log = persistence.aof();
    if log.is_none() && !server.config.appendonly() {
        // BGREWRITEAOF with the AOF off: a base alone, as Redis 7 writes it.
        let cut = snapshot::cut_for_job(server, || {});
        let base_seq = manifest.next_base_seq();
        let base = AofFile {
            name: format::base_name(&name, base_seq, snapshot::rdb_preamble(server)),
            seq: base_seq,
            kind: FileKind::Base,
        };
        snapshot::write_aof_base(server, &cut, &dir.join(&base.name))?;
        let obsolete = files_of(&manifest);
        let manifest = Manifest {
            base: Some(base.clone()),
            incrs: Vec::new(),
            history: Vec::new(),
        };
        format::write_manifest(&dir, &name, &manifest)?;
        for file in obsolete.iter().filter(|file| file.name != base.name) {
            let _ = std::fs::remove_file(dir.join(&file.name));
        }
        return Ok(());
    }
    // 1. A new incremental file, recorded before anything is written to it.
    let incr_seq = manifest.next_incr_seq();
    let incr = AofFile {
        name: format::incr_name(&name, incr_seq),
        seq: incr_seq,
        kind: FileKind::Incr,
    };
    let incr_path = dir.join(&incr.name);
    let (incr_file, _) = open_append(&incr_path)?;
    if old.is_some() {
        manifest.incrs.push(incr.clone());
        format::write_manifest(&dir, &name, &manifest)?;
    }
    // 2. Switch the log and cut the snapshot at one point of the command stream.
    let mut old_sync = None;
    let mut new_log = None;
    let mut switch_error = None;
    let cut = snapshot::cut_for_job(server, || match &log {
        Some(log) => match log.rotate(incr_file) {
            Ok(handle) => old_sync = Some(handle),
            Err(error) => switch_error = Some(error),
        },
        None => {
            let policy = Fsync::from_name(&server.config.appendfsync());
            match AofLog::start(incr_file, 0, policy, 0, persistence.next_offset()) {
                Ok(started) => {
                    persistence.attach(Arc::clone(&started));
                    new_log = Some(started);
                }
                Err(error) => switch_error = Some(error),
            }
        }
    });
    if let Some(error) = switch_error {
        // The cut marked every shard: let the copies go before giving up.
        for shard in 0..server.keyspace.shard_count() {
            let _ = server.keyspace.snapshot_shard(&cut.snapshot, shard);
        }
        return Err(error).context("switching the AOF to a new file");
    }
    if let Some(handle) = old_sync {
        handle
            .sync_data()
            .context("syncing the previous AOF file")?;
    }
    // 3. The new base.
    let base_seq = manifest.next_base_seq();
    let base = AofFile {
        name: format::base_name(&name, base_seq, snapshot::rdb_preamble(server)),
        seq: base_seq,
        kind: FileKind::Base,
    };
    let base_size = snapshot::write_aof_base(server, &cut, &dir.join(&base.name))?;
    // 4. The new manifest, then the old files go.
    let obsolete: Vec<AofFile> = files_of(&manifest)
        .into_iter()
        .filter(|file| file.name != incr.name)
        .collect();
    let manifest = Manifest {
        base: Some(base),
        incrs: vec![incr],
        history: Vec::new(),
    };
    format::write_manifest(&dir, &name, &manifest)?;
    for file in obsolete {
        let _ = std::fs::remove_file(dir.join(&file.name));
    }
    if let Some(log) = persistence.aof() {
        log.base_size.store(base_size, Ordering::Relaxed);
    }
    drop(new_log);
    *persistence.dir.lock() = Some(AofDir {
        dir,
        appendfilename: name,
        manifest,
    });
    Ok(())
}

/// Every file a manifest names.
fn files_of(manifest: &Manifest) -> Vec<AofFile> {
    manifest
        .base
        .iter()
        .chain(manifest.incrs.iter())
        .chain(manifest.history.iter())
        .cloned()
        .collect()
}

fn empty_manifest() -> Manifest {
    Manifest {
        base: None,
        incrs: Vec::new(),
        history: Vec::new(),
    }
}

/// CONFIG SET appendonly yes: the AOF starts from the current data (a rewrite).
pub fn turn_on(server: &Arc<Server>) -> bool {
    // An open AOF, not `is_logging` (which the replication feed turns on too).
    if server.persistence.aof().is_some() {
        return true;
    }
    rewrite_in_background(server)
}

/// [`turn_on`] inside EXEC: the rewrite waits for the cron, as in Redis.
pub fn turn_on_after_transaction(server: &Server) {
    if server.persistence.aof().is_some() {
        return;
    }
    warn!(
        "AOF was enabled during a transaction. An AOF background was scheduled to start \
         when possible."
    );
    server
        .persistence
        .rewrite_scheduled
        .store(true, Ordering::Relaxed);
}

/// CONFIG SET appendonly no.
pub fn turn_off(server: &Server) {
    if server
        .persistence
        .rewrite_in_progress
        .load(Ordering::Acquire)
    {
        // Redis' words (it kills the rewrite's child; Latch stops its thread).
        warn!("Killing running AOF rewrite child: {}", std::process::id());
        snapshot::REWRITE_ABORT.store(true, Ordering::Release);
    }
    server
        .persistence
        .rewrite_scheduled
        .store(false, Ordering::Relaxed);
    server.persistence.detach();
    *server.persistence.dir.lock() = None;
}
