//! Loading AOF files: an RDB preamble goes to the snapshot loader, commands run through
//! the gatekeeper as an internal client (nothing expires meanwhile: the keyspace is in
//! loading mode, and keys that expired were logged as `DEL`s).
//!
//! A file that ends inside a command (a crash mid-write) is cut at its last complete
//! command when it is the last file and `aof-load-truncated` is on, with a warning; a
//! transaction left open at the end is dropped (its commands were only queued). Anything
//! else malformed refuses the start, naming the file and the offset.

use std::path::Path;

use anyhow::Context;
use bytes::Bytes;
use latch_persist::aof::{starts_with_rdb_preamble, AofReadError, CommandReader};
use latch_protocol::{Reply, Resp};
use tracing::warn;

use super::snapshot;
use crate::server::Server;

/// Loads one AOF file (base or incremental). `is_last`: the file logging continues in,
/// the only one whose torn tail may be cut off.
pub fn load_file(server: &Server, path: &Path, is_last: bool) -> anyhow::Result<()> {
    let data = match std::fs::read(path) {
        Ok(data) => data,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && is_last => {
            // Redis tolerates a missing last incremental file (created, never written).
            return Ok(());
        }
        Err(error) => {
            // redis-server's words (Redis' tests look for the file name, a space, the cause).
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            warn!("Fatal error: can't open the append log file {name} for reading: {error}");
            return Err(error).with_context(|| format!("reading {}", path.display()));
        }
    };
    let _loading = super::Loading::start();
    let name = path.display().to_string();
    let start = if starts_with_rdb_preamble(&data) {
        snapshot::load_rdb(server, &data, false)
            .with_context(|| format!("loading the RDB preamble of {name}"))?
            .end
    } else {
        0
    };
    let mut runner = Runner::new(server);
    let mut reader = CommandReader::new(&data, start);
    let outcome = loop {
        match reader.next() {
            Ok(Some(args)) => runner.run(&args, &name)?,
            Ok(None) => break Ok(()),
            Err(error) => break Err(error),
        }
    };
    runner.finish();
    match outcome {
        Ok(()) => Ok(()),
        Err(AofReadError::Truncated { valid_up_to }) => {
            if !is_last || !server.config.get_bool("aof-load-truncated") {
                anyhow::bail!(
                    "Unexpected end of file reading the append only file {name} (valid up to offset {valid_up_to}). You can: 1) Make a backup of your AOF file, then use redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."
                );
            }
            warn!(
                file = %name,
                valid_up_to,
                "!!! Warning: short read while loading the AOF file {name}!!! AOF loaded anyway because aof-load-truncated is enabled; the file is truncated to its last complete command"
            );
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("opening {name} to truncate it"))?;
            file.set_len(valid_up_to as u64)
                .and_then(|()| file.sync_all())
                .with_context(|| format!("truncating {name}"))?;
            Ok(())
        }
        Err(AofReadError::Corrupt { offset, what }) => anyhow::bail!(
            "Bad file format reading the append only file {name} at offset {offset}: {what}. Make a backup of your AOF file, then use redis-check-aof --fix <filename.manifest>"
        ),
    }
}

/// Runs logged commands as an internal client.
struct Runner<'s> {
    server: &'s Server,
    client: crate::client::Client,
    reply: Reply,
    /// Commands run so far.
    commands: u64,
}

impl<'s> Runner<'s> {
    fn new(server: &'s Server) -> Runner<'s> {
        let mut client = server.clients.connect(
            "aof-loader".into(),
            String::new(),
            -1,
            false,
            server.acl.default_user(),
            true,
        );
        client.is_aof_loader = true;
        Runner {
            server,
            client,
            reply: Reply::new(Resp::V2),
            commands: 0,
        }
    }

    fn run(&mut self, args: &[Bytes], name: &str) -> anyhow::Result<()> {
        if crate::table::table().lookup_called(&args[0]).is_none() {
            anyhow::bail!(
                "Unknown command '{}' reading the append only file {name}",
                String::from_utf8_lossy(&args[0])
            );
        }
        // Replies (errors included) are dropped, as Redis does while loading.
        let _ = crate::gate::execute(
            self.server,
            &mut self.client,
            &mut self.reply,
            args,
            None,
            None,
        );
        self.reply.buffer().clear();
        self.commands += 1;
        if self.commands.is_multiple_of(1024) && super::is_starting() {
            // Clients waiting for the start-up load get LOADING from now on.
            super::start_serves();
        }
        Ok(())
    }

    fn finish(mut self) {
        // A MULTI whose EXEC never made it to the file: its commands were only queued.
        crate::commands::transaction::discard_transaction(self.server, &mut self.client);
        self.client.propagated.clear();
        self.server.clients.disconnect(self.client.id);
    }
}
