//! A server given as a Redis Sentinel service: `redis+sentinel://` URLs, and asking the
//! sentinels where the primary is.
//!
//! `redis+sentinel://[user:password@]host:port[,host:port...]/SERVICE[/db]`: the sentinels
//! (port 26379 when left out; IPv6 addresses in brackets), the service name as in `sentinel
//! monitor SERVICE ...`, and the database on the primary. The credentials are the primary's
//! (`AUTH`); a sentinel is asked without them unless it answers `NOAUTH`, then with them.
//!
//! A node over a service asks the sentinels whenever it opens a connection (`SENTINEL
//! get-master-addr-by-name SERVICE`, one sentinel after the other, starting with the one that
//! answered last, each within the node timeout), checks that the address answers `ROLE` with
//! `master`, and drops its connection on any failure, so the next call asks again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{Client, ConnectionAddr, ConnectionInfo, RedisConnectionInfo};

use crate::error::LockError;

/// The URL scheme of a server given as a Sentinel service.
pub const SENTINEL_SCHEME: &str = "redis+sentinel://";

const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// A parsed `redis+sentinel://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SentinelUrl {
    pub(crate) sentinels: Vec<(String, u16)>,
    pub(crate) service: String,
    pub(crate) db: i64,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
}

impl SentinelUrl {
    pub(crate) fn parse(url: &str) -> Result<SentinelUrl, LockError> {
        let invalid = |why: &str| {
            LockError::InvalidArgument(format!(
                "sentinel URL {:?}: {why} (expected {SENTINEL_SCHEME}[user:password@]host:port[,host:port...]/SERVICE[/db])",
                redact(url)
            ))
        };
        let rest = url
            .strip_prefix(SENTINEL_SCHEME)
            .ok_or_else(|| invalid("not a redis+sentinel:// URL"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(userinfo) => {
                let (user, password) = match userinfo.split_once(':') {
                    Some((user, password)) => (user, Some(password)),
                    None => (userinfo, None),
                };
                let user = (!user.is_empty()).then(|| percent_decode(user));
                match password {
                    Some(password) => (user, Some(percent_decode(password))),
                    // `redis://secret@host` means a password, as the redis crate reads it.
                    None => (None, user),
                }
            }
        };
        let mut sentinels = Vec::new();
        for host in hosts.split(',') {
            sentinels.push(parse_host(host).map_err(|why| invalid(&why))?);
        }
        let mut segments = path.split('/');
        let service = segments.next().unwrap_or_default();
        if service.is_empty() {
            return Err(invalid("no service name"));
        }
        let db = match segments.next() {
            None | Some("") => 0,
            Some(db) => db
                .parse()
                .map_err(|_| invalid(&format!("database {db:?} is not a number")))?,
        };
        if segments.any(|segment| !segment.is_empty()) {
            return Err(invalid("too many path segments"));
        }
        Ok(SentinelUrl {
            sentinels,
            service: percent_decode(service),
            db,
            username,
            password,
        })
    }

    /// The connection settings of the primary at `host:port`.
    fn primary_info(&self, host: String, port: u16) -> ConnectionInfo {
        ConnectionInfo {
            addr: ConnectionAddr::Tcp(host, port),
            redis: RedisConnectionInfo {
                db: self.db,
                username: self.username.clone(),
                password: self.password.clone(),
                ..Default::default()
            },
        }
    }

    /// The connection settings of a sentinel, with the credentials or without.
    fn sentinel_info(&self, index: usize, with_credentials: bool) -> ConnectionInfo {
        let (host, port) = self.sentinels[index].clone();
        ConnectionInfo {
            addr: ConnectionAddr::Tcp(host, port),
            redis: RedisConnectionInfo {
                username: self.username.clone().filter(|_| with_credentials),
                password: self.password.clone().filter(|_| with_credentials),
                ..Default::default()
            },
        }
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn parse_host(text: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("unclosed '[' in {text:?}"))?;
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(format!("bad address {text:?}")),
            },
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err(format!("empty host in {text:?}"));
    }
    let port = match port {
        None => DEFAULT_SENTINEL_PORT,
        Some(port) => port
            .parse()
            .ok()
            .filter(|port| *port != 0)
            .ok_or_else(|| format!("bad port in {text:?}"))?,
    };
    Ok((host.to_string(), port))
}

/// Decodes `%HH` escapes (a malformed escape stays as it is), as URLs' user names,
/// passwords and service names carry them. The `latch` CLI decodes its URLs with it too.
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The URL without its credentials, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

/// The sentinels of one service, and which of them to ask first.
pub(crate) struct Sentinels {
    pub(crate) url: SentinelUrl,
    /// The sentinel that answered last: asked first next time.
    first: AtomicUsize,
}

impl Sentinels {
    pub(crate) fn new(url: SentinelUrl) -> Sentinels {
        Sentinels {
            url,
            first: AtomicUsize::new(0),
        }
    }

    /// `service (sentinels a:1,b:2)`, for messages before any primary was found.
    pub(crate) fn describe(&self) -> String {
        let sentinels: Vec<String> = self
            .url
            .sentinels
            .iter()
            .map(|(host, port)| format_addr(host, *port))
            .collect();
        format!("{} (sentinels {})", self.url.service, sentinels.join(","))
    }

    /// Asks the sentinels for the primary, connects to it and checks its ROLE. Each sentinel,
    /// the connection and the check get `timeout` each. Returns the connection and the
    /// primary's `host:port`.
    pub(crate) async fn connect_primary(
        &self,
        timeout: Duration,
    ) -> Result<(MultiplexedConnection, String), String> {
        let (host, port) = self.ask(timeout).await?;
        let addr = format_addr(&host, port);
        let client = Client::open(self.url.primary_info(host, port))
            .map_err(|err| format!("primary {addr}: {err}"))?;
        let mut connection =
            match tokio::time::timeout(timeout, client.get_multiplexed_tokio_connection()).await {
                Ok(Ok(connection)) => connection,
                Ok(Err(err)) => return Err(format!("primary {addr} (from the sentinels): {err}")),
                Err(_) => {
                    return Err(format!(
                        "primary {addr} (from the sentinels): no connection within {timeout:?}"
                    ))
                }
            };
        // A sentinel may still name a primary that was demoted (or one that came back empty
        // before the sentinels reconfigured it is not named by them at all): ask the server.
        let role = redis::cmd("ROLE");
        match tokio::time::timeout(timeout, role.query_async::<redis::Value>(&mut connection)).await
        {
            Ok(Ok(redis::Value::Array(items))) => match items.first() {
                Some(redis::Value::BulkString(role)) if role.as_slice() == b"master" => {
                    Ok((connection, addr))
                }
                Some(redis::Value::BulkString(role)) => Err(format!(
                    "{addr}, named primary by the sentinels, is a {}",
                    String::from_utf8_lossy(role)
                )),
                other => Err(format!("{addr}: unexpected ROLE reply {other:?}")),
            },
            Ok(Ok(other)) => Err(format!("{addr}: unexpected ROLE reply {other:?}")),
            Ok(Err(err)) => Err(format!("{addr}: ROLE: {err}")),
            Err(_) => Err(format!("{addr}: no answer to ROLE within {timeout:?}")),
        }
    }

    /// The primary's `host:port` as the sentinels name it now.
    pub(crate) async fn primary_addr(&self, timeout: Duration) -> Result<String, String> {
        let (host, port) = self.ask(timeout).await?;
        Ok(format_addr(&host, port))
    }

    /// `SENTINEL get-master-addr-by-name`, one sentinel after the other.
    async fn ask(&self, timeout: Duration) -> Result<(String, u16), String> {
        let count = self.url.sentinels.len();
        let first = self.first.load(Ordering::Relaxed) % count;
        let mut failures = Vec::new();
        for step in 0..count {
            let index = (first + step) % count;
            let (host, port) = &self.url.sentinels[index];
            let sentinel = format_addr(host, *port);
            let mut answer = self.ask_one(index, false, timeout).await;
            if matches!(&answer, Err((true, _))) && self.url.password.is_some() {
                answer = self.ask_one(index, true, timeout).await;
            }
            match answer {
                Ok(Some(primary)) => {
                    self.first.store(index, Ordering::Relaxed);
                    return Ok(primary);
                }
                Ok(None) => failures.push(format!(
                    "sentinel {sentinel} knows no service {:?}",
                    self.url.service
                )),
                Err((_, err)) => failures.push(format!("sentinel {sentinel}: {err}")),
            }
        }
        Err(format!(
            "no sentinel named the primary of {:?}: {}",
            self.url.service,
            failures.join("; ")
        ))
    }

    /// One sentinel's answer; an error says whether it was `NOAUTH` (worth a second try with
    /// the credentials).
    async fn ask_one(
        &self,
        index: usize,
        with_credentials: bool,
        timeout: Duration,
    ) -> Result<Option<(String, u16)>, (bool, String)> {
        let describe = |err: redis::RedisError| (err.code() == Some("NOAUTH"), err.to_string());
        let query = async {
            let client =
                Client::open(self.url.sentinel_info(index, with_credentials)).map_err(describe)?;
            let mut connection = client
                .get_multiplexed_tokio_connection()
                .await
                .map_err(describe)?;
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(&self.url.service)
                .query_async::<Option<(String, u16)>>(&mut connection)
                .await
                .map_err(describe)
        };
        match tokio::time::timeout(timeout, query).await {
            Ok(answer) => answer,
            Err(_) => Err((false, format!("no answer within {timeout:?}"))),
        }
    }
}

fn format_addr(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> SentinelUrl {
        SentinelUrl::parse(url).unwrap_or_else(|err| panic!("{url}: {err}"))
    }

    #[test]
    fn hosts_service_and_db() {
        let url = parse("redis+sentinel://10.0.0.1:26379,10.0.0.2:26380,[::1]:5000/mymaster/3");
        assert_eq!(
            url.sentinels,
            vec![
                ("10.0.0.1".to_string(), 26379),
                ("10.0.0.2".to_string(), 26380),
                ("::1".to_string(), 5000)
            ]
        );
        assert_eq!(url.service, "mymaster");
        assert_eq!(url.db, 3);
        assert_eq!((url.username, url.password), (None, None));

        let url = parse("redis+sentinel://sentinel-a,[fe80::1]/orders");
        assert_eq!(
            url.sentinels,
            vec![
                ("sentinel-a".to_string(), 26379),
                ("fe80::1".to_string(), 26379)
            ]
        );
        assert_eq!(url.db, 0);
        assert_eq!(parse("redis+sentinel://h:1/svc/").db, 0);
    }

    #[test]
    fn credentials() {
        let url = parse("redis+sentinel://alice:p%40ss@h:1/svc");
        assert_eq!(url.username.as_deref(), Some("alice"));
        assert_eq!(url.password.as_deref(), Some("p@ss"));
        let url = parse("redis+sentinel://:secret@h:1/svc");
        assert_eq!(url.username, None);
        assert_eq!(url.password.as_deref(), Some("secret"));
        let url = parse("redis+sentinel://secret@h:1/svc");
        assert_eq!(url.password.as_deref(), Some("secret"));
        // An @ in the password, unescaped: the last @ ends the credentials.
        let url = parse("redis+sentinel://:a@b@h:1/svc");
        assert_eq!(url.password.as_deref(), Some("a@b"));
    }

    #[test]
    fn malformed() {
        for url in [
            "redis://h:1/svc",
            "redis+sentinel://h:1",
            "redis+sentinel://h:1/",
            "redis+sentinel://h:x/svc",
            "redis+sentinel://h:0/svc",
            "redis+sentinel://h:1,/svc",
            "redis+sentinel://[::1/svc",
            "redis+sentinel://h:1/svc/db",
            "redis+sentinel://h:1/svc/1/2",
        ] {
            assert!(SentinelUrl::parse(url).is_err(), "{url} parsed");
        }
        let err = SentinelUrl::parse("redis+sentinel://:hunter2@h:x/svc").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
