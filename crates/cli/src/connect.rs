//! Where to connect: redis-cli's options, and their meaning as a `redis://` URL.

use clap::Args;

/// redis-cli's connection options. `-u` wins over `-h`/`-p`/`-a`/`-n` where both are given,
/// as in redis-cli.
#[derive(Args, Debug, Clone)]
pub struct ConnectOpts {
    /// Server host name.
    #[arg(short = 'h', default_value = "127.0.0.1", value_name = "HOST")]
    pub host: String,

    /// Server port.
    #[arg(short = 'p', default_value_t = 6379, value_name = "PORT")]
    pub port: u16,

    /// Server URL: redis://[[user]:password@]host[:port][/db].
    #[arg(short = 'u', value_name = "URL")]
    pub url: Option<String>,

    /// Password (AUTH) to use when connecting.
    #[arg(short = 'a', value_name = "PASSWORD")]
    pub password: Option<String>,

    /// Database number.
    #[arg(short = 'n', value_name = "DB")]
    pub db: Option<i64>,

    /// Speak RESP3 (HELLO 3) instead of RESP2.
    #[arg(short = '3')]
    pub resp3: bool,

    /// Do not warn about a password given on the command line.
    #[arg(long)]
    pub no_auth_warning: bool,

    /// Print replies raw (the default when stdout is not a terminal).
    #[arg(long)]
    pub raw: bool,

    /// Print replies readably (the default at a terminal).
    #[arg(long)]
    pub no_raw: bool,
}

/// Where to connect and how to log in, from `-u` or the separate options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    pub user: Option<String>,
    pub password: Option<String>,
    pub db: i64,
}

impl ConnectOpts {
    /// The endpoint: `-u` parsed, or `-h`/`-p`/`-a`/`-n`.
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        let Some(url) = &self.url else {
            return Ok(Endpoint {
                host: self.host.clone(),
                port: self.port,
                user: None,
                password: self.password.clone(),
                db: self.db.unwrap_or(0),
            });
        };
        let rest = url
            .strip_prefix("redis://")
            .ok_or_else(|| format!("invalid URL {url:?}: only redis:// is supported"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (auth, hostport) = match authority.rsplit_once('@') {
            Some((auth, hostport)) => (Some(auth), hostport),
            None => (None, authority),
        };
        let (user, password) = match auth {
            Some(auth) => match auth.split_once(':') {
                Some((user, password)) => (
                    Some(latch_lock::percent_decode(user)).filter(|u| !u.is_empty()),
                    Some(latch_lock::percent_decode(password)),
                ),
                None => (
                    Some(latch_lock::percent_decode(auth)).filter(|u| !u.is_empty()),
                    None,
                ),
            },
            None => (None, None),
        };
        let (host, port) = if let Some(bracketed) = hostport.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or_else(|| format!("invalid URL {url:?}"))?;
            (host.to_string(), after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((host, port)) => (host.to_string(), Some(port)),
                None => (hostport.to_string(), None),
            }
        };
        // What the URL leaves out comes from the other options, as in redis-cli.
        let port = match port {
            Some(port) => port
                .parse()
                .map_err(|_| format!("invalid port in URL {url:?}"))?,
            None => self.port,
        };
        let db = match path.trim_end_matches('/') {
            "" => 0,
            db => db
                .parse()
                .map_err(|_| format!("invalid database in URL {url:?}"))?,
        };
        Ok(Endpoint {
            host: if host.is_empty() {
                "127.0.0.1".into()
            } else {
                host
            },
            port,
            user,
            password: password.or_else(|| self.password.clone()),
            db: if path.trim_end_matches('/').is_empty() {
                self.db.unwrap_or(0)
            } else {
                db
            },
        })
    }

    /// The options as one `redis://` URL, for the lock commands (which use the `redis` crate).
    pub fn redis_url(&self) -> String {
        if let Some(url) = &self.url {
            return url.clone();
        }
        let auth = match &self.password {
            Some(password) => format!(":{}@", percent_encode(password)),
            None => String::new(),
        };
        let db = self.db.map(|db| format!("/{db}")).unwrap_or_default();
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("redis://{auth}{host}:{}{db}", self.port)
    }

    /// A Redis Sentinel service as a `redis+sentinel://` URL, for the lock commands: the
    /// sentinels (`host:port` each), the service, and -a / -n for the primary.
    pub fn sentinel_url(&self, sentinels: &[String], service: &str) -> String {
        let auth = match &self.password {
            Some(password) => format!(":{}@", percent_encode(password)),
            None => String::new(),
        };
        let db = self.db.map(|db| format!("/{db}")).unwrap_or_default();
        format!(
            "redis+sentinel://{auth}{}/{}{db}",
            sentinels.join(","),
            percent_encode(service)
        )
    }
}

/// Percent-encodes everything but unreserved URL characters.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> ConnectOpts {
        ConnectOpts {
            host: "127.0.0.1".into(),
            port: 6379,
            url: None,
            password: None,
            db: None,
            resp3: false,
            raw: false,
            no_raw: false,
            no_auth_warning: false,
        }
    }

    #[test]
    fn endpoint_from_url() {
        let mut o = opts();
        assert_eq!(o.endpoint().unwrap().port, 6379);
        o.url = Some("redis://al%40ice:p%3Ass@example.com:7000/2".into());
        let e = o.endpoint().unwrap();
        assert_eq!(e.host, "example.com");
        assert_eq!(e.port, 7000);
        assert_eq!(e.user.as_deref(), Some("al@ice"));
        assert_eq!(e.password.as_deref(), Some("p:ss"));
        assert_eq!(e.db, 2);
        o.url = Some("redis://:secret@[::1]".into());
        let e = o.endpoint().unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.user, e.password.as_deref()),
            ("::1", 6379, None, Some("secret"))
        );
        o.url = Some("http://x".into());
        assert!(o.endpoint().is_err());
        o.url = Some("redis://x:notaport".into());
        assert!(o.endpoint().is_err());
    }

    #[test]
    fn url_from_parts() {
        assert_eq!(opts().redis_url(), "redis://127.0.0.1:6379");
        let mut o = opts();
        o.password = Some("p@ss word".into());
        o.db = Some(3);
        o.host = "::1".into();
        assert_eq!(o.redis_url(), "redis://:p%40ss%20word@[::1]:6379/3");
        o.url = Some("redis://example:7000/1".into());
        assert_eq!(o.redis_url(), "redis://example:7000/1");
    }

    #[test]
    fn sentinel_url_from_parts() {
        let sentinels = ["10.0.0.1:26379".to_string(), "[::1]:26380".to_string()];
        assert_eq!(
            opts().sentinel_url(&sentinels, "mymaster"),
            "redis+sentinel://10.0.0.1:26379,[::1]:26380/mymaster"
        );
        let mut o = opts();
        o.password = Some("p@ss".into());
        o.db = Some(2);
        assert_eq!(
            o.sentinel_url(&sentinels[..1], "my master"),
            "redis+sentinel://:p%40ss@10.0.0.1:26379/my%20master/2"
        );
    }
}
