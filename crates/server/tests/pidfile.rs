//! `pidfile`: as redis-server, a server started with it writes its process id there and
//! removes the file when it shuts down. The same steps run against redis-server, so the
//! test shows what Redis does.

use latch_testkit::{Program, Server};

#[test]
fn the_pid_file_holds_the_pid_until_shutdown() {
    for program in [Program::Latch, Program::Redis] {
        // Relative to `dir`, where the server runs.
        let mut server = Server::start(program, &["--pidfile", "server.pid"]);
        let path = server.dir.join("server.pid");
        let written = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{program:?}: no pid file ({e}):\n{}", server.log()));
        assert_eq!(written.trim(), server.pid().to_string(), "{program:?}");
        server.shutdown_nosave();
        assert!(!path.exists(), "{program:?} left its pid file behind");
    }
}
