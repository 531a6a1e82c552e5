//! ACL users against the real binary: SETUSER rules, AUTH as a user, NOPERM for commands
//! and keys (also from scripts), GETUSER/LIST/DRYRUN texts, DELUSER closing connections.

mod common;

use common::{bulk, check, TestServer};

#[test]
fn users_rules_and_refusals() {
    let server = TestServer::start(&[]);
    let mut admin = server.raw();
    check(
        &mut admin,
        "ACL SETUSER bob on >123 +@scripting +set +get ~x* %R~r*",
        "+OK\r\n",
    );
    check(
        &mut admin,
        "ACL SETUSER bob bogus",
        "-ERR Error in ACL SETUSER modifier 'bogus': Syntax error\r\n",
    );
    check(
        &mut admin,
        "ACL SETUSER bob +nosuch",
        "-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\r\n",
    );
    let mut conn = server.client();
    let list: Vec<String> = redis::cmd("ACL").arg("LIST").query(&mut conn).unwrap();
    assert_eq!(
        list,
        [
            "user bob on #a665a45920422f9d417e4867efdc4fb8a04a1f3fff1fa07e998e86f7f7a27ae3 ~x* %R~r* resetchannels -@all +@scripting +set +get",
            "user default on nopass ~* &* +@all",
        ]
    );
    check(
        &mut admin,
        "ACL DRYRUN bob set z 1",
        &bulk("This user has no permissions to access the 'z' key"),
    );
    check(&mut admin, "ACL DRYRUN bob set xx 1", "+OK\r\n");

    let mut bob = server.raw();
    check(
        &mut bob,
        "AUTH bob wrong",
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    check(&mut bob, "AUTH bob 123", "+OK\r\n");
    check(&mut bob, "SET xx 1", "+OK\r\n");
    check(
        &mut bob,
        "SET yy 1",
        "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n",
    );
    check(
        &mut bob,
        "HSET xx f 1",
        "-NOPERM this user has no permissions to run the 'hset' command\r\n",
    );
    // Read-only pattern: GET allowed, SET refused.
    check(&mut bob, "GET r1", "$-1\r\n");
    check(
        &mut bob,
        "SET r1 v",
        "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n",
    );
    bob.expect(
        &[
            b"EVAL",
            b"return redis.acl_check_cmd('hset','xx','f',1)",
            b"0",
        ],
        b"$-1\r\n",
    );
    bob.expect(
        &[b"EVAL", b"return redis.acl_check_cmd('set','xx',1)", b"0"],
        b":1\r\n",
    );
    bob.expect(
        &[b"EVAL", b"return redis.call('hset','xx','f',1)", b"0"],
        b"-ERR The user executing the script can't run this command or subcommand script: ba9f4061dd5c8eb1ba3ecfa5a31b4108de6e1edf, on @user_script:1.\r\n",
    );
    // Deleting the user closes its connections.
    check(&mut admin, "ACL DELUSER bob nobody", ":1\r\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    bob.stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    assert!(bob.is_closed(), "bob's connection stays open");
    assert!(std::time::Instant::now() < deadline);
    check(
        &mut admin,
        "ACL DELUSER default",
        "-ERR The 'default' user cannot be removed\r\n",
    );
}
