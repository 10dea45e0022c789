//! Throughput of [`review_agent_gateway::security::redact`] on real text: every `.rs` file under
//! a folder (default `/work/corpus/tokio`) concatenated, then the same text with a secret
//! planted every 200 lines.
//!
//! `cargo run --release -p review-agent-gateway --example redact_throughput [-- DIR]`

use std::path::Path;
use std::time::Instant;

use review_agent_gateway::security::redact::Redactor;

fn collect(dir: &Path, out: &mut String) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && !path.ends_with(".git") && !path.ends_with("target") {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && let Ok(text) = std::fs::read_to_string(&path)
        {
            out.push_str(&text);
        }
    }
}

fn measure(name: &str, redactor: &Redactor, text: &str) {
    let _ = redactor.redact(text); // warm up (lazy regex DFA)
    let runs = 5;
    let started = Instant::now();
    let mut changed = 0;
    for _ in 0..runs {
        let out = redactor.redact(text);
        changed = out.len();
    }
    let secs = started.elapsed().as_secs_f64() / f64::from(runs);
    let mb = text.len() as f64 / 1e6;
    println!(
        "{name}: {mb:.1} MB in {:.1} ms = {:.0} MB/s (output {:.1} MB)",
        secs * 1e3,
        mb / secs,
        changed as f64 / 1e6
    );
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/work/corpus/tokio".to_owned());
    let mut text = String::new();
    collect(Path::new(&dir), &mut text);
    let started = Instant::now();
    let redactor = Redactor::new().with_path(Path::new(&dir), "<repo>");
    println!("build Redactor::new(): {:?}", started.elapsed());
    measure("source", &redactor, &text);
    // What the plain source loses (false positives, for a human to judge).
    let changed: Vec<(&str, String)> = text
        .lines()
        .filter_map(|l| {
            let r = redactor.redact(l);
            (r != l).then(|| (l, r.into_owned()))
        })
        .collect();
    println!("lines changed in the plain source: {}", changed.len());
    for (before, after) in changed.iter().take(15) {
        println!("  - {}\n    + {}", before.trim(), after.trim());
    }
    let mut planted = String::with_capacity(text.len() * 2);
    for (i, line) in text.lines().enumerate() {
        planted.push_str(line);
        planted.push('\n');
        if i % 200 == 0 {
            planted.push_str(&format!(
                "GITHUB_TOKEN=ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef{i:04} at {dir}/src/lib.rs\n"
            ));
        }
    }
    measure("source + a secret every 200 lines", &redactor, &planted);
}
