//! Crash reports, as redis-server writes them: a fault (DEBUG SEGFAULT) or a signal like
//! SIGABRT puts a bug report with the signal and a stack trace in the log, and the process
//! still ends by that signal (so a supervisor sees the crash, and a core can be dumped).

mod common;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use common::TestServer;

fn report_of(log: &str, signal: i32) {
    assert!(
        log.contains(&format!("crashed by signal: {signal}, si_code:")),
        "{log}"
    );
    assert!(log.contains("------ STACK TRACE ------"), "{log}");
    assert!(log.contains("=== LATCH BUG REPORT END"), "{log}");
}

#[test]
fn debug_segfault_writes_a_report_and_ends_by_sigsegv() {
    let mut server = TestServer::start(&[]);
    let mut conn = server.client();
    let _: redis::RedisResult<()> = redis::cmd("DEBUG").arg("SEGFAULT").query(&mut conn);
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("the server ended");
    assert_eq!(status.signal(), Some(libc::SIGSEGV), "{status:?}");
    let log = std::fs::read_to_string(server.dir.join("stderr.log")).unwrap();
    report_of(&log, libc::SIGSEGV);
}

#[test]
fn sigabrt_writes_a_report_to_the_log_file() {
    let mut server = TestServer::start(&["--logfile", "server.log"]);
    latch_testkit::send_signal(server.pid(), libc::SIGABRT);
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("the server ended");
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}");
    let log = std::fs::read_to_string(server.dir.join("server.log")).unwrap();
    report_of(&log, libc::SIGABRT);
    // The log file's own lines came first: the report is appended to it.
    assert!(log.find("Ready to accept connections") < log.find("crashed by signal"));
}

#[test]
fn crash_log_enabled_no_leaves_the_signal_alone() {
    let mut server = TestServer::start(&["--crash-log-enabled", "no"]);
    let mut conn = server.client();
    // Turned on and off again while running, as CONFIG SET does in Redis.
    for value in ["yes", "no"] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("crash-log-enabled")
            .arg(value)
            .query(&mut conn)
            .unwrap();
    }
    latch_testkit::send_signal(server.pid(), libc::SIGABRT);
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("the server ended");
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}");
    let log = std::fs::read_to_string(server.dir.join("stderr.log")).unwrap();
    assert!(!log.contains("crashed by signal"), "{log}");
}
