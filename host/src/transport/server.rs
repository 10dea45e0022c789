//! The daemon's listener (DESIGN §3): bind loopback, serve the router, shut down gracefully.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::engine::Gateway;
use crate::error::{GatewayError, codes};
use crate::security::LiveToken;

use super::http::{HttpState, router};

/// How to listen.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to bind; loopback unless `allow_remote`.
    pub bind: IpAddr,
    /// Port; 0 picks a free one (the chosen address is reported through `on_listening`).
    pub port: u16,
    /// Permit a non-loopback `bind` (DESIGN §3: only with `--allow-remote`; the token is
    /// always required).
    pub allow_remote: bool,
}

/// Bind, announce the address, serve until SIGINT/SIGTERM, then shut the engine down
/// (running reviews get a few seconds; what is left is marked `interrupted`).
///
/// # Errors
/// `request.invalid` for a non-loopback bind without `allow_remote`; `gateway.bind_failed`
/// when the port is taken.
pub async fn serve(
    gateway: Gateway,
    token: LiveToken,
    options: ServeOptions,
    on_listening: impl FnOnce(SocketAddr),
) -> Result<(), GatewayError> {
    if !options.bind.is_loopback() && !options.allow_remote {
        return Err(GatewayError::new(
            codes::REQUEST_INVALID,
            format!(
                "refusing to listen on {}: not a loopback address",
                options.bind
            ),
            "Bind 127.0.0.1 (the default), or pass --allow-remote if you really mean to expose the gateway.",
        ));
    }
    let listener = tokio::net::TcpListener::bind((options.bind, options.port))
        .await
        .map_err(|e| {
            GatewayError::new(
                codes::GATEWAY_BIND_FAILED,
                format!("cannot listen on {}:{}: {e}", options.bind, options.port),
                "Is another gateway already running? Stop it, or choose another --port.",
            )
        })?;
    let addr = listener.local_addr().map_err(|e| {
        GatewayError::new(
            codes::GATEWAY_BIND_FAILED,
            format!("no local address: {e}"),
            "Retry.",
        )
    })?;
    let stop = tokio_util::sync::CancellationToken::new();
    let state = HttpState::new(gateway.clone(), token, addr.port())
        .with_stop(stop.clone())
        .with_listening(addr);
    // The handlers are registered before the listening line goes out: a SIGTERM sent as soon
    // as it is read must stop the daemon gracefully, not kill it.
    let signalled = shutdown_signal();
    on_listening(addr);
    // Retention (DESIGN §5): purge old event logs hourly, not only at start.
    let purger = gateway.clone();
    let purge = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(3600));
        tick.tick().await;
        loop {
            tick.tick().await;
            let gateway = purger.clone();
            match tokio::task::spawn_blocking(move || gateway.purge()).await {
                Ok(Ok(purged)) if purged > 0 => tracing::info!(purged, "purged old runs"),
                Ok(Err(error)) => tracing::warn!(%error, "purging old runs failed"),
                _ => {}
            }
        }
    });
    // On SIGTERM/Ctrl-C the server stops accepting and waits for its connections while the
    // engine gives running reviews their grace and then interrupts them — which ends the event
    // streams those connections are waiting on (a model review's may last minutes).
    let signal = tokio::spawn({
        let stop = stop.clone();
        async move {
            signalled.await;
            stop.cancel();
        }
    });
    let stopping = tokio::spawn({
        let (gateway, stop) = (gateway.clone(), stop.clone());
        async move {
            stop.cancelled().await;
            gateway.shutdown(SHUTDOWN_GRACE).await;
        }
    });
    let served = axum::serve(listener, router(state))
        .with_graceful_shutdown(stop.clone().cancelled_owned())
        .await;
    signal.abort();
    purge.abort();
    // Also when the server stopped on its own (an accept error): runs are interrupted.
    stop.cancel();
    let _ = stopping.await;
    served.map_err(|e| {
        GatewayError::new(
            codes::INTERNAL,
            format!("the server stopped: {e}"),
            "Restart the gateway.",
        )
    })
}

/// How long running reviews get to finish on shutdown before they are interrupted.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// SIGTERM or SIGINT (Ctrl-C): the handlers are registered when this is called, and the
/// future completes at the first signal.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        // Registered now, not at the first poll.
        let mut terminate = signal(SignalKind::terminate()).ok();
        let mut interrupt = signal(SignalKind::interrupt()).ok();
        async move {
            let term = async {
                match terminate.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let int = async {
                match interrupt.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = term => {},
                () = int => {},
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
