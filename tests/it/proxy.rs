//! A TCP proxy a test can stall: every byte between an instance and one of its stores passes
//! through it, and while it is stalled none does (connections stay open, requests hang), as
//! when a network path or a store's front end stops answering one client and not the others.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

/// Forwards `127.0.0.1:<port>` to an upstream address until dropped.
pub(crate) struct StallProxy {
    /// `http://127.0.0.1:<port>`: what the instance is told the store is.
    pub(crate) endpoint: String,
    flowing: watch::Sender<bool>,
    _accept: AbortOnDropHandle<()>,
}

impl StallProxy {
    /// A proxy in front of `upstream` (`http://host:port` or `host:port`), flowing.
    pub(crate) async fn start(upstream: &str) -> StallProxy {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let (flowing, _) = watch::channel(true);
        let gate = flowing.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else {
                    return;
                };
                let (upstream, gate) = (upstream.clone(), gate.subscribe());
                tokio::spawn(async move {
                    let _ = relay(inbound, &upstream, gate).await;
                });
            }
        });
        StallProxy {
            endpoint,
            flowing,
            _accept: AbortOnDropHandle::new(accept),
        }
    }

    /// From now on no byte passes in either direction, on open connections or new ones.
    pub(crate) fn stall(&self) {
        self.flowing.send_replace(false);
    }

    /// Bytes pass again; what waited is delivered.
    pub(crate) fn release(&self) {
        self.flowing.send_replace(true);
    }
}

/// One connection: opened upstream only while flowing, then copied both ways chunk by chunk,
/// each chunk held while the proxy is stalled.
async fn relay(
    inbound: TcpStream,
    upstream: &str,
    mut gate: watch::Receiver<bool>,
) -> std::io::Result<()> {
    gate.wait_for(|flowing| *flowing)
        .await
        .map_err(std::io::Error::other)?;
    let outbound = TcpStream::connect(upstream).await?;
    let (inbound_read, inbound_write) = inbound.into_split();
    let (outbound_read, outbound_write) = outbound.into_split();
    let there = copy_gated(inbound_read, outbound_write, gate.clone());
    let back = copy_gated(outbound_read, inbound_write, gate);
    let _ = tokio::join!(there, back);
    Ok(())
}

async fn copy_gated(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut gate: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        gate.wait_for(|flowing| *flowing)
            .await
            .map_err(std::io::Error::other)?;
        let read = from.read(&mut buffer).await?;
        if read == 0 {
            return to.shutdown().await;
        }
        // A chunk read just before a stall waits for the release too.
        gate.wait_for(|flowing| *flowing)
            .await
            .map_err(std::io::Error::other)?;
        to.write_all(&buffer[..read]).await?;
    }
}
