//! Where a sweep's database is, read as libpq users expect: a
//! `postgresql://user[:password]@host[:port]/db?sslmode=...` URL, or the
//! same with SQLAlchemy's libpq drivers named (`postgresql+psycopg2://`,
//! `postgresql+psycopg://`), so one URL serves Optuna and the sweep; a password
//! from the URL, else `PGPASSWORD`, else the password file (`passfile=` in
//! the URL, `PGPASSFILE`, else `~/.pgpass`, in libpq's
//! `host:port:db:user:password` lines with `*` and `\` escapes); the user
//! from `PGUSER` or the login name when the URL has none. The password is
//! kept in the client's config only: `shown` (every message's form) never
//! holds it.

use anyhow::Result;
use common::bad_input;
use std::path::PathBuf;

/// What libpq's `sslmode` asks (rust-postgres knows only disable, prefer
/// and require, so the verifying modes are read here).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tls {
    Disable,
    /// Encrypt if the server can (libpq's default), without checking the
    /// certificate unless `sslrootcert` names one.
    Prefer,
    Require,
    /// verify-ca and verify-full: the chain and the host name are checked
    /// (verify-ca checks the name too: stricter than libpq, never looser).
    Verify,
}

#[derive(Clone)]
pub struct Target {
    pub config: postgres::Config,
    /// The URL without its password, for messages.
    pub shown: String,
    pub tls: Tls,
    pub root_cert: Option<PathBuf>,
    /// The password was typed in the URL (where `ps` shows it).
    pub password_in_url: bool,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// Whether `text` names a database rather than a journal file.
pub fn is_url(text: &str) -> bool {
    text.contains("://") || text.starts_with("sqlite:")
}

/// SQLAlchemy's drivers that are libpq underneath: their URLs mean what
/// libpq's mean (`sslmode`, `passfile`, ...), so the sweep reads them as
/// `postgresql://`. Optuna 5 with SQLAlchemy 2.1 reads a bare
/// `postgresql://` as psycopg (3); a user with psycopg2 names it.
pub const DRIVERS: [&str; 2] = ["psycopg2", "psycopg"];

/// Reads `url` (bad input, exit 2, for anything else than a PostgreSQL URL).
pub fn parse(url: &str) -> Result<Target> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("sqlite:") {
        return Err(bad_input!(
            "--storage {}: SQLite is not built yet: give a postgresql:// URL, or leave --storage out for the journal file",
            redact(url)
        ));
    }
    let libpq_url = libpq_form(url)?;
    let (base, query) = libpq_url
        .split_once('?')
        .unwrap_or((libpq_url.as_str(), ""));
    let mut kept = Vec::new();
    let (mut tls, mut root_cert, mut passfile) = (Tls::Prefer, None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "sslmode" => {
                tls = match v {
                    "disable" => Tls::Disable,
                    "allow" | "prefer" => Tls::Prefer,
                    "require" => Tls::Require,
                    "verify-ca" | "verify-full" => Tls::Verify,
                    _ => {
                        return Err(bad_input!(
                        "--storage {}: sslmode={v}: expected disable, allow, prefer, require, verify-ca or verify-full",
                        redact(url)
                    ))
                    }
                }
            }
            "sslrootcert" => root_cert = Some(PathBuf::from(v)),
            "passfile" => passfile = Some(PathBuf::from(v)),
            _ => kept.push(pair),
        }
    }
    let rest = match kept.is_empty() {
        true => base.to_string(),
        false => format!("{base}?{}", kept.join("&")),
    };
    let mut config: postgres::Config = rest
        .parse()
        .map_err(|e| bad_input!("--storage {}: {e}", redact(url)))?;
    let password_in_url = config.get_password().is_some();
    defaults(&mut config);
    config.ssl_mode(match tls {
        Tls::Disable => postgres::config::SslMode::Disable,
        Tls::Prefer => postgres::config::SslMode::Prefer,
        Tls::Require | Tls::Verify => postgres::config::SslMode::Require,
    });
    if config.get_password().is_none() {
        if let Some(pw) = std::env::var_os("PGPASSWORD") {
            config.password(pw.as_encoded_bytes());
        } else if let Some(pw) = from_passfile(&config, passfile)? {
            config.password(pw);
        }
    }
    Ok(Target {
        shown: redact(url),
        config,
        tls,
        root_cert,
        password_in_url,
    })
}

/// `url` with `postgresql://` for its scheme (what the client parses),
/// from `postgres://`, `postgresql://` or `postgresql+DRIVER://` with a
/// libpq driver; anything else is bad input.
fn libpq_form(url: &str) -> Result<String> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let scheme = scheme.to_ascii_lowercase();
    let driver = scheme.strip_prefix("postgresql+");
    match driver {
        _ if scheme == "postgresql" || scheme == "postgres" => {}
        Some(d) if DRIVERS.contains(&d) => {}
        Some(d) => {
            return Err(bad_input!(
                "--storage {}: the driver {d:?} is not libpq's: give postgresql://, postgresql+psycopg2:// or postgresql+psycopg:// (the same database to train sweep; the driver is Optuna's choice)",
                redact(url)
            ))
        }
        None => {
            return Err(bad_input!(
                "--storage {}: expected postgresql://[user@]host[:port]/database (the sweep's database; postgresql+psycopg2:// and postgresql+psycopg:// too)",
                redact(url)
            ))
        }
    }
    Ok(format!("postgresql://{rest}"))
}

/// libpq's defaults where the URL is silent: the user, the database (the
/// user's name), the host (the local socket directory), the port.
fn defaults(config: &mut postgres::Config) {
    if config.get_user().is_none() {
        let user = std::env::var("PGUSER")
            .or_else(|_| std::env::var("USER"))
            .unwrap_or_else(|_| "postgres".into());
        config.user(&user);
    }
    if config.get_dbname().is_none() {
        let db = std::env::var("PGDATABASE")
            .unwrap_or_else(|_| config.get_user().unwrap_or_default().to_string());
        config.dbname(&db);
    }
    if config.get_hosts().is_empty() {
        match std::env::var("PGHOST") {
            Ok(h) => config.host(&h),
            Err(_) => config.host_path("/var/run/postgresql"),
        };
    }
    if config.get_ports().is_empty() {
        if let Some(p) = std::env::var("PGPORT").ok().and_then(|p| p.parse().ok()) {
            config.port(p);
        }
    }
}

/// The URL without its password (dropped, not masked, so that the result
/// still works as a URL where a password file supplies it).
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (auth_end, _) = rest
        .char_indices()
        .find(|(_, c)| matches!(c, '/' | '?'))
        .unwrap_or((rest.len(), ' '));
    let (authority, tail) = rest.split_at(auth_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_string();
    };
    let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
    let tail = mask_query(tail);
    format!("{scheme}://{user}@{host}{tail}")
}

/// `password=` in the query, dropped too.
fn mask_query(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_string();
    };
    let pairs: Vec<&str> = query
        .split('&')
        .filter(|p| !p.starts_with("password="))
        .collect();
    match pairs.is_empty() {
        true => path.to_string(),
        false => format!("{path}?{}", pairs.join("&")),
    }
}

/// The password libpq would take from the password file for this host,
/// port, database and user (None: no file, or no line matches). A file
/// others can read is skipped with libpq's warning.
fn from_passfile(config: &postgres::Config, named: Option<PathBuf>) -> Result<Option<Vec<u8>>> {
    let path = named
        .or_else(|| std::env::var_os("PGPASSFILE").map(PathBuf::from))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")));
    let Some(path) = path else { return Ok(None) };
    let Ok(meta) = std::fs::metadata(&path) else {
        return Ok(None);
    };
    use std::os::unix::fs::PermissionsExt;
    if meta.permissions().mode() & 0o077 != 0 {
        common::say!(
            "train sweep: WARNING: password file {} has group or world access; permissions should be u=rw (0600) or less: not read",
            path.display()
        );
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| bad_input!("{}: cannot read the password file: {e}", path.display()))?;
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let want = [
        host.as_str(),
        port.as_str(),
        config.get_dbname().unwrap_or_default(),
        config.get_user().unwrap_or_default(),
    ];
    Ok(text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find_map(|line| {
            let fields = pgpass_fields(line);
            (fields.len() == 5 && (0..4).all(|i| fields[i] == "*" || fields[i] == want[i]))
                .then(|| fields[4].clone().into_bytes())
        }))
}

/// One password-file line's fields: `:` separates, `\` escapes `:` and `\`.
fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields.last_mut().unwrap().extend(chars.next()),
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact("postgresql://u:s3cret@db:5432/sw?sslmode=require"),
            "postgresql://u@db:5432/sw?sslmode=require"
        );
        assert_eq!(
            redact("postgresql://u@db/sw?password=s3cret&x=1"),
            "postgresql://u@db/sw?x=1"
        );
        assert_eq!(redact("postgresql://db/sw"), "postgresql://db/sw");
        let t = parse("postgresql://u:s3cret@db:5432/sw").unwrap();
        assert!(t.password_in_url);
        assert!(!format!("{t:?}").contains("s3cret"));
    }

    #[test]
    fn bad_urls_are_bad_input() {
        for (url, says) in [
            ("mysql://u@h/db", "expected postgresql://"),
            ("sqlite:///x.db", "SQLite is not built yet"),
            (
                "postgresql://u@h/db?sslmode=maybe",
                "sslmode=maybe: expected",
            ),
        ] {
            let e = parse(url).unwrap_err();
            assert_eq!(common::exit::code_of(&e), 2);
            assert!(format!("{e:#}").contains(says), "{e:#}");
        }
    }

    #[test]
    fn one_url_serves_optuna_and_the_sweep_whatever_libpq_driver_it_names() {
        let plain = parse("postgresql://u:pw@db:5433/sw?sslmode=require").unwrap();
        for url in [
            "postgresql+psycopg2://u:pw@db:5433/sw?sslmode=require",
            "postgresql+psycopg://u:pw@db:5433/sw?sslmode=require",
            "POSTGRESQL+PSYCOPG2://u:pw@db:5433/sw?sslmode=require",
        ] {
            let t = parse(url).unwrap();
            assert_eq!(
                (t.config.get_user(), t.config.get_dbname()),
                (Some("u"), Some("sw"))
            );
            assert_eq!(t.config.get_hosts(), plain.config.get_hosts());
            assert_eq!(t.config.get_ports(), [5433]);
            assert_eq!(t.tls, Tls::Require);
            assert!(t.password_in_url);
        }
        // Messages keep the form given (what the user pastes to Optuna),
        // without the password.
        let t = parse("postgresql+psycopg2://u:pw@db/sw").unwrap();
        assert_eq!(t.shown, "postgresql+psycopg2://u@db/sw");
        // A driver that is not libpq reads the URL its own way: refused.
        let e = parse("postgresql+asyncpg://u:pw@db/sw").unwrap_err();
        assert_eq!(common::exit::code_of(&e), 2);
        let said = format!("{e:#}");
        assert!(said.contains("\"asyncpg\" is not libpq's"), "{said}");
        assert!(!said.contains("pw@"), "{said}");
    }

    #[test]
    fn password_file_lines_as_libpq_reads_them() {
        assert_eq!(
            pgpass_fields(r"h:5432:db:u:p\:w\\d"),
            ["h", "5432", "db", "u", r"p:w\d"]
        );
        assert_eq!(pgpass_fields("*:*:*:u:a:b"), ["*", "*", "*", "u", "a:b"]);
    }
}
