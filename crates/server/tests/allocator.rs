//! `jemalloc-bg-thread`: jemalloc's background threads, which hand freed pages back to the
//! kernel, run by default (as in Redis) and stop when the option is turned off.

use std::time::{Duration, Instant};

use latch_testkit::Server;

/// The names of the server's threads (/proc/PID/task/*/comm).
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_string())
        .collect()
}

fn has_background_thread(pid: u32) -> bool {
    thread_names(pid)
        .iter()
        .any(|name| name.starts_with("jemalloc_bg_thd"))
}

fn eventually(what: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if what() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn jemalloc_background_threads_follow_the_option() {
    let server = Server::latch(&[]);
    let pid = server.pid();
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    assert!(
        eventually(|| has_background_thread(pid)),
        "{:?}",
        thread_names(pid)
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("jemalloc-bg-thread")
        .arg("no")
        .query(&mut conn)
        .unwrap();
    assert!(
        eventually(|| !has_background_thread(pid)),
        "{:?}",
        thread_names(pid)
    );

    let off = Server::latch(&["--jemalloc-bg-thread", "no"]);
    std::thread::sleep(Duration::from_millis(200));
    assert!(!has_background_thread(off.pid()));
}
