//! The server's log: lines in redis-server's format by default, so that operators' tools
//! and Redis' own test suite read them, or Latch's structured `tracing` lines
//! (`log-format structured`; CONFIG SET switches at once).
//!
//! A Redis line is `pid:role dd Mon yyyy hh:mm:ss.mmm level message`: the role is `M` for a
//! primary and `S` for a replica, the time is local, and the level one character, `.`
//! debug, `-` verbose, `*` notice, `#` warning. Tracing's levels map onto Redis' as trace =
//! debug, debug = verbose, info = notice, warn and error = warning; an event's fields other
//! than its message follow it as ` key=value`. `loglevel` filters every event (CONFIG SET
//! takes effect at once); `logfile` names a file appended to (standard output when empty);
//! with `syslog-enabled` each line also goes to syslog, under `syslog-ident` and
//! `syslog-facility`, as redis-server does.

use std::ffi::CString;
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::config::{Config, LOGLEVEL};

/// The minimum level logged, as Redis numbers them: 0 debug, 1 verbose, 2 notice,
/// 3 warning, 4 nothing.
static LOG_LEVEL: AtomicU8 = AtomicU8::new(2);

/// Whether this server follows a primary (the `S` of a line), set by replication.
static REPLICA: AtomicBool = AtomicBool::new(false);

/// `log-format structured`: tracing's own lines instead of Redis'.
static STRUCTURED: AtomicBool = AtomicBool::new(false);

/// Sets the line format from a `log-format` value.
pub fn set_format(name: &str) {
    STRUCTURED.store(name == "structured", Ordering::Relaxed);
}

/// Sets the minimum level from a `loglevel` name (notice if the name is unknown).
pub fn set_level(name: &str) {
    LOG_LEVEL.store(minimum_of(name), Ordering::Relaxed);
}

/// Tells the log whether the server is a replica now.
pub fn set_replica(replica: bool) {
    REPLICA.store(replica, Ordering::Relaxed);
}

/// Redis' rank of a tracing level: 0 debug, 1 verbose, 2 notice, 3 warning.
fn rank(level: &Level) -> u8 {
    match *level {
        Level::TRACE => 0,
        Level::DEBUG => 1,
        Level::INFO => 2,
        _ => 3,
    }
}

/// Whether an event of this level passes `loglevel`.
fn allows(level: &Level) -> bool {
    passes(level, LOG_LEVEL.load(Ordering::Relaxed))
}

/// Whether an event of this level passes the minimum (Redis' numbering; 4 passes none).
fn passes(level: &Level, minimum: u8) -> bool {
    minimum < 4 && rank(level) >= minimum
}

/// The minimum a `loglevel` name stands for (notice if the name is unknown).
fn minimum_of(name: &str) -> u8 {
    LOGLEVEL
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(2, |(_, v)| *v as u8)
}

/// Sets up logging from the configuration (see the module's description). `None` when a
/// logger was already installed or the log file cannot be opened.
pub fn init(config: &Config) -> Option<()> {
    use tracing_subscriber::prelude::*;
    set_level(&config.loglevel());
    // Dynamic: asked on every event, so CONFIG SET loglevel takes effect at once.
    let filter = || tracing_subscriber::filter::dynamic_filter_fn(|meta, _| allows(meta.level()));
    set_format(&config.get("log-format").unwrap_or_default());
    let logfile = config.logfile();
    let writer = if logfile.is_empty() {
        tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::io::stdout)
    } else {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&logfile)
            .ok()?;
        crate::crash::set_log_fd(std::os::fd::AsRawFd::as_raw_fd(&file));
        tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::sync::Mutex::new(file))
    };
    let ansi = logfile.is_empty() && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let lines = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .event_format(RedisLine {
            structured: tracing_subscriber::fmt::format::Format::default().with_ansi(ansi),
        })
        .with_writer(writer)
        .with_filter(filter())
        .boxed();
    let mut layers = vec![lines];
    if config.get("syslog-enabled").as_deref() == Some("yes") {
        layers.push(Syslog::open(config).with_filter(filter()).boxed());
    }
    tracing_subscriber::registry().with(layers).try_init().ok()
}

/// The lines redis-server writes once it listens: with `always-show-logo`, or when the log
/// goes to a terminal, a banner that names the version, mode, port and process id (Redis'
/// test suite waits for its ` PID: n`); otherwise one `Running mode=..., port=...` line.
pub fn banner(config: &Config) {
    let port = config.port();
    let show = config.get("always-show-logo").as_deref() == Some("yes")
        || (config.logfile().is_empty()
            && config.get("syslog-enabled").as_deref() != Some("yes")
            && std::io::IsTerminal::is_terminal(&std::io::stdout()));
    if show {
        tracing::info!(
            "\n\n    Latch {} (Redis {} compatible) 64 bit\n    Running in standalone mode\n    Port: {}\n    PID: {}\n",
            env!("CARGO_PKG_VERSION"),
            crate::commands::connection::REDIS_VERSION,
            port,
            std::process::id()
        );
    } else {
        tracing::info!("Running mode=standalone, port={port}.");
    }
}

/// Collects an event's message and, after it, its other fields as ` key=value`.
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={}", field.name(), value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={:?}", field.name(), value);
        }
    }
}

impl Text {
    fn of(event: &Event<'_>) -> Text {
        let mut text = Text::default();
        event.record(&mut text);
        text
    }
}

/// The formatter of Redis' lines, or of tracing's when `log-format` says so.
struct RedisLine {
    structured: tracing_subscriber::fmt::format::Format,
}

impl<S, N> FormatEvent<S, N> for RedisLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        if STRUCTURED.load(Ordering::Relaxed) {
            return self.structured.format_event(ctx, writer, event);
        }
        let text = Text::of(event);
        let role = if REPLICA.load(Ordering::Relaxed) {
            'S'
        } else {
            'M'
        };
        let level = ['.', '-', '*', '#'][rank(event.metadata().level()) as usize];
        writeln!(
            writer,
            "{}:{} {} {} {}{}",
            std::process::id(),
            role,
            local_time(),
            level,
            text.message,
            text.fields
        )
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Now in the local time zone, as `27 Nov 2026 16:02:17.123`.
#[allow(unsafe_code)]
fn local_time() -> String {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: both pointers are to live locals of the types the calls expect.
    let tm = unsafe {
        libc::clock_gettime(libc::CLOCK_REALTIME, &mut now);
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&now.tv_sec, &mut tm);
        tm
    };
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        tm.tm_mday,
        MONTHS[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        now.tv_nsec / 1_000_000
    )
}

/// Sends every event to syslog (`syslog-enabled yes`).
struct Syslog;

impl Syslog {
    #[allow(unsafe_code)]
    fn open(config: &Config) -> Syslog {
        let ident = config
            .get("syslog-ident")
            .unwrap_or_else(|| "redis".to_string());
        let facility = crate::config::SYSLOG_FACILITY
            .iter()
            .find(|(name, _)| Some(*name) == config.get("syslog-facility").as_deref())
            .map_or(libc::LOG_LOCAL0, |(_, value)| *value as libc::c_int);
        // openlog keeps the pointer: the identity lives as long as the process.
        let ident: &'static CString = Box::leak(Box::new(
            CString::new(ident.replace('\0', "")).unwrap_or_default(),
        ));
        // SAFETY: `ident` is a NUL-terminated string that is never freed.
        unsafe {
            libc::openlog(
                ident.as_ptr(),
                libc::LOG_PID | libc::LOG_NDELAY | libc::LOG_NOWAIT,
                facility,
            )
        };
        Syslog
    }
}

impl<S: Subscriber> Layer<S> for Syslog {
    #[allow(unsafe_code)]
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let text = Text::of(event);
        let priority = [
            libc::LOG_DEBUG,
            libc::LOG_INFO,
            libc::LOG_NOTICE,
            libc::LOG_WARNING,
        ][rank(event.metadata().level()) as usize];
        let Ok(line) = CString::new(format!("{}{}", text.message, text.fields).replace('\0', ""))
        else {
            return;
        };
        // SAFETY: a constant "%s" format with one NUL-terminated string argument.
        unsafe { libc::syslog(priority, c"%s".as_ptr(), line.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_loglevel() {
        let at = |name| minimum_of(name);
        assert!(!passes(&Level::INFO, at("warning")));
        assert!(passes(&Level::WARN, at("warning")));
        assert!(passes(&Level::ERROR, at("warning")));
        assert!(passes(&Level::TRACE, at("debug")));
        assert!(!passes(&Level::ERROR, at("nothing")));
        assert!(passes(&Level::INFO, at("notice")));
        assert!(!passes(&Level::DEBUG, at("notice")));
        assert!(passes(&Level::DEBUG, at("verbose")));
        assert_eq!(at("no-such-level"), 2);
    }

    #[test]
    fn local_time_has_redis_shape() {
        let time = local_time();
        let parts: Vec<&str> = time.split(' ').collect();
        assert_eq!(parts.len(), 4, "{time}");
        assert_eq!(parts[0].len(), 2);
        assert!(MONTHS.contains(&parts[1]));
        assert_eq!(parts[2].len(), 4);
        assert_eq!(parts[3].len(), "16:02:17.123".len(), "{time}");
    }
}
