//! Times [`review_agent_gateway::tools::index_all`], as the daemon runs it after a
//! `symbol_search` call: completes the symbol index of a repository at a revision and prints
//! one JSON line `{"files", "parsed", "index", "ms"}` (`ms`: wall-clock milliseconds of the
//! `index_all` call, not counting process start-up).
//!
//! The index is the user's (`<state dir>/symbols.redb`; `REVIEW_AGENT_GATEWAY_HOME` relocates
//! it), as the `tool` command uses it.
//!
//! `cargo run --release -p review-agent-gateway --example symbol_index -- REPO [REV|WORKTREE]`

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use review_agent_gateway::tools::{SymbolIndex, ToolContext, index_all};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(repo) = args.next() else {
        eprintln!("usage: symbol_index REPO [REV|WORKTREE]");
        return ExitCode::from(2);
    };
    let rev = args.next();
    let index = Arc::new(SymbolIndex::open_default());
    let ctx = match ToolContext::open(std::path::Path::new(&repo), None) {
        Ok(ctx) => ctx.with_symbol_index(index),
        Err(e) => {
            eprintln!("{}: {} ({})", e.code, e.message, e.remediation);
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    match index_all(&ctx, rev.as_deref()) {
        Ok(stats) => {
            println!(
                "{{\"files\": {}, \"parsed\": {}, \"index\": \"{}\", \"ms\": {:.1}}}",
                stats.files,
                stats.parsed,
                stats.mode.as_str(),
                started.elapsed().as_secs_f64() * 1000.0
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}: {} ({})", e.code, e.message, e.remediation);
            ExitCode::FAILURE
        }
    }
}
