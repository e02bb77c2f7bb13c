//! The socket: bound owner-only, serving one line per request with
//! bounded lines; a malformed one gets a typed error and the connection
//! stays usable.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::protocol::{answer, Command, Refusal};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

/// Longest request line.
pub const MAX_LINE: usize = 64 * 1024;

/// Why the control socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("{path}: {what}")]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    #[error("{path} exists and is not a socket; refusing to replace it")]
    NotASocket { path: PathBuf },
}

/// What the socket's commands act on.
pub trait Commands: Send + Sync + 'static {
    /// Runs one command.
    fn run(&self, cmd: Command)
        -> impl std::future::Future<Output = Result<Value, Refusal>> + Send;
}

/// Binds the socket: removes a stale one (a daemon that died leaves it),
/// refuses to replace anything else, and makes it owner-only.
pub fn bind(path: &Path) -> Result<UnixListener, ControlError> {
    let io = |what, source| ControlError::Io {
        path: path.to_owned(),
        what,
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io("creating its directory", e))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_socket() {
                return Err(ControlError::NotASocket {
                    path: path.to_owned(),
                });
            }
            std::fs::remove_file(path).map_err(|e| io("removing the stale socket", e))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("checking", e)),
    }
    let listener = UnixListener::bind(path).map_err(|e| io("binding", e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| io("setting mode 0600", e))?;
    Ok(listener)
}

/// Serves the socket until `shutdown`.
pub async fn serve<C: Commands>(
    listener: UnixListener,
    commands: Arc<C>,
    shutdown: CancellationToken,
) {
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => return,
            s = listener.accept() => match s {
                Ok((s, _)) => s,
                Err(e) => {
                    log::warn!("control: accept: {e}");
                    continue;
                }
            },
        };
        let commands = commands.clone();
        tokio::spawn(async move { connection(stream, &*commands).await });
    }
}

async fn connection<C: Commands>(stream: UnixStream, commands: &C) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = match (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let reply = if n > MAX_LINE {
            // Skip the rest of the oversized line.
            let mut sink = Vec::new();
            let _ = reader.read_until(b'\n', &mut sink).await;
            answer(&Err(Refusal::new(
                "bad_request",
                format!("request line over {MAX_LINE} bytes"),
            )))
        } else {
            handle(&line, commands).await
        };
        let mut out = serde_json::to_vec(&reply).unwrap_or_default();
        out.push(b'\n');
        if write.write_all(&out).await.is_err() {
            return;
        }
    }
}

async fn handle<C: Commands>(line: &[u8], commands: &C) -> Value {
    let cmd = match Command::parse(line) {
        Ok(cmd) => cmd,
        Err(r) => return answer(&Err(r)),
    };
    let name = cmd.name();
    let start = Instant::now();
    let result = commands.run(cmd).await;
    log::info!(
        "control: {name} {} in {:.0} ms",
        if result.is_ok() { "done" } else { "refused" },
        start.elapsed().as_secs_f64() * 1e3
    );
    answer(&result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Echo;

    impl Commands for Echo {
        async fn run(&self, cmd: Command) -> Result<Value, Refusal> {
            match cmd {
                Command::Drain { slot, .. } => Ok(json!(slot)),
                other => Err(Refusal::new(
                    "not_here",
                    format!("no {} here", other.name()),
                )),
            }
        }
    }

    #[tokio::test]
    async fn lines_in_lines_out_and_errors_are_typed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ctl.sock");
        std::fs::write(&path, "").expect("a plain file");
        assert!(matches!(bind(&path), Err(ControlError::NotASocket { .. })));
        std::fs::remove_file(&path).expect("rm");
        let listener = bind(&path).expect("bind");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let stop = CancellationToken::new();
        tokio::spawn(serve(listener, Arc::new(Echo), stop.clone()));
        let s = UnixStream::connect(&path).await.expect("connect");
        let (r, mut w) = s.into_split();
        let mut lines = BufReader::new(r).lines();
        for (req, want) in [
            (
                "{\"cmd\":\"drain\",\"slot\":5}\n",
                json!({"ok": true, "data": 5}),
            ),
            ("nonsense\n", json!("bad_request")),
            ("{\"cmd\":\"nope\"}\n", json!("unknown_command")),
            ("{\"x\":1}\n", json!("bad_request")),
        ] {
            w.write_all(req.as_bytes()).await.expect("write");
            let got: Value =
                serde_json::from_str(&lines.next_line().await.expect("read").expect("line"))
                    .expect("json");
            if want.is_string() {
                assert_eq!(got["error"]["type"], want, "{req}");
            } else {
                assert_eq!(got, want);
            }
        }
        // A stale socket from a dead daemon is replaced.
        stop.cancel();
        drop(w);
        bind(&path).expect("rebinds over a stale socket");
    }
}
