//! The tools a backup runs (`pg_dump`, `pg_restore`: a password through the environment, never
//! argv) and the durable copies of its files.

use std::path::Path;
use std::process::Command;

use super::{BackupError, io};

/// `program` (`pg_dump`, `pg_restore`) told to use the database at `url`, whose password (in
/// the URL's user part or its `password` parameter) reaches it through `PGPASSWORD`, never its
/// arguments: a command line is visible to every user of the machine (`ps`).
pub(super) fn postgres_tool(program: &str, url: &str) -> Command {
    let mut command = Command::new(program);
    let (url, password) = without_password(url);
    if let Some(password) = password {
        command.env("PGPASSWORD", password);
    }
    command.arg("--dbname").arg(url);
    command
}

/// `url` without its password, and the password (percent-decoded), if it had one.
///
/// Decoded as libpq decodes a connection URI: `%XX` escapes only, so a `+` in a password is a
/// `+` (form decoding would turn it into a space and the tool would fail to log in).
fn without_password(url: &str) -> (String, Option<String>) {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return (url.to_owned(), None);
    };
    let decode = |encoded: &str| {
        percent_encoding::percent_decode_str(encoded)
            .decode_utf8_lossy()
            .into_owned()
    };
    let mut password = parsed.password().map(decode);
    if password.is_some() {
        let _ = parsed.set_password(None);
    }
    if let Some(query) = parsed.query().map(str::to_owned) {
        // The other parameters stay exactly as written.
        let mut kept = Vec::new();
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some(("password", value)) => password = Some(decode(value)),
                _ => kept.push(pair),
            }
        }
        parsed.set_query((!kept.is_empty()).then(|| kept.join("&")).as_deref());
    }
    (parsed.to_string(), password)
}

pub(super) fn run(command: &mut Command) -> Result<(), BackupError> {
    let program = command.get_program().to_string_lossy().into_owned();
    let output = command.output().map_err(|error| BackupError::Tool {
        program: program.clone(),
        detail: format!("{error} (PostgreSQL's client tools must be installed)"),
    })?;
    if !output.status.success() {
        return Err(BackupError::Tool {
            program,
            detail: format!(
                "exited with {}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    Ok(())
}

/// Copies a file and makes the copy durable.
pub(super) fn copy_durably(from: &Path, to: &Path) -> Result<(), BackupError> {
    std::fs::copy(from, to).map_err(io(from))?;
    sync_file(to)
}

pub(super) fn sync_file(path: &Path) -> Result<(), BackupError> {
    std::fs::File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_reaches_pg_dump_through_the_environment_never_its_arguments() {
        for (url, password) in [
            (
                "postgres://telltale:s%40cret@db:5432/telltale",
                Some("s@cret"),
            ),
            (
                "postgres://telltale@db/telltale?password=hunter2&sslmode=require",
                Some("hunter2"),
            ),
            (
                "postgres://telltale:a+b%2Bc@db/telltale?password=hunter2+x%26y",
                Some("hunter2+x&y"),
            ),
            ("postgres://telltale:a+b%2Bc@db/telltale", Some("a+b+c")),
            ("postgres://telltale@db/telltale", None),
        ] {
            let command = postgres_tool("pg_dump", url);
            let args: Vec<String> = command
                .get_args()
                .map(|arg| arg.to_string_lossy().into_owned())
                .collect();
            assert!(
                args.iter().all(|arg| !arg.contains("s%40cret")
                    && !arg.contains("hunter2")
                    && !arg.contains("a+b")),
                "{args:?}"
            );
            assert!(
                args.iter()
                    .any(|arg| arg.starts_with("postgres://telltale@db")),
                "{args:?}"
            );
            let env: Vec<(String, String)> = command
                .get_envs()
                .filter_map(|(name, value)| {
                    Some((name.to_str()?.to_owned(), value?.to_str()?.to_owned()))
                })
                .collect();
            let given = env
                .iter()
                .find(|(name, _)| name == "PGPASSWORD")
                .map(|(_, value)| value.as_str());
            assert_eq!(given, password, "{url}");
        }
        assert!(
            without_password("postgres://u@h/d?password=x&sslmode=require")
                .0
                .ends_with("?sslmode=require")
        );
    }
}
