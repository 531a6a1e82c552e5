//! The options Latch accepts for compatibility but does not act on yet: the config table
//! marks each option [`Effect::Acts`] or [`Effect::Inert`], and these tests hold that
//! marking to the list below (so the list cannot grow or shrink unnoticed), the list in docs/COMPATIBILITY.md
//! to the table, and the server to its promise of a warning when one is set to anything
//! but its default.

use std::collections::BTreeSet;

use latch_server::config::{Effect, OPTIONS};
use latch_testkit::Server;

/// Every inert option, by its table name, in alphabetical order.
const INERT: &str = "
    active-defrag-cycle-max active-defrag-cycle-min
    active-defrag-ignore-bytes active-defrag-max-scan-fields active-defrag-threshold-lower
    active-defrag-threshold-upper active-expire-effort activedefrag activerehashing
    aof-disable-auto-gc aof-rewrite-incremental-fsync aof_rewrite_cpulist bgsave_cpulist
    bio_cpulist
    cluster-allow-pubsubshard-when-down cluster-allow-reads-when-down
    cluster-allow-replica-migration cluster-announce-bus-port cluster-announce-hostname
    cluster-announce-ip cluster-announce-port cluster-announce-tls-port cluster-config-file
    cluster-enabled cluster-link-sendbuf-limit cluster-migration-barrier
    cluster-node-timeout cluster-port cluster-preferred-endpoint-type
    cluster-replica-no-failover cluster-replica-validity-factor
    cluster-require-full-coverage crash-memcheck-enabled disable-thp
    dynamic-hz ignore-warnings io-threads-do-reads
    no-appendfsync-on-rewrite
    proc-title-template propagation-error-behavior rdb-del-sync-files
    rdb-save-incremental-fsync rdbchecksum rdbcompression repl-disable-tcp-nodelay
    repl-diskless-load replica-ignore-disk-write-errors replica-lazy-flush sanitize-dump-payload server_cpulist set-proc-title
    shutdown-timeout socket-mark-id
    stop-writes-on-bgsave-error supervised tcp-backlog use-exit-on-panic watchdog-period
";

const BEGIN: &str = "<!-- inert-options:begin (LATCH_UPDATE_README=1 cargo test -p latch-server --test inert_options) -->";
const END: &str = "<!-- inert-options:end -->";
/// The line before the block, and the section it ends.
const LEAD_IN: &str =
    "Options accepted for compatibility that do nothing yet (a warning is logged when one is set):";
const SECTION: &str = "## Configuration";
/// The list is wrapped at this width.
const WIDTH: usize = 100;

fn inert_in_table() -> BTreeSet<&'static str> {
    OPTIONS
        .iter()
        .filter(|def| def.effect == Effect::Inert)
        .map(|def| def.name)
        .collect()
}

#[test]
fn the_table_marks_exactly_the_listed_options_inert() {
    let listed: Vec<&str> = INERT.split_whitespace().collect();
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(listed, sorted, "keep INERT sorted and without repeats");
    let listed: BTreeSet<&str> = listed.into_iter().collect();
    let known: BTreeSet<&str> = OPTIONS.iter().map(|def| def.name).collect();
    let unknown: Vec<&&str> = listed.difference(&known).collect();
    assert!(unknown.is_empty(), "not options: {unknown:?}");
    let table = inert_in_table();
    let now_inert: Vec<&&str> = table.difference(&listed).collect();
    let now_acting: Vec<&&str> = listed.difference(&table).collect();
    assert!(
        now_inert.is_empty() && now_acting.is_empty(),
        "the table marks inert, but INERT lacks: {now_inert:?}; INERT lists, but the table \
         marks as acting: {now_acting:?}"
    );
}

/// The list: the names backquoted, comma-separated, wrapped.
fn render() -> String {
    let mut lines: Vec<String> = vec![String::new()];
    let table = inert_in_table();
    let count = table.len();
    for (i, name) in table.into_iter().enumerate() {
        let word = if i + 1 == count {
            format!("`{name}`.")
        } else {
            format!("`{name}`,")
        };
        let line = lines.last_mut().expect("a line");
        if line.is_empty() {
            line.push_str(&word);
        } else if line.len() + 1 + word.len() <= WIDTH {
            line.push(' ');
            line.push_str(&word);
        } else {
            lines.push(word);
        }
    }
    lines.join("\n")
}

/// The document with the block (and its markers and lead-in, when missing: they go at the
/// end of its "Configuration" section) holding `block`.
fn with_block(readme: &str, block: &str) -> String {
    if let (Some(begin), Some(end)) = (readme.find(BEGIN), readme.find(END)) {
        let start = begin + BEGIN.len();
        return format!("{}\n{block}\n{}", &readme[..start], &readme[end..]);
    }
    let section = readme
        .find(SECTION)
        .expect("docs/COMPATIBILITY.md has the section");
    let after = section + SECTION.len();
    let end = readme[after..]
        .find("\n## ")
        .map_or(readme.len(), |at| after + at + 1);
    let body = readme[..end].trim_end();
    format!(
        "{body}\n\n{LEAD_IN}\n{BEGIN}\n{block}\n{END}\n\n{}",
        &readme[end..]
    )
}

#[test]
fn the_docs_list_exactly_the_inert_options() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/COMPATIBILITY.md");
    let readme = std::fs::read_to_string(path).expect("docs/COMPATIBILITY.md");
    let expected = with_block(&readme, &render());
    if std::env::var_os("LATCH_UPDATE_README").is_some() {
        std::fs::write(path, &expected).expect("write docs/COMPATIBILITY.md");
        return;
    }
    let lead_in = format!("{LEAD_IN}\n{BEGIN}");
    assert!(
        readme.contains(&lead_in),
        "docs/COMPATIBILITY.md lacks the inert-option list and its lead-in; run \
         LATCH_UPDATE_README=1 cargo test -p latch-server --test inert_options"
    );
    assert!(
        readme == expected,
        "docs/COMPATIBILITY.md's inert-option list differs from the config table; run \
         LATCH_UPDATE_README=1 cargo test -p latch-server --test inert_options, or put \
         between the markers:\n\n{}",
        render()
    );
}

fn config_set(server: &Server, name: &str, value: &str) {
    let mut conn = redis::Client::open(server.url())
        .and_then(|client| client.get_connection())
        .expect("connect");
    let reply: String = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(&mut conn)
        .expect("CONFIG SET");
    assert_eq!(reply, "OK");
}

fn warned(log: &str, option: &str) -> bool {
    log.lines().any(|line| {
        // A warning: `#` in Redis' line format.
        line.contains(" # ")
            && line.contains(&format!("option '{option}' set to"))
            && line.contains("no effect in Latch yet")
    })
}

#[test]
fn setting_an_inert_option_logs_a_warning_and_a_default_does_not() {
    let server = Server::latch(&[
        // Inert, not at its default: warned of.
        "--tcp-backlog",
        "1024",
        // Inert, at its default: no warning.
        "--active-expire-effort",
        "1",
        "--hash-max-listpack-value",
        "64b",
        // Acting: no warning.
        "--stream-node-max-entries",
        "5",
    ]);
    let log = server.log();
    assert!(warned(&log, "tcp-backlog"), "{log}");
    assert!(log.contains("'tcp-backlog' set to '1024'"), "{log}");
    for quiet in [
        "active-expire-effort",
        "hash-max-listpack-value",
        "stream-node-max-entries",
    ] {
        assert!(!log.contains(quiet), "{quiet}: {log}");
    }

    // CONFIG SET: the same, each time it is set.
    config_set(&server, "activerehashing", "no");
    config_set(&server, "lazyfree-lazy-expire", "no");
    config_set(&server, "hz", "20");
    let log = server.log();
    assert!(warned(&log, "activerehashing"), "{log}");
    for quiet in ["lazyfree-lazy-expire", "'hz'"] {
        assert!(!log.contains(quiet), "{quiet}: {log}");
    }
}
